"""JSON-RPC 2.0 message classification and request/response correlation for MCP.

The proxy's result rules read only responses to ``tools/call`` and ``tools/list``, and the final
results of tasks that wrap a tool call (``tasks/result`` in 2025-11-25, ``tasks/get`` in the
2026-07-28 tasks extension; DESIGN section 3); it also watches ``subscriptions/listen`` streams for
``notifications/tools/list_changed``. Its envelope rules read the response to any request. This
module reads a POST body once, finds its requests (single messages and 2025-03-26 batches alike)
and keys them by JSON-RPC id, so responses can be matched.
MCP ids are strings or integers (never ``null``, spec ``basic/index.mdx``); ``1`` and ``"1"`` are
different ids, so keys carry the type.
"""

from __future__ import annotations

import itertools
import math
import re
import secrets
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..errors import DecodeError
from ..types import JSON, JSONObject, RawHeaders
from .jsoncodec import Raw, dumps, loads, split_array, split_object

#: A JSON-RPC id made hashable with its type: ``("s", "abc")`` or ``("n", 3)``.
IdKey = tuple[str, str | int]

TOOLS_CALL = "tools/call"
TOOLS_LIST = "tools/list"
TASKS_RESULT = "tasks/result"
TASKS_GET = "tasks/get"
SUBSCRIPTIONS_LISTEN = "subscriptions/listen"
#: The methods whose results (or streams) the result rules read.
WATCHED_METHODS = frozenset({TOOLS_CALL, TOOLS_LIST, TASKS_RESULT, TASKS_GET, SUBSCRIPTIONS_LISTEN})

PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
#: ``_meta`` key of a 2026-07-28 request naming its client.
CLIENT_INFO_META = "io.modelcontextprotocol/clientInfo"


def id_key(value: object) -> IdKey | None:
    """Key a JSON-RPC id; ``None`` for ids MCP does not allow (``null``, booleans, floats, objects)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, int):
        return ("n", int(value))
    return None


def same_value(value: object, key: IdKey) -> bool:
    """True when the response id ``value`` names the request id key ``key``: the one rule every
    path that matches a reply to a request uses (the HTTP transformer and rule ``jsonrpc_id``, the
    stdio upstream, the stdio wrapper).

    MCP ids are strings or integers compared as sent (``basic/index.mdx``), so ``value`` names
    ``key`` when it is that id; besides, it names it when it is the same value written in the other
    type, spelled the one way that type spells it: ``"1"`` for ``1``, ``1`` or ``1.0`` for ``"1"``,
    ``7.0`` for ``7`` (servers that round-trip ids through a number or a string: rule
    ``jsonrpc_id``, python-sdk#961). Nothing else: ``" 1"``, ``"01"``, ``"+1"``, ``"1.0"`` or
    ``1.5`` never name ``1``, a boolean names nothing, and neither does ``null``.
    """
    if isinstance(value, bool):
        return False
    kind, sent = key
    if isinstance(value, str):
        return (kind == "s" and value == sent) or (kind == "n" and value == str(sent))
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return False
        value = int(value)
    if isinstance(value, int):
        return (kind == "n" and value == sent) or (kind == "s" and str(value) == sent)
    return False


def answering(value: object, keys: Iterable[IdKey]) -> IdKey | None:
    """The request among ``keys`` (id keys in flight) that the response id ``value`` answers: the
    one whose id it is, else the only one it names in another type (:func:`same_value`); ``None``
    when it answers none, or two could be meant (``"1"`` while ``1`` and ``"1"`` are both in
    flight is ``"1"``'s; ``1.0`` then is no one's)."""
    key = id_key(value)
    pool = keys if isinstance(keys, Collection) else list(keys)
    if key is not None and key in pool:
        return key
    found = [candidate for candidate in pool if same_value(value, candidate)]
    return found[0] if len(found) == 1 else None


def mint_id(purpose: str) -> str:
    """A JSON-RPC id (or progress token) of the proxy's own: ``mcp-normalizer-<purpose>-`` then 96
    random bits (``secrets``) and a counter. No client can guess one, so none can write it (to
    answer, cancel or steer the request it names), and two never collide."""
    return f"mcp-normalizer-{purpose}-{secrets.token_urlsafe(12)}-{next(_MINTED)}"


_MINTED = itertools.count(1)


@dataclass(frozen=True, slots=True)
class PendingRequest:
    """A request whose response the proxy must recognise.

    Attributes:
        method: the request's method (the result rules read those in :data:`WATCHED_METHODS`).
        tool: the tool name of a ``tools/call`` (``params.name``), else ``None``.
        cursor: the pagination cursor of a ``tools/list``, ``None`` for the first page.
        task_id: the ``params.taskId`` of ``tasks/result`` and ``tasks/get``.
        meta: the request's ``params._meta`` (2026-07-28 carries the protocol fields there).
    """

    method: str
    tool: str | None = None
    cursor: str | None = None
    task_id: str | None = None
    meta: JSONObject = field(default_factory=dict)


@dataclass(slots=True)
class RequestInfo:
    """What a POST body asks for, as far as the proxy cares.

    Attributes:
        pending: its requests by id key.
        era: the protocol version of the exchange (header, then body ``_meta``), or ``None``.
        sole: the id key of the body's request when the body is one request (not a batch): the
            response on this POST's stream can only answer it (Streamable HTTP).
        client_info: the ``clientInfo`` the body names (an ``initialize`` request's, or on
            2026-07-28 a request's ``_meta["io.modelcontextprotocol/clientInfo"]``), as sent; ``None``
            when it names none.
    """

    pending: dict[IdKey, PendingRequest]
    era: str | None
    sole: IdKey | None = None
    client_info: JSON = None

    @property
    def initializes(self) -> bool:
        """True when the body holds an ``initialize`` request (legacy eras: the session starts)."""
        return any(request.method == "initialize" for request in self.pending.values())

    @property
    def watched(self) -> bool:
        """True when a request's result (or stream) is one the result rules read."""
        return any(request.method in WATCHED_METHODS for request in self.pending.values())


def refusal_body(message: str, code: int = -32600) -> bytes:
    """The JSON-RPC error body of a request refused before it was read: ``id`` null, ``code``
    (-32600 Invalid Request unless given), ``message`` as given."""
    return dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})


