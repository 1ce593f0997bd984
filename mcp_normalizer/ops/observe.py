"""``RequestRecord``: counts every request by method and outcome, and writes the access log.

It labels each request with its HTTP method, its JSON-RPC method (which the normalizer middleware
notes in ``scope["mcp_normalizer.rpc_method"]`` for the requests it watches; the ``Mcp-Method``
header of a 2026-07-28 request otherwise) and its outcome: the response status, or ``aborted`` when
no response started (the client left, or the exchange failed before a head was sent). With the
access log on, one JSON line per request goes to ``mcp_normalizer.access``: method, path (never the
query, which may carry secrets), status, duration, response bytes, and the protocol version the
request names (``era``: the one the middleware read from its header, ``_meta`` or ``initialize``,
noted in ``scope["mcp_normalizer.era"]``, else its ``MCP-Protocol-Version`` header; ``null`` when it
names none), and the one the upstream side speaks (``upstream_era``: the same, unless the era bridge
speaks 2026-07-28 upstream for a legacy client: :mod:`mcp_normalizer.hop.era_bridge`).
"""

from __future__ import annotations

import logging
import time

from ..types import Message, Scope, Send
from ..wire.eras import UPSTREAM_ERA_KEY
from ..wire.jsonrpc import WATCHED_METHODS, header
from .metrics import Metrics

access_logger = logging.getLogger("mcp_normalizer.access")
RPC_METHOD_KEY = "mcp_normalizer.rpc_method"
#: Where the middleware notes the protocol version a request names (for the access log).
ERA_KEY = "mcp_normalizer.era"
#: The most characters of a version the access log writes (a client writes the header at will).
_ERA_CHARS = 64
#: Methods counted under their own name (MCP's requests); any other is ``other``.
_KNOWN_METHODS = WATCHED_METHODS | {
    "initialize",
    "ping",
    "server/discover",
    "prompts/get",
    "prompts/list",
    "resources/read",
    "resources/list",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "tasks/list",
    "tasks/cancel",
}
#: HTTP methods counted under their own name; any other (h11 accepts any token) is ``other``.
_HTTP_METHODS = frozenset({"GET", "POST", "DELETE", "HEAD", "OPTIONS", "PUT", "PATCH"})


def metric_method(method: str | None) -> str:
    """The ``rpc_method`` label of a JSON-RPC method: its name when MCP defines it, else ``other``
    (a client names its methods at will; label values must stay few)."""
    return method if method in _KNOWN_METHODS else "other"


class RequestRecord:
    """Counts requests (and logs them when ``access_log``).

    Args:
        metrics: where the counts go.
        access_log: write one access log line per request.
    """

    def __init__(self, metrics: Metrics, *, access_log: bool = False) -> None:
        self.metrics = metrics
        self.access_log = access_log

    def start(self, scope: Scope, send: Send) -> Observed:
        """Begin recording the request of ``scope``; its responses go through the returned ``send``."""
        announced = header(scope["headers"], b"mcp-method")
        scope[RPC_METHOD_KEY] = metric_method(announced)
        scope[UPSTREAM_ERA_KEY] = []  # (the era bridge's, if it speaks another era upstream)
        return Observed(self, scope, send)


class Observed:
    """One request being recorded: ``send`` notes status and bytes; ``done()`` counts it once."""

    __slots__ = ("_counted", "_record", "_scope", "_send", "sent", "started", "status")

    def __init__(self, record: RequestRecord, scope: Scope, send: Send) -> None:
        self._record = record
        self._scope = scope
        self._send = send
        self._counted = False
        self.started = time.monotonic()
        self.status = 0
        self.sent = 0

    async def send(self, message: Message) -> None:
        """The wrapped ``send``."""
        kind = message["type"]
        if kind == "http.response.body":
            self.sent += len(message.get("body", b""))
            if not message.get("more_body", False):
                self._count()  # before the client has it all, so a scrape after it sees the count
        elif kind == "http.response.start":
            self.status = message["status"]
        await self._send(message)

    def _count(self) -> None:
        if not self._counted:
            self._counted = True
            scope = self._scope
            outcome = str(self.status) if self.status else "aborted"
            metrics = self._record.metrics
            method = scope["method"]
            metrics.requests.labels(
                method if method in _HTTP_METHODS else "other", scope[RPC_METHOD_KEY], outcome
            ).inc()

    def done(self) -> None:
        """The exchange is over (whatever happened): count it if not yet, write the access line."""
        self._count()
        if self._record.access_log:
            scope = self._scope
            era = scope.get(ERA_KEY) or header(scope["headers"], b"mcp-protocol-version")
            bridged = scope.get(UPSTREAM_ERA_KEY)
            fields = {
                "event": "access",
                "method": scope["method"],
                "path": scope["path"],
                "rpc_method": scope[RPC_METHOD_KEY],
                "status": self.status,
                "duration_ms": round((time.monotonic() - self.started) * 1000, 2),
                "bytes": self.sent,
                "era": era[:_ERA_CHARS] if era else None,
                "upstream_era": bridged[-1] if bridged else (era[:_ERA_CHARS] if era else None),
            }
            access_logger.info("%s %s %s", scope["method"], scope["path"], self.status, extra={"audit": fields})
