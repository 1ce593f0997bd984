"""Reading an ASGI request body once, and handing it on to the next app as if it were unread."""

from __future__ import annotations

from .errors import ClientDisconnect
from .types import Message, Receive


async def buffer_body(receive: Receive, limit: int) -> tuple[bytes, bool]:
    """Read the request body, at most ``limit`` bytes of it.

    Returns:
        ``(body, complete)``: ``complete`` is false when the body goes on beyond ``limit`` (what
        was read is returned; the rest is still to be received).

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
        if not message.get("more_body", False):
            return b"".join(parts), True
        if size > limit:
            return b"".join(parts), False


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