def header(headers: RawHeaders, name: bytes) -> str | None:
    """The first value of header ``name`` (lower-case bytes), decoded as Latin-1, or ``None``."""
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None


def _watch(message: JSON) -> tuple[IdKey, PendingRequest] | None:
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return None
    key = id_key(message.get("id"))
    if key is None:
        return None  # a notification, or an id the upstream will reject anyway
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    meta = params.get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    name, cursor, task_id = params.get("name"), params.get("cursor"), params.get("taskId")
    return key, PendingRequest(
        method=message["method"],
        tool=name if isinstance(name, str) and message["method"] == TOOLS_CALL else None,
        cursor=cursor if isinstance(cursor, str) else None,
        task_id=task_id if isinstance(task_id, str) else None,
        meta=meta,
    )


def _era(headers: RawHeaders, messages: list[JSON]) -> str | None:
    version = header(headers, b"mcp-protocol-version")
    if version and version.strip():  # (an empty header names nothing: the body may, as on the stdio upstream)
        return version.strip()
    for message in messages:
        if isinstance(message, dict) and isinstance(message.get("params"), dict):
            meta = message["params"].get("_meta")
            if isinstance(meta, dict) and isinstance(meta.get(PROTOCOL_VERSION_META), str):
                return str(meta[PROTOCOL_VERSION_META])
            if message.get("method") == "initialize" and isinstance(message["params"].get("protocolVersion"), str):
                return str(message["params"]["protocolVersion"])
    return None


def inspect_request(body: bytes, headers: RawHeaders) -> RequestInfo | None:
    """Find the requests in a POST body (JSON-RPC messages with a ``method`` and a valid id).

    The body's methods are what count, never the 2026-07-28 ``Mcp-Method`` header (if they
    disagree, the upstream rejects the request with ``-32020``). Invalid JSON is not the proxy's
    business: the upstream answers it.

    Returns:
        ``None`` when the body holds no request (notifications and the client's responses only).
    """
    if b'"method"' not in body and b"\\u" not in body:  # no member named method (unless escaped)
        return None
    try:
        decoded = loads(body)
    except DecodeError:
        return None
    batch = isinstance(decoded, list)
    messages = decoded if batch else [decoded]
    pending = dict(found for found in map(_watch, messages) if found is not None)
    if not pending:
        return None
    sole = next(iter(pending)) if not batch else None
    return RequestInfo(pending=pending, era=_era(headers, messages), sole=sole, client_info=_client_info(messages))


def _client_info(messages: list[JSON]) -> JSON:
    """The first ``clientInfo`` the messages name (``initialize`` params, else a request's ``_meta``)."""
    for message in messages:
        if isinstance(message, dict) and isinstance(message.get("params"), dict):
            params = message["params"]
            if message.get("method") == "initialize" and "clientInfo" in params:
                return params["clientInfo"]
            meta = params.get("_meta")
            if isinstance(meta, dict) and CLIENT_INFO_META in meta:
                return meta[CLIENT_INFO_META]
    return None


