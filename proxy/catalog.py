"""What the proxy knows of each tool, scoped so that no two clients ever share it.

A :class:`ToolCatalog` holds the tools of one *scope*: one upstream seen through one session and
one authorization (DESIGN section 2, ``catalog.py``). It is filled from ``tools/list`` responses,
every page, whether the client asked for them or the proxy fetched them itself. Each
:class:`ToolEntry` keeps the ``outputSchema`` as the proxy advertised it, compiled once. Scopes
themselves live in :mod:`proxy.scopes`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field

from .pointer import PointerPattern
from .schema import CompiledSchema, SchemaCompiler, SchemaUnusable
from .types import JSON, JSONObject


class ToolEntry:
    """One tool as the proxy advertised it; its ``outputSchema`` is compiled on first use.

    Compiling lazily keeps a huge ``tools/list`` cheap: only the schemas of tools actually called
    are ever compiled, and the compiler shares one validator per distinct schema.

    Attributes:
        name: the tool name.
        output_schema: the advertised ``outputSchema``, or ``None`` when the tool declares none.
        nullable: places in ``structuredContent`` declared nullable (config or OpenAPI ``nullable``).
        ui_resource_uri: ``_meta.ui.resourceUri`` of an MCP Apps tool, else ``None``.
    """

    __slots__ = ("_compiled", "_compiler", "_problem", "name", "nullable", "output_schema", "ui_resource_uri")

    def __init__(
        self,
        name: str,
        output_schema: JSON | None,
        nullable: tuple[PointerPattern, ...] = (),
        ui_resource_uri: str | None = None,
        compiler: SchemaCompiler | None = None,
        problem: str | None = None,
    ) -> None:
        self.name = name
        self.output_schema = output_schema
        self.nullable = nullable
        self.ui_resource_uri = ui_resource_uri
        self._compiler = compiler
        self._compiled: CompiledSchema | None = None
        self._problem = problem

    @property
    def has_output_schema(self) -> bool:
        """True when the tool declares an ``outputSchema``."""
        return self.output_schema is not None

    @property
    def compiled(self) -> CompiledSchema | None:
        """The compiled ``outputSchema``; ``None`` when there is none or it is unusable."""
        if self._compiler is not None:
            compiler, self._compiler = self._compiler, None
            if self.output_schema is not None and self._problem is None:
                try:
                    self._compiled = compiler.compile(self.output_schema)
                except SchemaUnusable as exc:
                    self._problem = str(exc)
        return self._compiled

    @property
    def schema_problem(self) -> str | None:
        """Why the schema cannot be used to validate, if it cannot."""
        _ = self.compiled
        return self._problem

    def without_validation(self, reason: str) -> ToolEntry:
        """This entry with validation switched off (for a result too large to validate)."""
        return ToolEntry(self.name, self.output_schema, self.nullable, self.ui_resource_uri, problem=reason)


def build_entry(tool: JSONObject, nullable: tuple[PointerPattern, ...], compiler: SchemaCompiler) -> ToolEntry:
    """Make the catalog entry of an advertised ``Tool`` object (``tools/list`` result member)."""
    meta = tool.get("_meta")
    ui = meta.get("ui") if isinstance(meta, dict) else None
    uri = ui.get("resourceUri") if isinstance(ui, dict) else None
    if uri is None and isinstance(meta, dict):
        uri = meta.get("ui/resourceUri")  # deprecated flat key of MCP Apps drafts
    return ToolEntry(
        str(tool.get("name")),
        tool.get("outputSchema"),
        nullable,
        uri if isinstance(uri, str) else None,
        compiler,
    )


@dataclass(slots=True)
class ToolCatalog:
    """The tools of one scope, by name.

    Attributes:
        tools: entries by tool name.
        learned_at: ``time.monotonic()`` of the last update, ``None`` if never filled.
        expires_at: ``time.monotonic()`` after which the list may no longer be reused (2026-07-28
            ``ttlMs``), ``None`` for lists that stay valid until invalidated (legacy sessions).
    """

    tools: dict[str, ToolEntry] = field(default_factory=dict)
    learned_at: float | None = None
    expires_at: float | None = None
    absent: set[str] = field(default_factory=set)

    def fresh(self) -> bool:
        """True while the list may be reused (it has been learned and has not expired)."""
        return self.learned_at is not None and (self.expires_at is None or time.monotonic() < self.expires_at)

    def get(self, name: str) -> ToolEntry | None:
        """The entry of tool ``name``, if the scope has listed it and the list is still fresh."""
        return self.tools.get(name) if self.fresh() else None

    def known_absent(self, name: str) -> bool:
        """True when the fresh list was fetched for ``name`` and does not have it (no fetch again)."""
        return name in self.absent and self.fresh()

    def learn(self, entries: list[ToolEntry], *, first_page: bool, ttl: float | None = None) -> None:
        """Record a ``tools/list`` page; the first page starts a new list, later pages add to it.

        Args:
            entries: the page's tools.
            first_page: the request carried no cursor.
            ttl: seconds the list may be reused (``ttlMs`` / 1000), ``None`` for no limit.
        """
        if first_page:
            self.tools = {}
            self.absent = set()
        for entry in entries:
            self.tools[entry.name] = entry
        self.learned_at = time.monotonic()
        self.expires_at = None if ttl is None else self.learned_at + ttl

    def clear(self) -> None:
        """Forget every tool (``notifications/tools/list_changed``)."""
        self.tools = {}
        self.absent = set()
        self.learned_at = self.expires_at = None


#: Per-process key of the scope hash: a scope key in a log line cannot be reversed to the token by
#: trying candidates offline (an unkeyed hash of a weak password can).
_SCOPE_KEY = secrets.token_bytes(32)


def scope_key(upstream: str, session_id: str | None, authorization: str | None, cookie: str | None) -> str:
    """Hash what identifies a client to the upstream into a short, log-safe scope key.

    Two requests share a catalog only when they reach the same upstream with the same session id,
    ``Authorization`` and ``Cookie`` headers. The raw values never leave this function; the hash
    is keyed with a random per-process secret (HMAC-SHA256), so keys are stable within a process.
    """
    digest = hmac.new(_SCOPE_KEY, digestmod=hashlib.sha256)
    for part in (upstream, session_id or "", authorization or "", cookie or ""):
        digest.update(part.encode("utf-8", "surrogateescape"))
        digest.update(b"\0")
    return digest.hexdigest()[:16]
