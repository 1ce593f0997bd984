"""``FrontDoor``: the proxy's outermost ASGI layer, everything a request meets before the normalizer.

One layer, one ``send`` wrapper per request, doing in order:

1. **the head-size bound**: a request head over ``max_header_bytes`` gets 431 (RFC 6585 section 5);
2. **the Host and Origin check** (:mod:`mcp_normalizer.wire.hosts`): 421 or 403, for the admin endpoints too;
3. **the admin endpoints** under their prefix (:mod:`mcp_normalizer.ops.admin`), not counted;
4. **counting** every other request (refused ones too) by HTTP method, JSON-RPC method and outcome
   (its status, or ``aborted`` when no response started), and the access log line when it is on
   (:mod:`mcp_normalizer.ops.observe`);
5. everything else goes to the wrapped app (the normalizer middleware around the forwarder).

Refusals carry a JSON-RPC error body (``id: null``: the request was not read) naming the setting
that would allow them, never reach the upstream, and are counted and logged once per cause and
peer (:mod:`mcp_normalizer.ops.refusals`).
"""

from __future__ import annotations

from ..ops.admin import Admin
from ..ops.observe import RequestRecord
from ..ops.refusals import DUPLICATE_HOST, DUPLICATE_ORIGIN, HEAD_SIZE, HOST, ORIGIN, Cause, RefusalLog, peer_of
from ..types import ASGIApp, Receive, Scope, Send
from ..wire.heads import head_size
from ..wire.hosts import HostPolicy
from ..wire.jsonrpc import refusal_body
from ..wire.responses import respond


class FrontDoor:
    """The outermost ASGI layer of the standalone proxy.

    Args:
        app: the wrapped app.
        admin: the admin endpoints.
        hosts: the ``Host``/``Origin`` policy.
        record: counts requests and writes the access log.
        max_header_bytes: the largest request head accepted (``[proxy] max_header_bytes``).
        refusals: where refusals are counted and logged (one is made when not given).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        admin: Admin,
        hosts: HostPolicy,
        record: RequestRecord,
        max_header_bytes: int,
        refusals: RefusalLog | None = None,
    ) -> None:
        self.app = app
        self.admin = admin
        self.hosts = hosts
        self.record = record
        self.max_header_bytes = max_header_bytes
        self.refusals = refusals if refusals is not None else RefusalLog()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        path: str = scope["path"]
        prefix = self.admin.prefix
        if refusal is None and path.startswith(prefix) and path[len(prefix) : len(prefix) + 1] == "/":
            await self.admin.answer(path[len(prefix) + 1 :], send)  # probes and scrapes are not counted
            return
        observed = self.record.start(scope, send)
        try:
            if refusal is not None:
                cause, detail, told = refusal
                message = self.refusals.refused(cause, peer_of(scope), detail, told=told)
                await respond(observed.send, cause.status, refusal_body(message))
            else:
                await self.app(scope, receive, observed.send)
        finally:
            observed.done()

    def _refusal(self, scope: Scope) -> tuple[Cause, str, str] | None:
        """Why the request may not pass (head too large, ``Host`` or ``Origin`` not allowed), or
        ``None``: the cause, what the log says of it, what the client is told of it."""
        size = head_size(scope)
        if size > self.max_header_bytes:
            limit = f"over {self.max_header_bytes} bytes"
            return HEAD_SIZE, f"{size} bytes, {limit}", limit
        host = origin = None
        for key, value in scope["headers"]:
            if key == b"host":
                if host is not None:  # RFC 9112 section 3.2: which one would the check have read?
                    return DUPLICATE_HOST, "", ""
                host = value.decode("latin-1")
            elif key == b"origin":
                if origin is not None:
                    return DUPLICATE_ORIGIN, "", ""
                origin = value.decode("latin-1")
        server = scope.get("server")
        refused = self.hosts.check(host, origin, server[0] if server else None)
        if refused is None:
            return None
        if refused == "host":
            return HOST, f"Host {_shown(host)}", ""
        return ORIGIN, f"Origin {_shown(origin)}", ""


def _shown(value: str | None) -> str:
    """A header value for a log line: quoted, at most 200 characters, ``none`` when absent."""
    return repr(value[:200]) if value is not None else "none"
