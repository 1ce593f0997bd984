"""``HeadLimit``: a request whose head (request line and headers) is too large gets 431.

uvicorn's h11 bound (``h11_max_incomplete_event_size``, set by the CLI) only applies while a head is
still arriving: a head that comes in one read is parsed whole, whatever its size. This middleware
measures every head the server accepted against ``[proxy] max_header_bytes`` and answers 431
(RFC 6585 section 5) with a JSON-RPC error before anything is forwarded, in every way the proxy runs.
"""

from __future__ import annotations

from .types import ASGIApp, Receive, Scope, Send


def head_size(scope: Scope) -> int:
    """Bytes of the request head as sent: request line, ``name: value\\r\\n`` lines, the blank line."""
    line = len(scope["method"]) + len(scope.get("raw_path") or scope["path"].encode()) + 12
    query = scope.get("query_string") or b""
    return line + (len(query) + 1 if query else 0) + sum(len(k) + len(v) + 4 for k, v in scope["headers"]) + 2


class HeadLimit:
    """ASGI middleware refusing request heads over ``limit`` bytes with 431.

    Args:
        app: the wrapped app.
        limit: the largest head accepted, in bytes (``[proxy] max_header_bytes``).
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and head_size(scope) > self.limit:
            body = (
                b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"request header fields larger than '
                + str(self.limit).encode()
                + b' bytes"}}'
            )
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 431, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)
