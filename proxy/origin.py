"""``OriginCheck``: requests from browsers of other origins get 403 (DNS-rebinding protection).

MCP servers MUST validate ``Origin`` (Streamable HTTP, every era; 2025-11-25 makes it a 403). With
``[proxy] allowed_origins`` set, a request carrying an ``Origin`` header that is not in the list is
answered 403 with a JSON-RPC error and never reaches the upstream. Requests without ``Origin``
(non-browser clients) pass. An empty list (the default) turns the check off.
"""

from __future__ import annotations

from .jsonrpc import header
from .types import ASGIApp, Receive, Scope, Send

_FORBIDDEN = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Origin not allowed"}}'


class OriginCheck:
    """ASGI middleware enforcing an ``Origin`` allowlist.

    Args:
        app: the wrapped app.
        allowed: allowed ``Origin`` values (scheme://host[:port]); compared exactly, case-insensitively.
    """

    def __init__(self, app: ASGIApp, allowed: tuple[str, ...]) -> None:
        self.app = app
        self.allowed = frozenset(origin.lower().rstrip("/") for origin in allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.allowed:
            origin = header(scope["headers"], b"origin")
            if origin is not None and origin.lower().rstrip("/") not in self.allowed:
                headers = [(b"content-type", b"application/json"), (b"content-length", str(len(_FORBIDDEN)).encode())]
                await send({"type": "http.response.start", "status": 403, "headers": headers})
                await send({"type": "http.response.body", "body": _FORBIDDEN})
                return
        await self.app(scope, receive, send)
