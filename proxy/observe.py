"""``RequestMetrics``: counts every request by method and outcome, and writes the access log.

The outermost layer of the proxy app. It labels each request with its HTTP method, its JSON-RPC
method (which the normalizer middleware notes in ``scope["mcp_normalizer.rpc_method"]`` for the
requests it watches; the ``Mcp-Method`` header of a 2026-07-28 request otherwise) and its response
status. With the access log on, one JSON line per request goes to ``mcp_normalizer.access``: method,
path (never the query, which may carry secrets), status, duration, response bytes.
"""

from __future__ import annotations

import logging
import time

from .jsonrpc import WATCHED_METHODS, header
from .metrics import Metrics
from .types import ASGIApp, Message, Receive, Scope, Send

access_logger = logging.getLogger("mcp_normalizer.access")
RPC_METHOD_KEY = "mcp_normalizer.rpc_method"
_KNOWN_HEADER_METHODS = WATCHED_METHODS | {"initialize", "ping", "server/discover", "prompts/get", "resources/read"}


class RequestMetrics:
    """ASGI middleware counting requests (and logging them when ``access_log``).

    Args:
        app: the wrapped app.
        metrics: where the counts go.
        access_log: write one access log line per request.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics, *, access_log: bool = False) -> None:
        self.app = app
        self.metrics = metrics
        self.access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        announced = header(scope["headers"], b"mcp-method")
        scope[RPC_METHOD_KEY] = announced if announced in _KNOWN_HEADER_METHODS else "other"
        started = time.monotonic()
        status = 0
        sent = 0
        counted = False

        def count() -> None:
            nonlocal counted
            if not counted:
                counted = True
                outcome = str(status) if status else "aborted"
                self.metrics.requests.labels(scope["method"], scope[RPC_METHOD_KEY], outcome).inc()

        async def counting(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
                if not message.get("more_body", False):
                    count()  # before the client has it all, so a scrape after it sees the count
            await send(message)

        try:
            await self.app(scope, receive, counting)
        finally:
            count()
            if self.access_log:
                fields = {
                    "event": "access",
                    "method": scope["method"],
                    "path": scope["path"],
                    "rpc_method": scope[RPC_METHOD_KEY],
                    "status": status,
                    "duration_ms": round((time.monotonic() - started) * 1000, 2),
                    "bytes": sent,
                }
                access_logger.info("%s %s %s", scope["method"], scope["path"], status, extra={"audit": fields})
