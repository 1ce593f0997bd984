"""Request rewriting, sans-IO: the one change the proxy makes to what a client sends.

Rule ``tool_names`` (:mod:`mcp_normalizer.engine.rules.tool_names`) advertises tools whose names clients refuse
under new names; a ``tools/call`` for a new name must reach the upstream under the name the
upstream knows. For a host that refuses some argument names (the Claude hosts; Gemini CLI, at
every argument place), rule ``host_schemas`` advertises those under others too, and the call's
arguments go upstream under the tool's own names (:func:`own_names`). For a client whose tools
go to the Gemini API, rule ``gemini_schemas`` advertises an argument's numeric or boolean ``enum``
as strings, and a call's string at such a place goes upstream as the value it spells
(:func:`enum_places`). :func:`rename_calls` rewrites a POST
body's ``tools/call`` requests by the scope's name map
(:attr:`mcp_normalizer.engine.scopes.ScopeState.names`), changing only the ``params.name`` member's
text (and the ``arguments`` members named above): every other byte of the body is copied as it
came. The middleware calls it before the inner app (or the forwarder) reads the body, in both modes.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from ..errors import DecodeError
from ..types import ArgumentKeys
from ..wire.jsoncodec import Raw, dumps, join_array, join_object, loads, split_array, split_object
from ..wire.jsonrpc import TOOLS_CALL, IdKey, PendingRequest, id_key, read_batch
from ..wire.pointer import format_pointer
from .rules import Rewrite
from .rules.clients import ClientProfile, with_model_api
from .rules.gemini_schemas import convert_arguments
from .rules.host_faults import ENUM_NON_STRING, PROPERTY_KEY_GEMINI
from .rules.host_profiles import PROPERTY_KEY
from .rules.host_schemas import mentions_invented_key
from .rules.tool_names import invented

if TYPE_CHECKING:
    from .catalog import ToolEntry

#: The log record of a renamed call (no name in it: names are the server's text).
REWRITE = Rewrite(
    "tool_names",
    "sent the call upstream under the tool's own names",
    ("/params/name",),
    "renamed in tools/list (the tool, or argument names a host refuses), or an argument's enum listed as strings",
)


def rename_calls(
    body: bytes,
    pending: Mapping[IdKey, PendingRequest],
    names: Mapping[str, str],
    keys: Mapping[str, ArgumentKeys] | None = None,
    enums: Mapping[str, Mapping[str, tuple[str, ...]]] | None = None,
) -> tuple[bytes, dict[IdKey, PendingRequest], list[IdKey]] | None:
    """``body`` with each ``tools/call`` for an advertised name sent under its original name, and
    its argument names advertised under others (for a host that refuses the tool's own) sent under
    the tool's.

    Args:
        body: the POST body (one request or a 2025-03-26 batch), already read by
            :func:`mcp_normalizer.wire.jsonrpc.inspect_request` into ``pending``.
        pending: its requests by id key.
        names: the scope's map, advertised name -> the upstream's name.
        keys: by upstream tool name, its argument names, advertised key -> the tool's own key, and
            the argument places they may be at (:class:`~mcp_normalizer.types.ArgumentKeys`:
            the arguments object, and for the Gemini API nested objects and items too); a member
            whose own key the same object also sends is left as it came.
        enums: by upstream tool name, its arguments' enum places for a client shown them as
            strings (:func:`enum_places`): a string there that spells a value goes as that value.

    Returns:
        The new body, the requests with their ``tool`` set to the upstream's name (what the result
        rules look up), and the id keys of the rewritten calls; ``None`` when no call is rewritten
        (or the body cannot be rewritten byte for byte: it then goes as it came).
    """
    if not names and not keys and not enums:  # (every POST of a client no rename touches: nothing to look at)
        return None
    keys = keys or {}
    enums = enums or {}
    calls = [r for r in pending.values() if r.method == TOOLS_CALL and r.tool is not None]
    if not any(
        r.tool in names or names.get(r.tool or "", r.tool) in keys or names.get(r.tool or "", r.tool) in enums
        for r in calls
    ):
        return None
    try:
        items = read_batch(body)
        messages = items if items is not None else [Raw(body)]
        renamed: list[IdKey] = []
        out: list[Raw] = []
        for message in messages:
            new = _renamed(message, pending, names, keys, renamed, enums)
            out.append(Raw(new) if new is not None else message)
        if not renamed:
            return None
        text = join_array(out) if items is not None else bytes(out[0])
    except DecodeError:
        return None
    updated = dict(pending)
    for key in renamed:
        request = updated[key]
        updated[key] = dataclasses.replace(request, tool=names.get(request.tool or "", request.tool))
    return text, updated, renamed


def _renamed(
    message: Raw,
    pending: Mapping[IdKey, PendingRequest],
    names: Mapping[str, str],
    keys: Mapping[str, ArgumentKeys],
    renamed: list[IdKey],
    enums: Mapping[str, Mapping[str, tuple[str, ...]]],
) -> bytes | None:
    if memoryview(message)[:1].tobytes() != b"{":
        return None
    members = split_object(message)
    key_text = members.get("id")
    if key_text is None or "params" not in members:
        return None
    key = id_key(loads(key_text))
    request = pending.get(key) if key is not None else None
    tool = request.tool if request is not None and request.method == TOOLS_CALL else None
    if key is None or tool is None:
        return None
    upstream = names.get(tool, tool)
    params = split_object(members["params"])
    changed = False
    if tool in names:
        params["name"] = Raw(dumps(upstream))
        changed = True
    arguments = params.get("arguments")
    places = enums.get(upstream)
    if places and arguments is not None and memoryview(arguments)[:1].tobytes() == b"{":
        converted = convert_arguments(arguments, places)
        if converted is not None:
            arguments = params["arguments"] = Raw(converted)
            changed = True
    mapping = keys.get(upstream)
    if mapping and arguments is not None and memoryview(arguments)[:1].tobytes() == b"{":
        own = own_names(bytes(arguments), mapping)
        if own is not None:
            params["arguments"] = Raw(own)
            changed = True
    if not changed:
        return None
    renamed.append(key)
    return join_object({**members, "params": Raw(join_object(params))})


def own_names(arguments: bytes, keys: ArgumentKeys) -> bytes | None:
    """``arguments`` (a ``tools/call``'s arguments object, as sent) with the members at the places
    of ``keys`` named by an advertised name sent under the tool's own (a member whose own name the
    same object also carries stays as it came), every value's bytes as they came; ``None`` when no
    name changes.

    Raises:
        DecodeError: ``arguments`` is not JSON.
    """
    places = frozenset(keys.places)
    within = frozenset(
        place[:end] for place in places for end in range(len(place) + 1) if place[end : end + 1] in ("", "/")
    )
    return _own_at(arguments, "", keys.names, places, within)


def _own_at(
    text: bytes, place: str, names: Mapping[str, str], places: frozenset[str], within: frozenset[str]
) -> bytes | None:
    """``text`` (the value at argument place ``place``) with its names sent under the own ones."""
    head = text[:1]
    if head == b"[":
        child = place + "/*"
        if child not in within:
            return None
        items = split_array(text)
        out = [_own_at(bytes(item), child, names, places, within) for item in items]
        if all(new is None for new in out):
            return None
        return join_array([Raw(new) if new is not None else item for new, item in zip(out, items, strict=True)])
    if head != b"{":
        return None
    given = split_object(text)
    changed = False
    members: dict[str, Raw] = {}
    for name, value in given.items():
        child = place + format_pointer((name,))
        new = _own_at(bytes(value), child, names, places, within) if child in within else None
        own = names.get(name) if place in places else None
        key = own if own is not None and own not in given else name
        changed = changed or new is not None or key != name
        members[key] = Raw(new) if new is not None else value
    return join_object(members) if changed else None


class _Entries(Protocol):
    """What :func:`argument_keys` reads of an exchange: its client and its tools' entries."""

    @property
    def client(self) -> ClientProfile: ...

    def tool(self, name: str | None) -> ToolEntry | None: ...

    def names(self) -> Mapping[str, str] | None: ...


