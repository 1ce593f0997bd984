"""Rules on the JSON-RPC envelope of a response, for every method: ``jsonrpc_envelope``,
``jsonrpc_id``, ``null_cursor`` and ``cursor_loop``.

Fault kinds (``cases/faults.md``, "Kinds from the 2026 reports"):

- ``jsonrpc_batch_response``: a single request answered with a one-element array, often with
  ``"error": null`` beside ``result``. JSON-RPC 2.0 section 5 makes ``result`` and ``error``
  exclusive, and the TS SDK's response schemas are strict objects: the client throws a ZodError
  (``unrecognized_keys ["error"]``) and, over SSE, never settles the request. ``jsonrpc_envelope``
  drops the ``null`` member beside the other one; the array is unwrapped by the transformer
  (:func:`unwrap_single`), since only it sees the body.
- ``jsonrpc_id_mismatch``: the response's ``id`` differs in type from the request's (``"1"``
  answered as ``1``), or is ``null`` or missing; clients cannot correlate and hang. On Streamable
  HTTP one POST that carries one request gets the response to that request on its own stream, so
  ``jsonrpc_id`` writes the request's id there, verbatim. An id of another *value* (every id
  answered as ``0``) is never stamped: it may be another request's (a late duplicate of an
  earlier response), and the transformer refuses such a reply (502, the connection closed).
  Batches and ``GET`` streams have no position: nothing is stamped there.
- ``null_optional_fields``, list variant: ``nextCursor: null`` on ``tools/list``,
  ``resources/list``, ``resources/templates/list``, ``prompts/list`` (Claude Code rejects the
  list). ``nextCursor`` is an optional string; ``null`` and absence both mean "last page".
  ``null_cursor`` drops it.
- ``pagination_cursor_loop`` (late 2026): a ``nextCursor`` that is ``""``, or the very cursor of
  the request the page answers. A client that pages to the end asks for the same page forever
  (C# and Java SDK clients, hosts that list everything) or stops with an error
  (``@modelcontextprotocol/client`` 2.x). ``cursor_loop`` drops it and logs it: the page is the
  last one the client can reach anyway.

All four are lossless: what is dropped is a ``null`` the protocol gives no meaning, and the
stamped id is the one the client sent. Pointers are relative to the message.
"""

from __future__ import annotations

from ...errors import DecodeError
from ...wire.jsoncodec import Raw, dumps, loads
from ...wire.jsonrpc import IdKey, id_key, same_value
from .base import Response, ResponseContext, Rewrite, Rule

#: The methods whose results are pages with an optional ``nextCursor`` (MCP ``utilities/pagination``).
LIST_METHODS = frozenset({"tools/list", "resources/list", "resources/templates/list", "prompts/list"})


def is_null(text: Raw | None) -> bool:
    """True when the undecoded member ``text`` is the JSON literal ``null``."""
    return text is not None and len(text) == 4 and bytes(text) == b"null"


def _exclusive(response: Response, ctx: ResponseContext) -> tuple[Response, Rewrite] | None:
    members = response.members
    if "result" in members and is_null(members.get("error")):
        dropped = "error"
    elif "error" in members and is_null(members.get("result")) and not is_null(members["error"]):
        dropped = "result"
    else:
        return None
    kept = {name: text for name, text in members.items() if name != dropped}
    other = "result" if dropped == "error" else "error"
    reason = f"a response carries result or error, never both (JSON-RPC 2.0 section 5); {dropped} was null"
    return Response(kept, response.result), Rewrite(
        "jsonrpc_envelope", f"dropped {dropped}: null beside {other}", (f"/{dropped}",), reason
    )


def _stamp(response: Response, ctx: ResponseContext) -> tuple[Response, Rewrite] | None:
    if ctx.request_id is None:
        return None
    members = response.members
    text = members.get("id")
    try:
        value = loads(text) if text is not None else None
    except DecodeError:
        return None
    if id_key(value) == ctx.request_id:
        return None
    if value is not None and not same_value(value, ctx.request_id):
        return None  # another request's value: never made this one's (the transformer refuses it)
    said = "no id" if text is None else f"id {bytes(text)[:40].decode('utf-8', 'replace')}"
    sent = Raw(dumps(ctx.request_id[1]))
    stamped = {**members, "id": sent} if text is not None else {"id": sent, **members}
    reason = f"the response on the stream of a one-request POST answers that request but had {said}"
    return Response(stamped, response.result), Rewrite("jsonrpc_id", "stamped the request's id", ("/id",), reason)


def _cursor(response: Response, ctx: ResponseContext) -> tuple[Response, Rewrite] | None:
    result = response.result
    if ctx.method not in LIST_METHODS or result is None or not is_null(result.get("nextCursor")):
        return None
    kept = {name: text for name, text in result.items() if name != "nextCursor"}
    reason = "nextCursor is an optional string; null means no further page, as absence does"
    return Response(response.members, kept), Rewrite(
        "null_cursor", "dropped nextCursor: null", ("/result/nextCursor",), reason
    )


def _loop(response: Response, ctx: ResponseContext) -> tuple[Response, Rewrite] | None:
    result = response.result
    text = result.get("nextCursor") if result is not None and ctx.method in LIST_METHODS else None
    if text is None or result is None:
        return None
    try:
        cursor = loads(text)
    except DecodeError:
        return None
    if cursor == "":
        reason = "an empty nextCursor names no page; a client that pages to the end would ask for the first again"
    elif isinstance(cursor, str) and cursor == ctx.cursor:
        reason = "nextCursor is the cursor of the request it answers: the next page would be this one, forever"
    else:
        return None
    kept = {name: value for name, value in result.items() if name != "nextCursor"}
    return Response(response.members, kept), Rewrite(
        "cursor_loop", "dropped a nextCursor that does not advance", ("/result/nextCursor",), reason
    )


def unwrap_single(items: list[Raw], request_id: IdKey | None) -> Rewrite | None:
    """The rewrite that unwraps ``items`` (a JSON-RPC batch in a response body or SSE event) into
    its one message, or ``None`` when it must stay a batch: the POST carried a batch (2025-03-26
    batching; ``request_id`` is ``None`` then), or the array holds other than one object."""
    if request_id is None or len(items) != 1 or memoryview(items[0])[:1].tobytes() != b"{":
        return None
    reason = "a single request is answered with a single response, not an array (JSON-RPC 2.0 section 6)"
    return Rewrite("jsonrpc_envelope", "unwrapped a one-message batch", ("",), reason)


ENVELOPE = Rule(
    name="jsonrpc_envelope",
    kind="jsonrpc_batch_response",
    summary="A single request's response sent as a one-element array is unwrapped; error: null beside result "
    "(or result: null beside error) is dropped.",
    on_response=_exclusive,
)
STAMP_ID = Rule(
    name="jsonrpc_id",
    kind="jsonrpc_id_mismatch",
    summary="The response on a one-request POST's stream whose id is that request's in another type, null "
    "or missing gets the request's id, verbatim.",
    on_response=_stamp,
)
NULL_CURSOR = Rule(
    name="null_cursor",
    kind="null_optional_fields",
    summary="nextCursor: null dropped from tools/list, resources/list, resources/templates/list, prompts/list.",
    on_response=_cursor,
)
CURSOR_LOOP = Rule(
    name="cursor_loop",
    kind="pagination_cursor_loop",
    summary="A list page's nextCursor that is empty, or the cursor of the request it answers, is dropped (clients "
    "that page to the end would loop).",
    on_response=_loop,
)