def response_to(data: bytes | None, request_id: JSON) -> JSONObject | None:
    """The response (``result`` or ``error``) to ``request_id`` in a JSON body or SSE event data,
    a single message or a batch; ``None`` when there is none or ``data`` is not JSON.

    The id is compared as sent, type and all (``basic/index.mdx``): ``true`` or ``1.0`` is no
    answer to ``1`` (the checking client sees what a strict client sees; it repairs nothing).
    """
    wanted = id_key(request_id)
    if not data:
        return None
    try:
        decoded = loads(data)
    except DecodeError:
        return None
    for message in decoded if isinstance(decoded, list) else [decoded]:
        if (
            isinstance(message, dict)
            and ("result" in message or "error" in message)
            and wanted is not None
            and id_key(message.get("id")) == wanted
        ):
            return message
    return None


class Envelope(msgspec.Struct):
    """The members of one JSON-RPC message the proxy routes on, read without decoding the rest.

    Attributes:
        id: the decoded ``id`` (``UNSET`` when absent: a notification).
        method: the decoded ``method`` of a request or notification.
        result: a response's ``result`` object as member texts (name -> undecoded JSON).
        params: a notification's ``params``, undecoded.
        error: a response's ``error``, undecoded.
        other_result: a ``result`` that is not an object (``null``, an array), undecoded.
    """

    id: Any = msgspec.UNSET
    method: Any = msgspec.UNSET
    result: dict[str, Raw] | msgspec.UnsetType = msgspec.UNSET
    params: Raw | msgspec.UnsetType = msgspec.UNSET
    error: Raw | msgspec.UnsetType = msgspec.UNSET
    other_result: Raw | msgspec.UnsetType = msgspec.UNSET

    @property
    def response(self) -> bool:
        """True for a JSON-RPC response (a ``result`` or an ``error``, no ``method``)."""
        return self.method is msgspec.UNSET and (
            self.result is not msgspec.UNSET
            or self.error is not msgspec.UNSET
            or self.other_result is not msgspec.UNSET
        )


class _LooseEnvelope(msgspec.Struct):
    id: Any = msgspec.UNSET
    method: Any = msgspec.UNSET
    result: Raw | msgspec.UnsetType = msgspec.UNSET
    params: Raw | msgspec.UnsetType = msgspec.UNSET
    error: Raw | msgspec.UnsetType = msgspec.UNSET


_ENVELOPE = msgspec.json.Decoder(Envelope)
_ARRAY_START = re.compile(rb"[ \t\r\n]*\[")
_LOOSE = msgspec.json.Decoder(_LooseEnvelope)


def read_envelope(raw: bytes | Raw) -> Envelope:
    """Read one message's routing members in one pass (only ``id`` and ``method`` are decoded).

    A message whose ``result`` is not an object is read with ``result`` unset (nothing to rewrite).

    Raises:
        DecodeError: ``raw`` is not one JSON object (or is a batch: see :func:`read_batch`).
    """
    try:
        return _ENVELOPE.decode(raw)
    except msgspec.ValidationError:
        pass
    except RecursionError:
        return _deep_envelope(raw)
    except (msgspec.DecodeError, ValueError) as exc:
        raise DecodeError(f"not a JSON-RPC message: {exc}") from None
    try:
        loose = _LOOSE.decode(raw)
    except (msgspec.DecodeError, ValueError, RecursionError) as exc:
        raise DecodeError(f"not a JSON-RPC message: {exc}") from None
    return Envelope(id=loose.id, method=loose.method, params=loose.params, error=loose.error, other_result=loose.result)


def _deep_envelope(raw: bytes | Raw) -> Envelope:
    """An envelope read member by member, for a message holding something nested too deep for
    the decoder (a hostile tool in a ``tools/list``): the rest of the message is still read."""
    return envelope_of(split_object(raw))


def envelope_of(members: dict[str, Raw]) -> Envelope:
    """:func:`read_envelope` of a message already split into its members
    (:func:`~mcp_normalizer.wire.jsoncodec.split_object`), each read on its own: how a message
    holding something nested too deep for the one-pass decoder is read.

    Raises:
        DecodeError: the ``id`` or ``method`` is not JSON the proxy reads.
    """
    result = members.get("result")
    params = members.get("params")
    error = members.get("error", msgspec.UNSET)
    try:
        an_object = result is not None and memoryview(result)[:1].tobytes() == b"{"
        return Envelope(
            id=loads(members["id"]) if "id" in members else msgspec.UNSET,
            method=loads(members["method"]) if "method" in members else msgspec.UNSET,
            result=split_object(result) if result is not None and an_object else msgspec.UNSET,
            params=params if params is not None else msgspec.UNSET,
            error=error,
            other_result=result if result is not None and not an_object else msgspec.UNSET,
        )
    except DecodeError:
        return Envelope(id=loads(members["id"]) if "id" in members else msgspec.UNSET)


def read_batch(raw: bytes) -> list[Raw] | None:
    """The messages of a JSON-RPC batch (a JSON array, 2025-03-26), or ``None`` when ``raw`` is not one.

    Raises:
        DecodeError: ``raw`` starts like an array but is not valid JSON.
    """
    if _ARRAY_START.match(raw) is None:
        return None
    return split_array(raw)