def renames_keys(client: ClientProfile) -> bool:
    """Whether rule ``host_schemas`` renames argument names for ``client`` (its model API refuses
    some: the Anthropic API's property keys, the Gemini API's parameter names)."""
    return client.host_needs(PROPERTY_KEY) or client.host_needs(PROPERTY_KEY_GEMINI)


def argument_keys(
    exchange: _Entries,
    pending: Mapping[IdKey, PendingRequest],
    names: Mapping[str, str],
    family_of: Callable[[str], str] | None = None,
) -> dict[str, ArgumentKeys]:
    """The argument names of the tools the requests call (:attr:`~mcp_normalizer.engine.catalog.ToolEntry.arguments`
    and :attr:`~mcp_normalizer.engine.catalog.ToolEntry.argument_places`), by upstream name, for
    the calls whose client was shown some under other names (rule ``host_schemas``): a host whose
    model API refuses some (the Claude hosts, Gemini CLI, a client a ``model_api`` setting names
    such a family for), or any client of a tool whose ``family_of(name)`` (its ``[tools."NAME"]
    model_api``) does; empty for any other (decided before a catalog lookup)."""
    client = exchange.client
    if family_of is None and not renames_keys(client):
        return {}
    keys: dict[str, ArgumentKeys] = {}
    for request in pending.values():
        if request.method != TOOLS_CALL or request.tool is None:
            continue
        upstream = names.get(request.tool, request.tool)
        family = family_of(upstream) if family_of is not None else ""
        if not renames_keys(with_model_api(client, family) if family else client):
            continue
        entry = exchange.tool(upstream)
        if entry is not None and entry.arguments:
            keys[upstream] = ArgumentKeys(entry.arguments, entry.argument_places)
    return keys


