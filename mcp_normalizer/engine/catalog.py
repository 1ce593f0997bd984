"""What the proxy knows of each tool, scoped so that no two clients ever share it.

A :class:`ToolCatalog` holds the tools of one *scope*: one upstream seen through one session and
one authorization (DESIGN section 2, ``catalog.py``). It is filled from ``tools/list`` responses,
every page, whether the client asked for them or the proxy fetched them itself. Each
:class:`ToolEntry` keeps the ``outputSchema`` as the proxy advertised it, compiled once. Scopes
themselves live in :mod:`mcp_normalizer.engine.scopes`.
"""

from __future__ import annotations

import hashlib
import secrets
import sys
import time
import weakref
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

import msgspec
import orjson

from ..errors import DecodeError
from ..types import JSON, ArgumentKeys, JSONObject
from ..wire.jsoncodec import dumps, fingerprint, loads
from ..wire.pointer import PointerPattern
from .schema import CompiledSchema, SchemaCompiler, SchemaUnusable


def definition_digest(tool: JSONObject, text: bytes | None = None) -> str:
    """A digest of a tool's definition as the server listed it (every member, canonical: key order
    and spacing do not matter): 32 hex digits, or ``""`` when the tool cannot be encoded
    (``text``: the tool's :func:`~mcp_normalizer.wire.jsoncodec.fingerprint`, when at hand).
    What a lesson is keyed by (:mod:`mcp_normalizer.engine.lessons`)."""
    try:
        return hashlib.blake2b(text if text is not None else fingerprint(tool), digest_size=16).hexdigest()
    except DecodeError:
        return ""


