"""What every rule shares: its description, the contexts it reads and the rewrite it reports.

A rule is pure: it takes a ``Tool`` (from a ``tools/list`` result) or a ``CallToolResult`` plus a
context, and returns ``None`` (nothing to do) or a new object and one :class:`Rewrite` describing
the change. It never mutates its input and never does I/O; the engine decides whether the change is
applied (mode ``on``) or only reported (mode ``report``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

from ...keys import documented, setting
from ...types import JSON, JSONObject
from ...wire.jsoncodec import Codec, Raw
from ...wire.jsonrpc import IdKey
from ...wire.pointer import PointerPattern, format_pointer, resolve
from .clients import UNKNOWN, ClientProfile
from .scan import ToolScan

if TYPE_CHECKING:
    from ..catalog import ToolEntry

#: ``_meta`` key grammar (MCP 2025-06-18+ ``basic/index.mdx`` "_meta"): an optional prefix of
#: dot-separated labels ending in ``/``, then a name that starts and ends alphanumeric.
_LABEL = r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_META_KEY = re.compile(rf"(?:{_LABEL}(?:\.{_LABEL})*/)?(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?")


def is_meta_key(key: str) -> bool:
    """True when ``key`` follows the ``_meta`` key grammar."""
    return _META_KEY.fullmatch(key) is not None


#: ``_meta`` prefix of the proxy's own annotations (reverse DNS, not reserved: MCP ``basic/index.mdx`` "_meta").
META_PREFIX = "dev.mcp-normalizer/"
#: ``_meta`` key holding original values the proxy replaced, by JSON pointer into ``structuredContent``.
ORIGINAL_VALUES_KEY = META_PREFIX + "original-values"
#: ``_meta`` key holding a whole ``structuredContent`` the proxy moved when the problem key was taken.
ORIGINAL_STRUCTURED_KEY = META_PREFIX + "original-structured-content"
#: ``_meta`` key holding entries the proxy set aside: invalid keys, a ``_meta`` that was not an
#: object, a server's non-object value at one of the proxy's own keys.
INVALID_META_KEY = META_PREFIX + "invalid-meta"
#: ``_meta`` key of a tool holding the schema keywords the proxy removed or replaced, by JSON pointer
#: into the tool as the server listed it (``{"/outputSchema/$schema": "http://...draft-07..."}``).
ORIGINAL_KEYWORDS_KEY = META_PREFIX + "original-keywords"


def meta_of(holder: JSONObject) -> JSONObject:
    """A new ``_meta`` object for ``holder``: a copy of its ``_meta``, ``{}`` when it has none.

    A ``_meta`` that is not an object (a string, a list) is kept whole under
    :data:`INVALID_META_KEY`, so adding entries never loses it.
    """
    meta = holder.get("_meta")
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        return {INVALID_META_KEY: meta}
    return dict(meta)


def set_aside(meta: JSONObject, key: str) -> None:
    """Make room for an object at ``meta[key]`` (``meta`` is mutated; it must be the caller's copy).

    A non-object value the server put there moves under :data:`INVALID_META_KEY` (itself set aside
    first, so that it is an object); an object, or no value, stays as it is.
    """
    if key not in meta or isinstance(meta[key], dict):
        return
    value = meta.pop(key)
    if key == INVALID_META_KEY:
        meta[key] = {INVALID_META_KEY: value}
        return
    set_aside(meta, INVALID_META_KEY)
    holder = meta.get(INVALID_META_KEY)
    meta[INVALID_META_KEY] = {**(holder if isinstance(holder, dict) else {}), key: value}


class Mode(enum.StrEnum):
    """How a rule runs: ``on`` applies and logs, ``report`` only logs, ``off`` skips it."""

    ON = "on"
    OFF = "off"
    REPORT = "report"


class Rewrite(msgspec.Struct, frozen=True, gc=False):
    """One change a rule made (or would make) to one message; one rewrite log line.

    Attributes:
        rule: the rule's stable name.
        action: what was done, a short verb phrase (``moved structuredContent to _meta``).
        pointers: JSON pointers touched, relative to the result or the tool.
        reason: why, without payload values (validator path and keyword, for example).
        fix: for a fault no rule repairs, the exact TOML that would (:mod:`mcp_normalizer.engine.suggest`), else ``""``.
        for_clients: a key of :data:`mcp_normalizer.engine.rules.clients.CLIENT_FAULTS` when the change is one
            only some clients need (the message was valid as it came), else ``""``.
        host_fault: the host fault the record is about (a key of
            :data:`mcp_normalizer.engine.rules.host_faults.CONSTRAINTS` or of
            :data:`mcp_normalizer.engine.rules.withhold.REFUSALS`) when it names one, else ``""``.
        lossy: the change loses something for the client (kept in ``_meta``, but no longer where the
            client reads it): only what the operator opted into (rule ``degrade``) makes one.
    """

    rule: str
    action: str
    pointers: tuple[str, ...]
    reason: str
    fix: str = ""
    for_clients: str = ""
    host_fault: str = ""
    lossy: bool = False


@documented
@dataclass(frozen=True, slots=True)
class RuleSettings:
    """Global knobs rules read (keys of the rule file's ``[normalizer]``)."""

    problem_meta_key: str = setting(
        "org.htcom.protean/problem",
        "``_meta`` key of the RFC 9457 problem (the Protean contract).",
    )
    mirror_max_bytes: int = setting(
        64 * 1024, "largest serialized ``structuredContent`` the text mirror copies into ``content``."
    )


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a ``tools/list`` rule knows about the tool it looks at.

    Attributes:
        era: the negotiated protocol version, ``None`` when unknown (treated as legacy).
        settings: global rule knobs.
        nullable: places declared nullable for this tool in the config.
        relax: places whose values the config says may be anything.
        drop_output_schema: the config says to advertise the tool without its ``outputSchema``.
        client: the client the list goes to (:mod:`mcp_normalizer.engine.rules.clients`: repairs only some need).
        declared_by: where ``relax``/``drop_output_schema`` come from (for the log line).
        nullable_by: where the ``nullable`` places come from (the config, an intervention).
        listed: the tool's JSON text as the server listed it, where a rule reads how its values
            were written (``gemini_schemas``: an enum's numbers); ``None`` when not at hand.
        degrade: why degrade mode is on for this tool and client (rule ``degrade``), ``""`` when it is off.
    """

    era: str | None
    settings: RuleSettings
    nullable: tuple[PointerPattern, ...] = ()
    relax: tuple[PointerPattern, ...] = ()
    drop_output_schema: bool = False
    client: ClientProfile = UNKNOWN
    declared_by: str = "declared in config"
    nullable_by: str = "declared in config"
    listed: bytes | None = None
    degrade: str = ""


@dataclass(frozen=True, slots=True)
class ResultContext:
    """What a ``tools/call`` rule knows about the result it looks at.

    Attributes:
        tool: the catalog entry of the called tool, ``None`` when the proxy does not know the tool.
        era: the negotiated protocol version, ``None`` when unknown (treated as legacy).
        settings: global rule knobs.
        codec: the message's codec: rules decode and encode JSON through it, so that numbers keep
            their spelling (``1.10`` stays ``1.10`` in a mirrored text or a moved value).
        client: the client the result goes to (:mod:`mcp_normalizer.engine.rules.clients`: repairs only some need).
        degrade: why degrade mode is on for this tool and client (rule ``degrade``), ``""`` when it is off.
    """

    tool: ToolEntry | None
    era: str | None
    settings: RuleSettings
    codec: Codec = field(default_factory=Codec)
    client: ClientProfile = UNKNOWN
    degrade: str = ""


@dataclass(frozen=True, slots=True)
class Response:
    """One JSON-RPC response as undecoded member texts (what a response rule reads and returns).

    Attributes:
        members: the message's members by name (``jsonrpc``, ``id``, ``result`` or ``error``...).
        result: the members of ``result`` when it is an object, else ``None``. When a rule returns
            a different ``result`` mapping, that is what goes out as the result.
    """

    members: Mapping[str, Raw]
    result: Mapping[str, Raw] | None = None


@dataclass(frozen=True, slots=True)
class ResponseContext:
    """What a response rule knows about the request a response answers.

    Attributes:
        method: the request's method, ``None`` when the response matches no request of the exchange.
        request_id: the id of the one request its POST carried (Streamable HTTP: the response on
            that POST's stream can only answer it), as an id key; ``None`` for a batch or a ``GET``
            stream, where no response can be matched by position.
        era: the negotiated protocol version, ``None`` when unknown.
        cursor: the ``params.cursor`` of the request answered (a string), ``None`` for a first page
            or when unknown.
    """

    method: str | None
    request_id: IdKey | None
    era: str | None
    cursor: str | None = None


ToolHook = Callable[[JSONObject, ToolContext], "tuple[JSONObject, Rewrite] | None"]
ResultHook = Callable[[JSONObject, ResultContext], "tuple[JSONObject, Rewrite] | None"]
#: ``gate(scan, ctx)``: ``False`` only when the rule's ``on_tool`` would return ``None`` (:mod:`.scan`).
ToolGate = Callable[[ToolScan, ToolContext], bool]
ResponseHook = Callable[[Response, ResponseContext], "tuple[Response, Rewrite] | None"]


@dataclass(frozen=True, slots=True)
class Rule:
    """A named normalization rule for one family of faults.

    Attributes:
        name: stable name, used in config, logs and metrics.
        kind: the fault family it repairs (``cases/faults.md``).
        summary: one line for the rule reference (docs/rules.md).
        default: the mode when the config does not say.
        on_tool: repair of a ``Tool`` in a ``tools/list`` result, if the rule has one.
        on_result: repair of a ``CallToolResult``, if the rule has one.
        on_response: repair of a JSON-RPC response's envelope (any method), if the rule has one.
        conformance: the result hook repairs a success result against its ``outputSchema``; such
            repairs are kept only when together they make the result conform.
        tool_gate: for a rule whose ``on_tool`` walks schemas, a cheap test that is ``False`` only
            when the hook would change nothing (:mod:`mcp_normalizer.engine.rules.scan`); ``None``:
            the hook always runs.
    """

    name: str
    kind: str
    summary: str
    default: Mode = Mode.ON
    on_tool: ToolHook | None = None
    on_result: ResultHook | None = None
    on_response: ResponseHook | None = None
    conformance: bool = False
    tool_gate: ToolGate | None = None


BlockFix = Callable[[JSONObject], "tuple[JSONObject, str] | None"]


def each_block(name: str, action: str, fix: BlockFix, member: str = "") -> ResultHook:
    """A result hook that applies ``fix`` to every object block of ``content``: ``fix(block)``
    returns the new block and why, or ``None``. The rewrite names each changed block's pointer
    (``/content/<i>`` and ``member``) and its reasons, in block order."""

    def repair(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
        content = result.get("content")
        if not isinstance(content, list):
            return None
        blocks: list[JSON] = list(content)
        touched, reasons = [], []
        for index, block in enumerate(content):
            done = fix(block) if isinstance(block, dict) else None
            if done is not None:
                blocks[index] = done[0]
                touched.append(f"/content/{index}{member}")
                reasons.append(done[1])
        if not touched:
            return None
        return {**result, "content": blocks}, Rewrite(name, action, tuple(touched), "; ".join(reasons))

    return repair


def text_blocks(result: JSONObject) -> list[JSONObject]:
    """The ``text`` content blocks of a result (blocks with a string ``text``)."""
    content = result.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]


def with_meta(result: JSONObject, key: str, value: object) -> tuple[JSONObject, str]:
    """Return a copy of ``result`` whose ``_meta`` also holds ``value``, and the key used.

    A key the server already set is never overwritten: ``value`` then goes under the proxy's
    :data:`ORIGINAL_STRUCTURED_KEY`, numbered if that is taken too. The server's ``_meta`` object
    is copied, not mutated.
    """
    merged = meta_of(result)
    chosen = key
    n = 1
    while chosen in merged:
        chosen = ORIGINAL_STRUCTURED_KEY if n == 1 else f"{ORIGINAL_STRUCTURED_KEY}-{n}"
        n += 1
    merged[chosen] = value
    return {**result, "_meta": merged}, chosen


def set_at(document: JSON, path: Sequence[str | int], value: JSON) -> JSON:
    """Return a copy of ``document`` with ``value`` at ``path``; containers on the way are copied.

    Raises:
        KeyError: ``path`` does not lead to an existing member or item.
    """
    if not path:
        return value
    step, rest = path[0], path[1:]
    if isinstance(document, dict) and isinstance(step, str) and step in document:
        return {**document, step: set_at(document[step], rest, value)}
    if isinstance(document, list) and isinstance(step, int) and 0 <= step < len(document):
        copy = list(document)
        copy[step] = set_at(document[step], rest, value)
        return copy
    raise KeyError(format_pointer(path))


def delete_at(document: JSON, path: Sequence[str | int]) -> JSON:
    """Return a copy of ``document`` without the object member at ``path`` (copy-on-write).

    Raises:
        KeyError: the parent of ``path`` is not an object holding that member.
    """
    *parent_path, name = path
    found, parent = resolve(document, parent_path)
    if not found or not isinstance(parent, dict) or name not in parent:
        raise KeyError(format_pointer(path))
    return set_at(document, parent_path, {k: v for k, v in parent.items() if k != name})


def with_original_values(result: JSONObject, originals: dict[str, JSON], key: str = ORIGINAL_VALUES_KEY) -> JSONObject:
    """Return a copy of ``result`` whose ``_meta`` records ``originals`` (pointer -> replaced value)
    under ``key`` (:data:`ORIGINAL_KEYWORDS_KEY` for a tool's schema keywords).

    Values from several rules on one result are merged under :data:`ORIGINAL_VALUES_KEY`; the first
    value recorded for a pointer is the server's and is never overwritten by a later repair, and a
    place inside one recorded before is not recorded again (the value recorded holds the server's). A
    ``_meta`` that is not an object, or a non-object server value at that key, is set aside
    (:func:`meta_of`, :func:`set_aside`), never dropped.
    """
    merged = meta_of(result)
    set_aside(merged, key)
    previous = merged.get(key)
    kept = previous if isinstance(previous, dict) else {}
    # a place inside one an earlier repair kept is the server's already (in that value): what a
    # later repair replaced there is a repair's output, not an original
    added = {pointer: value for pointer, value in originals.items() if not _within(pointer, kept)}
    merged[key] = {**added, **kept}
    return {**result, "_meta": merged}


def _within(pointer: str, kept: dict[str, JSON]) -> bool:
    """Whether ``pointer`` (RFC 6901) is strictly inside a place of ``kept``."""
    if not kept:
        return False
    end = pointer.rfind("/")
    while end > 0:
        pointer = pointer[:end]
        if pointer in kept:
            return True
        end = pointer.rfind("/")
    return False