def enum_places(
    exchange: _Entries,
    pending: Mapping[IdKey, PendingRequest],
    names: Mapping[str, str],
    family_of: Callable[[str], str] | None = None,
) -> dict[str, Mapping[str, tuple[str, ...]]]:
    """The enum places of the tools the requests call (:attr:`~mcp_normalizer.engine.catalog.ToolEntry.enums`),
    by upstream name, for the calls whose client was shown them as strings: a client whose model
    API refuses a non-string ``enum`` (rule ``gemini_schemas``), or any client of a tool whose
    ``family_of(name)`` (its ``[tools."NAME"] model_api``) does; empty for any other (the usual
    case, decided before a catalog lookup)."""
    client = exchange.client
    if family_of is None and not client.host_needs(ENUM_NON_STRING):
        return {}
    found: dict[str, Mapping[str, tuple[str, ...]]] = {}
    for request in pending.values():
        if request.method != TOOLS_CALL or request.tool is None:
            continue
        upstream = names.get(request.tool, request.tool)
        family = family_of(upstream) if family_of is not None else ""
        shown = with_model_api(client, family) if family else client
        if not shown.host_needs(ENUM_NON_STRING):
            continue
        entry = exchange.tool(upstream)
        if entry is not None and entry.enums:
            found[upstream] = entry.enums
    return found


#: What every name the proxy invents holds (a tool's, rule ``tool_names``; an argument's, rule
#: ``host_schemas``): ``_`` and 16 hex digits.
_INVENTED_SHAPE = re.compile(rb"_[0-9a-f]{16}")


def mismatched_calls(
    exchange: _Entries,
    body: bytes,
    pending: Mapping[IdKey, PendingRequest],
    names: Mapping[str, str],
) -> int:
    """How many of the requests' ``tools/call`` use a name or an argument key advertised to
    another client profile than the calling one's (and so go upstream as they came): a tool
    name of the listing's map as it was made for another client (``listed``) that the caller's
    own map (``names``) lacks, or, from a client that is not a host some argument names were
    renamed for, an argument key of the shape those names take that the tool's map holds.
    ``listed`` is read (:meth:`Exchange.names <mcp_normalizer.engine.exchange.Exchange.names>`
    without a client) only when a call names a tool the caller's map lacks by a name of the shape
    rule ``tool_names`` invents (every advertised name has it)."""
    if _INVENTED_SHAPE.search(body) is None:
        return 0  # (no name of the shape the proxy invents, for a tool or an argument)
    calls = [r.tool for r in pending.values() if r.method == TOOLS_CALL and r.tool is not None]
    if not calls:
        return 0
    unnamed = [tool for tool in calls if tool not in names and invented(tool)]  # (only those are advertised)
    listed = exchange.names() if unnamed else None
    count = 0 if listed is None else sum(1 for tool in unnamed if tool in listed)
    if renames_keys(exchange.client) or not mentions_invented_key(body):
        return count
    try:
        decoded = loads(body)
    except DecodeError:
        return count
    for message in decoded if isinstance(decoded, list) else [decoded]:
        params = message.get("params") if isinstance(message, dict) else None
        if not isinstance(params, dict) or message.get("method") != TOOLS_CALL:
            continue
        name, arguments = params.get("name"), params.get("arguments")
        entry = exchange.tool(names.get(name, name)) if isinstance(name, str) else None
        mapping = entry.arguments if entry is not None else None
        if mapping and isinstance(arguments, dict) and any(k in mapping for k in arguments):
            count += 1
    return count