class ToolEntry(msgspec.Struct, gc=False, eq=False):
    """One tool as the proxy advertised it; its ``outputSchema`` is compiled on first use.

    Compiling lazily keeps a huge ``tools/list`` cheap: only the schemas of tools actually called
    are ever compiled, and the compiler shares one validator per distinct schema. Until then the
    schema is kept as its JSON text, and the entry itself is invisible to the cyclic garbage
    collector (``gc=False``: it holds no cycle): 50,000 learned tools add no work to a full
    collection, where they used to add 300,000 dicts (a third of a second holding every session).
    Entries compare by identity.

    Attributes:
        name: the tool name.
        schema: the ``outputSchema`` as given, until it is kept as ``schema_text`` (read
            :attr:`output_schema`).
        nullable: places in ``structuredContent`` declared nullable (config or OpenAPI ``nullable``).
        ui_resource_uri: ``_meta.ui.resourceUri`` of an MCP Apps tool, else ``None``.
        compiler: compiles the schema on first use (``None`` once it has).
        problem: why the schema cannot be used to validate, once known (or given).
        size: an estimate of the bytes the entry holds (its tool's encoded size), for the catalog bound.
        schema_text: the ``outputSchema`` as JSON, until it is decoded.
        compiled_schema: the compiled schema, once compiled.
        definition: the digest of the tool as the server listed it
            (:func:`mcp_normalizer.engine.lessons.definition_digest`; what a lesson is keyed by), ``""``
            when unknown.
        arguments: the argument map for a host that refuses some of the tool's property names
            (rule ``host_schemas``): advertised -> the tool's own, whichever client the tool was
            listed for (:func:`~mcp_normalizer.engine.rules.host_schemas.host_argument_map`);
            ``None`` when every name is valid, or when they were not read.
        argument_places: the argument places :attr:`arguments` applies at (JSON pointers into a
            call's arguments under the advertised names, ``*`` any item; ``""`` the arguments
            object itself, the only one for the Anthropic API).
        keys_read: the tool's property names were read for :attr:`arguments`; ``False`` for a tool
            listed to another client without the rules (:meth:`Normalizer._unchanged
            <mcp_normalizer.engine.normalize.Normalizer._unchanged>`: reading them for every tool
            would cost the huge list its bound), whose map a Claude host's call fetches the list for.
        listed: the tool's text as listed, kept until :meth:`digest` makes ``definition`` of it
            (a tool listed without the rules: the digest costs a decode, and is rarely asked for).
        enums: for a tool listed with its numeric or boolean ``enum`` values as strings (rule
            ``gemini_schemas``), the places of its arguments that hold one (JSON pointers, ``*`` an
            item) -> the strings standing for numbers or booleans, each that value's JSON text
            (:func:`~mcp_normalizer.engine.rules.gemini_schemas.enum_arguments`);
            ``None`` for any other.
    """

    name: str
    schema: JSON | None = None
    nullable: tuple[PointerPattern, ...] = ()
    ui_resource_uri: str | None = None
    compiler: SchemaCompiler | None = None
    problem: str | None = None
    size: int = 0
    schema_text: bytes | None = None
    compiled_schema: CompiledSchema | None = None
    definition: str = ""
    arguments: dict[str, str] | None = None
    listed: bytes | None = None
    keys_read: bool = True
    enums: dict[str, tuple[str, ...]] | None = None
    argument_places: tuple[str, ...] = ("",)

    def digest(self) -> str:
        """:attr:`definition`, made from :attr:`listed` the first time it is asked for."""
        if self.listed is not None:
            try:
                tool = loads(self.listed)
            except DecodeError:
                tool = None
            self.definition = definition_digest(tool) if isinstance(tool, dict) else ""
            self.listed = None
        return self.definition

    def __post_init__(self) -> None:
        if isinstance(self.schema, dict | list):
            try:
                self.schema_text, self.schema = dumps(self.schema), None
            except DecodeError:
                pass  # not writable as JSON (a lone surrogate): kept as it is

    @property
    def output_schema(self) -> JSON | None:
        """The advertised ``outputSchema`` (decoded on first use), or ``None`` when there is none."""
        if self.schema_text is not None:
            self.schema, self.schema_text = loads(self.schema_text), None
        return self.schema

    @property
    def has_output_schema(self) -> bool:
        """True when the tool declares an ``outputSchema``."""
        return self.schema_text is not None or self.schema is not None

    @property
    def compiled(self) -> CompiledSchema | None:
        """The compiled ``outputSchema``; ``None`` when there is none or it is unusable."""
        if self.compiler is not None:
            compiler, self.compiler = self.compiler, None
            if self.output_schema is not None and self.problem is None:
                try:
                    self.compiled_schema = compiler.compile(self.output_schema)
                except SchemaUnusable as exc:
                    self.problem = str(exc)
        return self.compiled_schema

    def without_validation(self, reason: str) -> ToolEntry:
        """This entry with validation switched off (for a result too large to validate)."""
        return ToolEntry(
            self.name,
            self.output_schema,
            self.nullable,
            self.ui_resource_uri,
            problem=reason,
            arguments=self.arguments,
            keys_read=self.keys_read,
            enums=self.enums,
            argument_places=self.argument_places,
        )


def build_entry(
    tool: JSONObject,
    nullable: tuple[PointerPattern, ...],
    compiler: SchemaCompiler,
    size: int = 0,
    definition: str = "",
    arguments: ArgumentKeys | None = None,
    enums: dict[str, tuple[str, ...]] | None = None,
) -> ToolEntry:
    """Make the catalog entry of an advertised ``Tool`` object (``tools/list`` result member);
    ``size`` is the tool's encoded size in bytes, ``definition`` the digest of the tool as listed,
    ``arguments`` its argument names and their places (:attr:`ToolEntry.arguments`,
    :attr:`ToolEntry.argument_places`), ``enums`` its arguments' enum
    places (:attr:`ToolEntry.enums`)."""
    meta = tool.get("_meta")
    ui = meta.get("ui") if isinstance(meta, dict) else None
    uri = ui.get("resourceUri") if isinstance(ui, dict) else None
    if not isinstance(uri, str) and isinstance(meta, dict):
        uri = meta.get("ui/resourceUri")  # deprecated flat key of MCP Apps drafts (or the one that is a string)
    return ToolEntry(
        str(tool.get("name")),
        tool.get("outputSchema"),
        nullable,
        uri if isinstance(uri, str) else None,
        compiler,
        size=size,
        definition=definition,
        arguments=arguments.names if arguments is not None else None,
        enums=enums,
        argument_places=arguments.places if arguments is not None else ("",),
    )


