"""``NormalizerMiddleware``: pure ASGI middleware that normalizes an MCP app's tool results.

Wrap any Streamable HTTP MCP app (for example the MCP Python SDK's ``streamable_http_app()``)::

    app = NormalizerMiddleware(inner_mcp_app)

The standalone proxy is this same middleware around :class:`mcp_normalizer.forward.Forwarder`. Lifespan,
websocket and every request the proxy does not watch go straight to the inner app with the original
``send``. For a POST carrying ``tools/call`` or ``tools/list`` requests, the body is read once and
replayed to the inner app, and the response is driven through a
:class:`~mcp_normalizer.transform.ResponseTransformer`. When a call names a tool the proxy has not seen in
this scope, it fetches ``tools/list`` through the inner app itself (same authorization and session
headers, all pages), concurrently with the call.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from .audit import AuditLog
from .body import buffer_body, replay
from .capture import Capture
from .catalog import ToolEntry, scope_key
from .config import NormalizerConfig
from .errors import ClientDisconnect, UpstreamError
from .jsoncodec import dumps
from .jsonrpc import (
    TOOLS_CALL,
    TOOLS_LIST,
    WATCHED_METHODS,
    IdKey,
    PendingRequest,
    RequestInfo,
    header,
    inspect_request,
    object_only,
    response_to,
)
from .metrics import Metrics
from .normalize import Normalizer, Record
from .observe import RPC_METHOD_KEY, metric_method
from .request_rewrite import REWRITE, rename_calls
from .rules.clients import UNKNOWN, ClientProfile, profile_for
from .scopes import Limits, ScopeStore
from .sse import SSESplitter, parse_event
from .steps import run_sliced
from .tracing import tracing_for
from .transform import Exchange, ResponseTransformer
from .types import JSON, ASGIApp, JSONObject, Message, RawHeaders, Receive, Scope, Send

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

logger = logging.getLogger(__name__)

#: Request headers copied onto the proxy's own ``tools/list`` requests.
_FETCH_HEADERS = frozenset(
    {b"host", b"authorization", b"cookie", b"mcp-session-id", b"mcp-protocol-version", b"origin", b"user-agent"}
)
_FETCH_ID = itertools.count(1)
_MAX_PAGES = 100


class NormalizerMiddleware:
    """Pure ASGI middleware around an MCP app (Streamable HTTP transport).

    Args:
        app: the inner ASGI app (an MCP server app, or the proxy's forwarder).
        config: rule configuration; ``None`` uses the shipped ``config/normalizer.toml``.
        upstream: a label for the upstream in log lines, and part of every scope key.
        max_body_bytes: largest request body read for inspection; a larger POST passes through
            untouched (MCP requests are small; the forwarder has its own limit).
        metrics: count rewrites and oversize pass-throughs there.
        tracer_provider: where the spans of MCP requests go (:mod:`mcp_normalizer.tracing`);
            ``None``: the global provider, if one is set by then, else no tracing.
    """

    def __init__(
        self,
        app: ASGIApp,
        config: NormalizerConfig | None = None,
        *,
        upstream: str = "in-process",
        max_body_bytes: int = 4 * 1024 * 1024,
        metrics: Metrics | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.app = app
        self.config = config if config is not None else NormalizerConfig.shipped()
        self.normalizer = Normalizer(self.config)
        config = self.config
        self.scopes = ScopeStore(
            Limits(
                max_scopes=config.max_scopes,
                max_pending=config.max_pending,
                pending_ttl=config.pending_ttl,
                max_catalog_bytes=config.max_catalog_bytes,
            )
        )
        self.audit = AuditLog(upstream, metrics=metrics)
        if metrics is not None:
            metrics.watch_catalogs(self.scopes)
        self.capture = Capture(config.proxy.capture_file) if config.proxy.capture_file else None
        self.metrics = metrics
        self.upstream = upstream
        self.max_body_bytes = max_body_bytes
        self._inflight: dict[str, _Fetch] = {}
        self.tracing = tracing_for(tracer_provider)  # None: tracing off, nothing done per request
        # Every rule off and nothing to capture or trace: no request is read, no response inspected.
        self._idle = self.normalizer.idle and self.capture is None and self.tracing is None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" and self.tracing is not None:
            receive = self.tracing.flushing(receive)  # spans still queued are exported at shutdown
        if scope["type"] == "lifespan" and self.capture is not None:
            await self.app(scope, self._closing_capture(receive), send)
            return
        if (
            scope["type"] != "http"
            or self._idle
            or (self.config.path is not None and scope["path"] != self.config.path)
        ):
            await self.app(scope, receive, send)
            return
        headers: RawHeaders = scope["headers"]
        session = header(headers, b"mcp-session-id")
        method = scope["method"]
        if method == "POST":
            await self._post(scope, receive, send, session)
        elif method == "GET" and session is not None:
            await self._get(scope, receive, send)
        else:
            if method == "DELETE":
                self.scopes.forget(self._scope_key(headers))  # the session ends: what was learned for it goes
            await self.app(scope, receive, send)

    def _closing_capture(self, receive: Receive) -> Receive:
        """``receive`` of the lifespan, writing out the capture when the server shuts down."""
        capture = self.capture

        async def closing() -> Message:
            message = await receive()
            if message["type"] == "lifespan.shutdown" and capture is not None:
                await anyio.to_thread.run_sync(capture.close)
            return message

        return closing

    async def _post(self, scope: Scope, receive: Receive, send: Send, session: str | None) -> None:
        headers: RawHeaders = scope["headers"]
        try:
            body, complete, over = await buffer_body(receive, self.max_body_bytes)
        except ClientDisconnect:
            return  # never forward a truncated request
        replayed = replay(body, complete, receive)
        info = inspect_request(body, headers) if not over else None  # a huge body is not MCP's: untouched
        if info is None:
            await self.app(scope, replayed, send if session is None else self._watch_session(scope, send))
            return
        scope[RPC_METHOD_KEY] = metric_method(next(iter(info.pending.values())).method)
        trace = self.tracing.start(scope, body, info) if self.tracing is not None else None  # a span per request
        audit = self.audit if trace is None else trace.audit(self.audit)
        key = self._scope_key(headers)
        # Only what the result rules read makes a scope: an initialize must not (its key, without
        # the session the response assigns, would be an orphan).
        state = self.scopes.state(key) if info.watched else self.scopes.peek(key) or self.scopes.detached()
        client = profile_for(info.client_info) if info.client_info is not None else state.client
        if info.initializes and client is not UNKNOWN:
            send = self._naming_session(headers, client, send)
        renamed = rename_calls(body, info.pending, state.names)
        pending = info.pending
        if renamed is not None:  # tools advertised under other names: called upstream by theirs
            body, pending, calls = renamed
            replayed = replay(body, complete, receive)
            scope = {**scope, "headers": _with_length(headers, len(body))}
            for call in calls:
                audit.emit(
                    Record(REWRITE, pending[call].tool, True),
                    method=TOOLS_CALL,
                    jsonrpc_id=call[1],
                    scope=key,
                    era=info.era,
                    listed=True,
                )
        if session is not None:
            for id_key, request in pending.items():
                if request.method in WATCHED_METHODS and request.method != TOOLS_LIST:
                    state.pending.put(id_key, request)  # its response may come on a later GET
        private = any(header(headers, name) is not None for name in (b"mcp-session-id", b"authorization", b"cookie"))
        exchange = Exchange(
            pending, info.era, key, state, self.scopes.public, sole=info.sole, client=client, private=private
        )
        needed = {tool for tool in map(exchange.tool_of, pending.values()) if tool is not None}
        unknown = {tool for tool in needed if exchange.tool(tool) is None and not state.catalog.known_absent(tool)}
        if trace is None:
            await self._exchange(scope, replayed, send, exchange, info, unknown)
            return
        scope, body = trace.forward(scope, body)  # the span context to the upstream (headers, params._meta)
        with trace:
            await self._exchange(
                scope, replay(body, complete, receive), trace.send(send), exchange, info, unknown, audit
            )

    async def _get(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A legacy session's GET stream: it may carry resumed responses and ``list_changed``."""
        headers: RawHeaders = scope["headers"]
        key = self._scope_key(headers)
        state = self.scopes.peek(key)
        if state is None:
            await self.app(scope, receive, self._watch_session(scope, send))
            return
        era = header(headers, b"mcp-protocol-version")
        exchange = Exchange(state.pending, era, key, state, self.scopes.public, client=state.client)
        await self._exchange(scope, receive, send, exchange, None, set())

    async def _exchange(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        exchange: Exchange,
        info: RequestInfo | None,
        unknown: set[str],
        audit: AuditLog | None = None,
    ) -> None:
        """Run the inner app with the response going through a transformer (and a tool fetch if needed)."""
        limit = self.config.proxy.max_rewrite_bytes
        audit = self.audit if audit is None else audit  # (a traced exchange's also writes span events)
        transformer = ResponseTransformer(
            exchange, self.normalizer, audit, max_json_bytes=limit, max_event_bytes=limit, capture=self.capture
        )
        fetch = info is not None and bool(unknown) and self.config.fetch_tools_list
        fetched = anyio.Event() if fetch else None  # a response stalls only for a fetch in flight
        on_404 = (
            self._forget_on_404(exchange.scope) if header(scope["headers"], b"mcp-session-id") is not None else None
        )
        oversize = self.metrics.oversize.inc if self.metrics is not None else None
        wrapped = _TransformingSend(send, transformer, fetched, on_404, oversize)
        failure: UpstreamError | None = None
        try:
            if fetch:
                assert info is not None and fetched is not None
                async with anyio.create_task_group() as tg:  # the fetch runs beside the call
                    exchange.fetching |= unknown
                    tg.start_soon(self._fetch_for, scope, info, exchange, unknown, fetched)
                    try:
                        await self.app(scope, receive, wrapped)
                    except UpstreamError as exc:
                        failure = exc
            else:
                try:
                    await self.app(scope, receive, wrapped)  # no task of its own: nothing runs beside it
                except UpstreamError as exc:
                    failure = exc
        finally:
            transformer.close()  # a response abandoned mid-message (a client gone): its work freed now
        wrapped.count_oversize()  # a response broken off before its end
        if failure is not None:
            if wrapped.started:
                held = transformer.release()  # nothing is lost: what waited goes out as it came
                if held:
                    await send({"type": "http.response.body", "body": held, "more_body": True})
                raise failure  # bytes already went out: break the response, as the upstream did
            ids = _ids(exchange.pending) if info is not None else []
            await _upstream_error(send, failure, ids)

    def _scope_key(self, headers: RawHeaders) -> str:
        return scope_key(
            self.upstream,
            header(headers, b"mcp-session-id"),
            header(headers, b"authorization"),
            header(headers, b"cookie"),
        )

    def _forget_on_404(self, key: str) -> Callable[[int], None]:

        def check(status: int) -> None:
            if status == 404:  # the upstream no longer knows the session: the client re-initializes
                self.scopes.forget(key)

        return check

    def _naming_session(self, headers: RawHeaders, client: ClientProfile, send: Send) -> Send:
        """``send`` that remembers ``client`` for the session the ``initialize`` response assigns
        (``Mcp-Session-Id``): the session's later requests do not name their client."""

        async def naming(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 200:
                session = header(message.get("headers", []), b"mcp-session-id")
                if session is not None:
                    auth, cookie = header(headers, b"authorization"), header(headers, b"cookie")
                    self.scopes.state(scope_key(self.upstream, session, auth, cookie)).client = client
            await send(message)

        return naming

    def _watch_session(self, scope: Scope, send: Send) -> Send:
        """``send`` that forgets the session's state when the upstream answers 404 (session expired)."""
        check = self._forget_on_404(self._scope_key(scope["headers"]))

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start":
                check(message["status"])
            await send(message)

        return watched

    async def _fetch_for(
        self, scope: Scope, info: RequestInfo, exchange: Exchange, unknown: set[str], fetched: anyio.Event
    ) -> None:
        """Learn the scope's tools (one fetch per scope at a time), then release the waiting response."""
        try:
            running = self._inflight.get(exchange.scope)
            if running is not None:
                await running.done.wait()
                exchange.learned.append({entry.name: entry for entry in running.entries})
                return
            catalog = exchange.state.catalog
            if all(exchange.tool(t) is not None or catalog.known_absent(t) for t in unknown):
                return  # a fetch that ended after this exchange looked has learned them
            fetch = self._inflight[exchange.scope] = _Fetch()
            try:
                with anyio.move_on_after(self.config.fetch_timeout) as timer:
                    if await self._learn_tools(scope, info, exchange, fetch):  # the whole list came:
                        exchange.state.catalog.absent |= {t for t in unknown if exchange.tool(t) is None}
                if timer.cancelled_caught:
                    logger.warning(
                        "tools/list fetch timed out after %ss (scope %s)", self.config.fetch_timeout, exchange.scope
                    )
            except Exception:
                logger.warning("tools/list fetch failed (scope %s)", exchange.scope, exc_info=True)
            finally:
                fetch.done.set()
                del self._inflight[exchange.scope]
        finally:
            exchange.fetching -= unknown
            fetched.set()

    async def _learn_tools(self, scope: Scope, info: RequestInfo, exchange: Exchange, fetch: _Fetch) -> bool:
        """Fetch every ``tools/list`` page through the inner app and learn it for the exchange's scope.

        Returns:
            True when every page arrived (what the list lacks is then known to be absent).
        """
        call_meta = next((p.meta for p in info.pending.values() if p.meta), {})
        protocol_meta = {k: v for k, v in call_meta.items() if k.startswith("io.modelcontextprotocol/")}
        modern = not object_only(exchange.era)
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            params: JSONObject = {}
            if modern:
                params["_meta"] = protocol_meta
            if cursor is not None:
                params["cursor"] = cursor
            request_id = f"mcp-normalizer-tools-list-{next(_FETCH_ID)}"
            body = dumps({"jsonrpc": "2.0", "id": request_id, "method": TOOLS_LIST, "params": params})
            result = await self._inner_request(scope, body, request_id, modern)
            if result is None:
                return False
            if self.capture is not None:
                self.capture.exchange(
                    scope=exchange.scope,
                    era=exchange.era,
                    request=PendingRequest(TOOLS_LIST, cursor=cursor),
                    jsonrpc_id=request_id,
                    response={"jsonrpc": "2.0", "id": request_id, "result": result},
                )
            outcome = await run_sliced(
                self.normalizer.tools_list_steps(result, exchange.era, exchange.client, exchange.state.learned)
            )
            exchange.learn_tools(result, outcome.entries, first_page=cursor is None)
            fetch.entries.extend(outcome.entries)
            next_cursor = result.get("nextCursor")
            if not isinstance(next_cursor, str) or not next_cursor:
                return True
            cursor = next_cursor
        return False

    async def _inner_request(self, scope: Scope, body: bytes, request_id: str, modern: bool) -> JSONObject | None:
        """POST one JSON-RPC request to the inner app, as the client would; return its result.

        Reading stops as soon as the response is there: an SSE stream that stays open after it
        (or never ends) does not hold the caller up.
        """
        headers: RawHeaders = [(k, v) for k, v in scope["headers"] if k in _FETCH_HEADERS]
        headers += [
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
            (b"content-length", str(len(body)).encode()),
        ]
        if modern:
            headers.append((b"mcp-method", TOOLS_LIST.encode()))
        sub_scope = {**scope, "method": "POST", "headers": headers}
        answered = anyio.Event()
        delivered = False
        found: list[JSONObject] = []
        reader = _ResponseReader(request_id)

        async def receive() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await answered.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            result = reader.read(message)
            if result is not None:
                found.append(result)
            if reader.done:
                answered.set()

        async with anyio.create_task_group() as tg:

            async def run() -> None:
                try:
                    await self.app(sub_scope, receive, send)
                finally:
                    answered.set()

            tg.start_soon(run)
            await answered.wait()
            tg.cancel_scope.cancel()  # the answer is in: stop the inner app (it sees the client leave)
        if reader.status != 200:
            logger.warning("tools/list fetch answered HTTP %s", reader.status)
        return found[0] if found else None


class _ResponseReader:
    """Finds the result of one JSON-RPC response in an ASGI response, JSON or SSE, as it streams."""

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.status = 0
        self.done = False
        self._sse = False
        self._splitter = SSESplitter()
        self._parts: list[bytes] = []

    def read(self, message: Message) -> JSONObject | None:
        """Take one ``send`` message; return the result once it is complete (``done`` is then set)."""
        if message["type"] == "http.response.start":
            self.status = message["status"]
            content_type = (header(list(message.get("headers", [])), b"content-type") or "").lower()
            self._sse = content_type.startswith("text/event-stream")
            self.done = self.status != 200
            return None
        if message["type"] != "http.response.body" or self.done:
            return None
        chunk = message.get("body", b"")
        final = not message.get("more_body", False)
        if self._sse:
            for block in self._splitter.feed(chunk):
                result = self._result_in(parse_event(block).data)
                if result is not None:
                    self.done = True
                    return result
        else:
            self._parts.append(chunk)
            if final:
                self.done = True
                return self._result_in(b"".join(self._parts))
        self.done = final
        return None

    def _result_in(self, data: bytes | None) -> JSONObject | None:
        message = response_to(data, self.request_id)
        result = message.get("result") if message is not None else None
        return result if isinstance(result, dict) else None


@dataclass(slots=True)
class _Fetch:
    """A ``tools/list`` fetch in flight for one scope; later exchanges wait for it."""

    done: anyio.Event = field(default_factory=anyio.Event)
    entries: list[ToolEntry] = field(default_factory=list)


#: The largest body piece sent at once.
_PIECE = 256 * 1024


class _TransformingSend:
    """The ``send`` handed to the inner app: runs the response through the transformer."""

    __slots__ = ("_counted", "_fetched", "_on_status", "_oversize", "_send", "_start", "_t", "started")

    def __init__(
        self,
        send: Send,
        transformer: ResponseTransformer,
        fetched: anyio.Event | None,
        on_status: Callable[[int], None] | None = None,
        oversize: Callable[[], None] | None = None,
    ) -> None:
        self._send = send
        self._t = transformer
        self._fetched = fetched
        self._on_status = on_status
        self._oversize = oversize
        self._counted = False
        self._start: Message | None = None
        self.started = False  # has the response start gone to the client?

    async def __call__(self, message: Message) -> None:
        kind = message["type"]
        t = self._t
        if kind == "http.response.start":
            if self._on_status is not None:
                self._on_status(message["status"])
            t.start(message["status"], list(message.get("headers", [])))
            self._start = message
            if not t.hold_start:
                await self._send_start()
            return
        if kind != "http.response.body":
            await self._send(message)
            return
        more = bool(message.get("more_body", False))
        out = t.feed(message.get("body", b""))
        if not more:
            out += t.finish()
        while t.stalled or t.busy:
            if t.stalled:
                if self._fetched is not None:  # else no fetch runs: nothing to wait for
                    await self._fetched.wait()
            else:
                await anyio.lowlevel.checkpoint()  # a long message: let other sessions run between slices
            out += t.resume()
        if self._start is not None and not t.hold_start:
            await self._send_start()
        if not more:
            self.count_oversize()  # before the client has it all, so a scrape after it sees the count
        if self._start is None and (out or not more):
            # A huge rewritten body goes out in pieces: the server copies each piece into its
            # buffers, and other sessions run between them (one 16 MiB copy holds them all).
            if len(out) > _PIECE:
                view = memoryview(out)
                for start in range(0, len(out) - _PIECE, _PIECE):
                    piece = bytes(view[start : start + _PIECE])
                    await self._send({"type": "http.response.body", "body": piece, "more_body": True})
                out = bytes(view[start + _PIECE :])
            await self._send({"type": "http.response.body", "body": out, "more_body": more})

    def count_oversize(self) -> None:
        """Count, once, a response passed through unrewritten for its size."""
        if self._t.oversize and not self._counted and self._oversize is not None:
            self._counted = True
            self._oversize()

    async def _send_start(self) -> None:
        assert self._start is not None
        start = {**self._start, "headers": self._t.headers}
        self._start = None
        self.started = True
        await self._send(start)


def _with_length(headers: RawHeaders, length: int) -> RawHeaders:
    """``headers`` with ``content-length`` set to ``length`` (a rewritten request body)."""
    return [*((k, v) for k, v in headers if k != b"content-length"), (b"content-length", str(length).encode())]


def _ids(pending: Mapping[IdKey, PendingRequest]) -> list[JSON]:
    return [value for _, value in pending]


async def _upstream_error(send: Send, error: UpstreamError, ids: list[JSON]) -> None:
    """The upstream broke off before anything was sent: a JSON-RPC error per watched request."""
    logger.warning("%s", error)
    errors = [{"jsonrpc": "2.0", "id": i, "error": {"code": -32000, "message": str(error)}} for i in ids]
    body = dumps(errors[0] if len(errors) == 1 else errors)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": error.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": body})
