"""Whole responses the proxy writes itself (refusals, errors, admin endpoints), and the JSON-RPC error
bodies it answers with when the upstream failed.

A response is one ``http.response.start`` with ``content-type`` and ``content-length`` and one
``http.response.body`` (ASGI HTTP spec, "Response Start" and "Response Body").
"""

from __future__ import annotations

from collections.abc import Sequence

from ..types import JSON, Send
from .jsoncodec import dumps


async def respond(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes | None = b"application/json",
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    """Send a whole response: ``headers``, ``content-type`` (unless ``None``) and ``content-length``
    (left out of an empty 202 or 204, which has no body)."""
    head = list(headers)
    if content_type is not None:
        head.append((b"content-type", content_type))
    if body or status not in (202, 204):
        head.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


def error_body(ids: JSON | list[JSON], message: str, code: int = -32000) -> bytes:
    """The JSON-RPC error response(s) for request id ``ids`` (one response), or for each id of a
    list of them (a batch's: one error each, in order). JSON-RPC 2.0 section 5."""
    error = {"code": code, "message": message}
    if isinstance(ids, list):
        return dumps([{"jsonrpc": "2.0", "id": i, "error": error} for i in ids])
    return dumps({"jsonrpc": "2.0", "id": ids, "error": error})