class ToolSet(dict[str, ToolEntry]):
    """The tools of one listing by upstream name, and the names they are advertised under; shared
    by every scope whose listing holds the same entries and names (see :class:`CatalogPool`), so
    immutable once :meth:`sealed`.

    Built a tool at a time (:meth:`add`: the proxy learns a 50,000-tool list in slices), it keeps
    what the pool needs as it grows: its entries' identities, in order, digested when sealed
    (entries are shared by content, so identity is content), and the bytes it holds.

    Attributes:
        names: the listing's name map (rule ``tool_names``), advertised name -> upstream name,
            for the tools advertised under another name; set before :meth:`sealed`.
        named_for: the tool names that map kept (the pattern of
            :func:`mcp_normalizer.engine.name_maps.names_kept` for the client it was listed for),
            ``""`` when unknown; a client whose profile keeps others has its own map, derived
            from the upstream names (:attr:`derived`).
        derived: the listing's name maps for the other name patterns, by pattern, once asked for
            (:func:`mcp_normalizer.engine.name_maps.names_for`).
        key: the digest (once sealed).
        size: bytes held: the entries' estimates, the names and the mapping itself (once sealed).
    """

    __slots__ = ("__weakref__", "_entry_bytes", "_ids", "derived", "key", "named_for", "names", "size")

    def __init__(self, entries: Iterable[ToolEntry] = (), names: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self._ids = array("q")  # the entries' identities, in order, digested once sealed
        self._entry_bytes = 0
        self.key = b""
        self.size = 0
        self.names: Mapping[str, str] = names or {}
        self.named_for = ""
        self.derived: dict[str, Mapping[str, str]] = {}
        self.extend(list(entries))

    def add(self, entry: ToolEntry) -> None:
        """Add (or replace, by name) one tool, in list order."""
        self[entry.name] = entry
        self._ids.append(id(entry))
        self._entry_bytes += entry.size + _PER_NAME

    def extend(self, entries: Sequence[ToolEntry]) -> None:
        """:meth:`add` each of ``entries``, in order: a page of 50,000 tools in a few C passes
        instead of a Python call per tool."""
        self.update(zip(map(_NAME, entries), entries, strict=True))
        self._ids.extend(map(id, entries))
        self._entry_bytes += sum(map(_SIZE, entries)) + _PER_NAME * len(entries)

    def sealed(self) -> ToolSet:
        """This set, its :attr:`key` and :attr:`size` computed (once); add nothing after."""
        if self.key:
            return self
        names = self.names
        size = sys.getsizeof(self) + self._entry_bytes
        digest = hashlib.blake2b(self._ids.tobytes(), digest_size=16)  # (one C pass, not one per tool)
        self._ids = array("q")
        if names:
            try:  # one C pass over the names (a 50,000-name map: milliseconds, not a loop's tens)
                digest.update(orjson.dumps(names))
            except orjson.JSONEncodeError:  # a lone surrogate: name by name
                for advertised, upstream in names.items():
                    for text in (advertised, upstream):
                        raw = text.encode("utf-8", "surrogatepass")
                        digest.update(len(raw).to_bytes(4, "little") + raw)
            size += sys.getsizeof(names) + sum(map(len, names)) + sum(map(len, names.values())) + 240 * len(names)
        self.key = digest.digest()
        self.size = size
        return self

    def merged(self, later: ToolSet) -> ToolSet:
        """A new set: these tools and names, then ``later``'s (a listing's next page), not sealed."""
        merged = ToolSet(self.values(), {**self.names, **later.names})
        merged.named_for = later.named_for or self.named_for
        merged.extend(list(later.values()))
        return merged


_PER_NAME = 120  # a name string and its slot, about
_NAME = attrgetter("name")
_SIZE = attrgetter("size")


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
        self._sets: dict[bytes, weakref.ref[ToolSet]] = {}

    def __len__(self) -> int:
        return len(self._sets)

    def share(self, tools: ToolSet) -> ToolSet:
        """The shared set with the entries of ``tools``: one already held, or ``tools`` itself (sealed)."""
        key = tools.sealed().key
        ref = self._sets.get(key)
        found = ref() if ref is not None else None
        if found is not None:
            return found
        found = tools
        self._sets[key] = weakref.ref(found, self._gone(key, found.size))
        self.bytes += found.size
        if self.bytes > self.max_bytes and self.over is not None:
            self.over()
        return found

    def _gone(self, key: bytes, size: int) -> Callable[[weakref.ref[ToolSet]], None]:
        def gone(ref: weakref.ref[ToolSet]) -> None:
            if self._sets.get(key) is ref:
                del self._sets[key]
            self.bytes -= size

        return gone


@dataclass(slots=True)
class ToolCatalog:
    """The tools of one scope, by name.

    Attributes:
        tools: the current listing, by upstream tool name (a :class:`ToolSet` shared with every
            scope that listed the same tools under the same names).
        learned_at: ``time.monotonic()`` of the last update, ``None`` if never filled.
        expires_at: ``time.monotonic()`` after which the list may no longer be reused (2026-07-28
            ``ttlMs``), ``None`` for lists that stay valid until invalidated (legacy sessions).
        pool: where shared sets come from (``None``: this catalog keeps its own).
    """

    tools: ToolSet = field(default_factory=lambda: ToolSet().sealed())
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

    def names(self) -> Mapping[str, str] | None:
        """The listing's name map (advertised -> upstream) as it was made for the client that
        listed it, ``None`` while there is no fresh listing."""
        return self.tools.names if self.fresh() else None

    def listing(self) -> ToolSet | None:
        """The fresh listing (whichever client listed it), ``None`` while there is none."""
        return self.tools if self.fresh() else None

    def known_absent(self, name: str) -> bool:
        """True when the fresh list was fetched for ``name`` and does not have it (no fetch again)."""
        return name in self.absent and self.fresh()

    def learn(self, entries: ToolSet | Iterable[ToolEntry], *, first_page: bool, ttl: float | None = None) -> None:
        """Record a ``tools/list`` page; the first page starts a new list, later pages add to it
        (the listing so far and the page make a new set, shared and counted like a first page's).

        Args:
            entries: the page's tools and names (a :class:`ToolSet` is shared as it is, not copied).
            first_page: the request carried no cursor.
            ttl: seconds the list may be reused (``ttlMs`` / 1000), ``None`` for no limit.
        """
        listed = entries if isinstance(entries, ToolSet) else ToolSet(entries)
        if first_page:
            self.absent = set()
        else:
            listed = self.tools.merged(listed)  # a page after the first
        self.tools = self.pool.share(listed) if self.pool is not None else listed.sealed()
        self.learned_at = time.monotonic()
        self.expires_at = None if ttl is None else self.learned_at + ttl

    def clear(self) -> None:
        """Forget every tool (``notifications/tools/list_changed``)."""
        self.tools = ToolSet().sealed()
        self.absent = set()
        self.learned_at = self.expires_at = None


#: Per-process key of the scope hash: a scope key in a log line cannot be reversed to the token by
#: trying candidates offline (an unkeyed hash of a weak password can).
_SCOPE_KEY = secrets.token_bytes(32)


def scope_key(upstream: str, session_id: str | None, authorization: str | None, cookie: str | None) -> str:
    """Hash what identifies a client to the upstream into a short, log-safe scope key.

    Two requests share a catalog only when they reach the same upstream with the same session id,
    ``Authorization`` and ``Cookie`` headers. The raw values never leave this function; the hash
    is keyed with a random per-process secret (keyed BLAKE2b, a MAC in one call), so keys are
    stable within a process.
    """
    parts = (upstream, session_id or "", authorization or "", cookie or "")
    text = "\0".join(parts).encode("utf-8", "surrogateescape") + b"\0%d.%d.%d" % tuple(map(len, parts[:3]))
    return hashlib.blake2b(text, key=_SCOPE_KEY, digest_size=8).hexdigest()
