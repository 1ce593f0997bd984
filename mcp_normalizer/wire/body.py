"""Reading an ASGI request body once, and handing it on to the next app as if it were unread."""

from __future__ import annotations

from ..errors import ClientDisconnect
from ..types import Message, RawHeaders, Receive


async def buffer_body(receive: Receive, limit: int) -> tuple[bytes, bool, bool]:
    """Read the request body, stopping once more than ``limit`` bytes have come.

    Returns:
        ``(body, complete, over)``: what was read; whether that is the whole body (if not, the
        rest is still to be received); whether it is larger than ``limit``.

    Raises:
        ClientDisconnect: the client left before the body was complete (a truncated request must
            never be forwarded as if it were whole).
    """
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientDisconnect("client disconnected before the request body was complete")
        chunk = message.get("body", b"")
        parts.append(chunk)
        size += len(chunk)
        complete = not message.get("more_body", False)
        if complete or size > limit:
            return b"".join(parts), complete, size > limit


def replay(body: bytes, complete: bool, receive: Receive) -> Receive:
    """A ``receive`` that first hands out ``body`` (with ``more_body`` when it is not ``complete``),
    then defers to ``receive``, so the rest of the body and ``http.disconnect`` still arrive."""
    replayed = False

    async def replaying() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": not complete}
        return await receive()

    return replaying


def with_length(headers: RawHeaders, length: int) -> RawHeaders:
    """``headers`` with ``content-length`` set to ``length`` (a rewritten request body)."""
    return [*((k, v) for k, v in headers if k != b"content-length"), (b"content-length", str(length).encode())]
