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
import sys
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .errors import DecodeError
from .jsoncodec import dumps, loads
from .pointer import PointerPattern
from .schema import CompiledSchema, SchemaCompiler, SchemaUnusable
from .types import JSON, JSONObject


class ToolEntry:
    """One tool as the proxy advertised it; its ``outputSchema`` is compiled on first use.

    Compiling lazily keeps a huge ``tools/list`` cheap: only the schemas of tools actually called
    are ever compiled, and the compiler shares one validator per distinct schema. Until then the
    schema is kept as its JSON text: an entry is then one object the garbage collector tracks, not
    one per node of its schema (50,000 tools would otherwise make every full collection walk
    300,000 dicts, a third of a second that holds every session).

    Attributes:
        name: the tool name.
        output_schema: the advertised ``outputSchema``, or ``None`` when the tool declares none.
        nullable: places in ``structuredContent`` declared nullable (config or OpenAPI ``nullable``).
        ui_resource_uri: ``_meta.ui.resourceUri`` of an MCP Apps tool, else ``None``.
        size: an estimate of the bytes the entry holds (its tool's encoded size), for the catalog bound.
    """

    __slots__ = (
        "_compiled",
        "_compiler",
        "_problem",
        "_schema",
        "_schema_text",
        "name",
        "nullable",
        "size",
        "ui_resource_uri",
    )

    def __init__(
        self,
        name: str,
        output_schema: JSON | None,
        nullable: tuple[PointerPattern, ...] = (),
        ui_resource_uri: str | None = None,
        compiler: SchemaCompiler | None = None,
        problem: str | None = None,
        size: int = 0,
    ) -> None:
        self.name = name
        self.size = size
        self._schema: JSON | None = output_schema
        self._schema_text: bytes | None = None
        if isinstance(output_schema, dict | list):
            try:
                self._schema_text, self._schema = dumps(output_schema), None
            except DecodeError:
                pass  # not writable as JSON (a lone surrogate): kept as it is
        self.nullable = nullable
        self.ui_resource_uri = ui_resource_uri
        self._compiler = compiler
        self._compiled: CompiledSchema | None = None
        self._problem = problem

    @property
    def output_schema(self) -> JSON | None:
        """The advertised ``outputSchema`` (decoded on first use), or ``None`` when there is none."""
        if self._schema_text is not None:
            self._schema, self._schema_text = loads(self._schema_text), None
        return self._schema

    @property
    def has_output_schema(self) -> bool:
        """True when the tool declares an ``outputSchema``."""
        return self._schema_text is not None or self._schema is not None

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


def build_entry(
    tool: JSONObject, nullable: tuple[PointerPattern, ...], compiler: SchemaCompiler, size: int = 0
) -> ToolEntry:
    """Make the catalog entry of an advertised ``Tool`` object (``tools/list`` result member);
    ``size`` is the tool's encoded size in bytes."""
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
        size=size,
    )


class ToolSet(dict[str, ToolEntry]):
    """The tools of one ``tools/list`` by name; immutable by convention, shared by every scope whose
    list holds the same entries (see :class:`CatalogPool`)."""

    __slots__ = ("__weakref__", "key", "size")

    def __init__(self, entries: list[ToolEntry], key: tuple[int, ...]) -> None:
        super().__init__((entry.name, entry) for entry in entries)
        self.key = key
        #: bytes held: the entries' estimates and the mapping itself
        self.size = sys.getsizeof(self) + sum(entry.size + _PER_NAME for entry in self.values())


_PER_NAME = 120  # a name string and its slot, about


class CatalogPool:
    """One copy of each distinct tool list, however many scopes hold it, and their total size.

    Thousands of clients of one upstream list the same tools: their catalogs are one
    :class:`ToolSet`. A set lives while a scope holds it; :attr:`bytes` is the sum of the live
    sets' sizes, and ``over`` is called when it passes ``max_bytes`` (the scope store then forgets
    the least recently used scopes).

    Args:
        max_bytes: the bound on :attr:`bytes`.
        over: called (with no argument) after a set is added that takes :attr:`bytes` past the bound.
    """

    def __init__(self, max_bytes: int = 256 * 1024 * 1024, over: Callable[[], None] | None = None) -> None:
        self.max_bytes = max_bytes
        self.over = over
        self.bytes = 0
        self._sets: dict[tuple[int, ...], weakref.ref[ToolSet]] = {}

    def __len__(self) -> int:
        return len(self._sets)

    def get(self, entries: list[ToolEntry]) -> ToolSet:
        """The shared set of ``entries`` (entries are shared by content, so identity is content)."""
        key = tuple(id(entry) for entry in entries)
        ref = self._sets.get(key)
        found = ref() if ref is not None else None
        if found is not None:
            return found
        found = ToolSet(entries, key)
        self._sets[key] = weakref.ref(found, self._gone(key, found.size))
        self.bytes += found.size
        if self.bytes > self.max_bytes and self.over is not None:
            self.over()
        return found

    def _gone(self, key: tuple[int, ...], size: int) -> Callable[[weakref.ref[ToolSet]], None]:
        def gone(ref: weakref.ref[ToolSet]) -> None:
            if self._sets.get(key) is ref:
                del self._sets[key]
            self.bytes -= size

        return gone


@dataclass(slots=True)
class ToolCatalog:
    """The tools of one scope, by name.

    Attributes:
        tools: entries by tool name (a :class:`ToolSet` shared with every scope that listed the same
            tools, when the list came in one page).
        learned_at: ``time.monotonic()`` of the last update, ``None`` if never filled.
        expires_at: ``time.monotonic()`` after which the list may no longer be reused (2026-07-28
            ``ttlMs``), ``None`` for lists that stay valid until invalidated (legacy sessions).
        pool: where shared sets come from (``None``: this catalog keeps its own).
    """

    tools: Mapping[str, ToolEntry] = field(default_factory=dict)
    learned_at: float | None = None
    expires_at: float | None = None
    absent: set[str] = field(default_factory=set)
    pool: CatalogPool | None = None

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
            self.tools = self.pool.get(entries) if self.pool is not None else {e.name: e for e in entries}
            self.absent = set()
        else:
            self.tools = {**self.tools, **{entry.name: entry for entry in entries}}
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
