"""``NormalizerMiddleware``: pure ASGI middleware that normalizes an MCP app's tool results.

Wrap any Streamable HTTP MCP app (for example the MCP Python SDK's ``streamable_http_app()``)::

    app = NormalizerMiddleware(inner_mcp_app)

The standalone proxy is this same middleware around :class:`mcp_normalizer.hop.forward.Forwarder`. Lifespan,
websocket and every request the proxy does not watch go straight to the inner app with the original
``send``. For a POST carrying ``tools/call`` or ``tools/list`` requests, the body is read once and
replayed to the inner app, and the response is driven through a
:class:`~mcp_normalizer.engine.transform.ResponseTransformer`. When a call names a tool the proxy has not seen in
this scope, it fetches ``tools/list`` through the inner app itself, concurrently with the call
(:mod:`mcp_normalizer.hop.tools_fetch`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import TYPE_CHECKING

import anyio

from .config import NormalizerConfig, redact_url
from .engine.audit import AuditLog
from .engine.capture import Capture
from .engine.catalog import scope_key
from .engine.client_id import ClientMemory, connection_key, credentials_key, from_user_agent
from .engine.exchange import Exchange
from .engine.lessons import LessonBook
from .engine.normalize import Normalizer, Record
from .engine.request_rewrite import (
    REWRITE,
    argument_keys,
    enum_places,
    mismatched_calls,
    rename_calls,
    renames_keys,
)
from .engine.rules.base import Mode
from .engine.rules.clients import UNKNOWN, ClientProfile, profile_for
from .engine.rules.host_faults import ENUM_NON_STRING
from .engine.rules.host_schemas import mentions_invented_key
from .engine.rules.learned import RULE as LEARN_RULE
from .engine.rules.tool_names import invented
from .engine.scopes import Changes, Limits, ScopeState, ScopeStore, SharedBackend
from .engine.transform import ResponseTransformer
from .errors import ClientDisconnect, ConfigError, ResponseRefused, UpstreamError
from .hop.announcer import Announcer, AnnouncingSend
from .hop.relay import TransformingSend
from .hop.tools_fetch import ToolsFetcher
from .ops.lesson_store import LessonStore
from .ops.metrics import Metrics
from .ops.observe import ERA_KEY, RPC_METHOD_KEY, metric_method
from .ops.tracing import tracing_for
from .ops.withheld import WithheldTools
from .types import CONNECTION, JSON, ASGIApp, Message, RawHeaders, Receive, Scope, Send
from .wire.body import buffer_body, replay, with_length
from .wire.eras import UPSTREAM_ERA_KEY, era_of
from .wire.forwarded import ForwardingPolicy, parse_networks
from .wire.jsonrpc import (
    TOOLS_CALL,
    TOOLS_LIST,
    WATCHED_METHODS,
    IdKey,
    PendingRequest,
    RequestInfo,
    header,
    inspect_request,
)
from .wire.responses import error_body, respond

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

#: The key of :data:`~mcp_normalizer.types.CONNECTION` the client that named itself on a connection is kept under.
_CLIENT = "mcp_normalizer.client"

logger = logging.getLogger(__name__)


class NormalizerMiddleware:
    """Pure ASGI middleware around an MCP app (Streamable HTTP transport).

    Args:
        app: the inner ASGI app (an MCP server app, or the proxy's forwarder).
        config: rule configuration; ``None`` uses the shipped ``config/normalizer.toml``.
        upstream: a label for the upstream in log lines, and part of every scope key.
        identity: the whole upstream (:func:`mcp_normalizer.ops.lesson_store.http_identity`,
            :func:`~mcp_normalizer.ops.lesson_store.command_identity`), what its lessons are
            named by; ``None``: the label.
        max_body_bytes: largest request body read for inspection; a larger POST passes through
            untouched (MCP requests are small; the forwarder has its own limit).
        metrics: count rewrites and oversize pass-throughs there.
        tracer_provider: where the spans of MCP requests go (:mod:`mcp_normalizer.ops.tracing`);
            ``None``: the global provider, if one is set by then, else no tracing.
        shutdown_tracer_provider: shut ``tracer_provider`` down when the app shuts down (the
            standalone proxy owns the one it builds from ``OTEL_*``); else it is only flushed.
    """

    def __init__(
        self,
        app: ASGIApp,
        config: NormalizerConfig | None = None,
        *,
        upstream: str = "in-process",
        identity: str | None = None,
        max_body_bytes: int = 4 * 1024 * 1024,
        metrics: Metrics | None = None,
        tracer_provider: TracerProvider | None = None,
        shutdown_tracer_provider: bool = False,
    ) -> None:
        self.app = app
        self.config = config if config is not None else NormalizerConfig.shipped()
        #: whether any ``[tools."NAME"] model_api`` names a family (else no call asks which)
        self._tool_families = any(tool.model_api for tool in self.config.tools.values())
        config = self.config
        #: What results taught of their tools, for every session of this upstream
        #: (:mod:`mcp_normalizer.engine.lessons`).
        self.lessons = LessonBook(enabled=config.mode(LEARN_RULE.name, None) is not Mode.OFF)
        self.normalizer = Normalizer(config, lessons=self.lessons)
        limits = Limits(
            max_scopes=config.max_scopes,
            max_pending=config.max_pending,
            pending_ttl=config.pending_ttl,
            max_catalog_bytes=config.max_catalog_bytes,
        )
        shared: SharedBackend | None = None
        if config.proxy.state_url:  # replicas share scope state: redis-py is imported only now
            try:
                from .ops.shared_state import RedisState

                shared = RedisState(
                    config.proxy.state_url,
                    secret=config.proxy.state_secret,
                    limits=limits,
                    metrics=metrics,
                    scopes_per_client=config.proxy.state_scopes_per_client,
                )
            except ModuleNotFoundError as exc:
                if exc.name is None or not exc.name.startswith("redis"):
                    raise
                raise ConfigError(
                    "state_url is set, but redis-py is not installed: pip install 'mcp-normalizer[redis]'"
                ) from None
            logger.info("sharing scope state in %s (state_url)", redact_url(config.proxy.state_url))
        self.scopes = ScopeStore(limits, shared=shared)
        self.lesson_store = LessonStore(
            self.lessons,
            upstream,
            config.proxy.state_dir or None,
            shared,
            identity=identity,
            secret=config.proxy.state_secret,
        )
        self.lesson_store.load()
        #: The open GET streams of this upstream's sessions, told when a lesson lands.
        self.announcer = Announcer()
        self.forwarding = ForwardingPolicy(trusted=parse_networks(config.proxy.trusted_proxies))
        #: The client each connection and credential named last (:mod:`mcp_normalizer.engine.client_id`).
        self.clients = ClientMemory(config.max_scopes)
        #: The tools withheld from each host lately (rule ``withhold_tools``; ``GET {admin_prefix}/withheld``).
        self.withheld = WithheldTools()
        self.audit = AuditLog(upstream, metrics=metrics, sinks=(self.withheld.note,))
        if metrics is not None:
            metrics.watch_catalogs(self.scopes)
        self.capture = Capture(config.proxy.capture_file) if config.proxy.capture_file else None
        self.metrics = metrics
        self.upstream = upstream
        self.max_body_bytes = max_body_bytes
        self.fetcher = ToolsFetcher(
            app,
            self.normalizer,
            timeout=config.fetch_timeout,
            max_bytes=config.proxy.max_rewrite_bytes,
            capture=self.capture,
        )
        # None: tracing off, nothing done per request
        self.tracing = tracing_for(tracer_provider, owned=shutdown_tracer_provider)
        # Every rule off and nothing to capture or trace: no request is read, no response inspected.
        self._idle = self.normalizer.idle and self.capture is None and self.tracing is None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" and self.tracing is not None:
            receive = self.tracing.flushing(receive)  # spans still queued are exported at shutdown
        if scope["type"] == "lifespan" and (self.capture is not None or self.scopes.shared is not None):
            await self.app(scope, self._closing(receive), send)
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
            if method == "DELETE":  # the session ends: what was learned for it goes
                await self.scopes.forget_shared(self._scope_key(headers), self._shared_id(headers))
            await self.app(scope, receive, send)

    def _closing(self, receive: Receive) -> Receive:
        """``receive`` of the lifespan, writing out the capture and closing the shared state
        store's connections when the server shuts down."""
        capture, shared = self.capture, self.scopes.shared

        async def closing() -> Message:
            message = await receive()
            if message["type"] == "lifespan.shutdown":
                if capture is not None:
                    await anyio.to_thread.run_sync(capture.close)
                if shared is not None:
                    await shared.close()
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
        if info.era:
            scope[ERA_KEY] = info.era
        trace = self.tracing.start(scope, body, info) if self.tracing is not None else None  # a span per request
        audit = self.audit if trace is None else trace.audit(self.audit)
        key = self._scope_key(headers)
        # Only what the result rules read makes a scope: an initialize must not (its key, without
        # the session the response assigns, would be an orphan).
        state = self.scopes.state(key) if info.watched else self.scopes.peek(key) or self.scopes.detached()
        shared = self._shared_id(headers) if info.watched else None
        if shared is not None:  # what another replica learned for the scope, and the tools of its tasks
            state.share(shared, self._client_address(scope))
            tasks = {
                r.task_id for r in info.pending.values() if r.task_id is not None and state.task_tool(r.task_id) is None
            }
            await self.scopes.load(state, tasks)
        client = self._identify(scope, info, state)
        if info.initializes and client is not UNKNOWN:
            send = self._naming_session(scope, client, send)
        client = self.config.for_client(client)  # the model API family the settings name for it
        private = any(header(headers, name) is not None for name in (b"mcp-session-id", b"authorization", b"cookie"))
        exchange = Exchange(
            info.pending,
            info.era,
            key,
            state,
            self.scopes.public,
            sole=info.sole,
            client=client,
            private=private,
            own_stream=True,
            witness_of=self._witness_of(headers, info.era, state),
            upstream_eras=scope.get(UPSTREAM_ERA_KEY),
        )
        names = await self._names(scope, info, exchange, body)
        mismatched = mismatched_calls(exchange, body, info.pending, names)
        if mismatched:
            logger.warning(
                "%d tools/call named a tool or an argument as the listing names it for another client, not for %s:"
                " sent as it came (scope %s)",
                mismatched,
                client.label,
                key,
            )
        family_of = self._tool_family if self._tool_families else None
        keys = argument_keys(exchange, info.pending, names, family_of)
        enums = enum_places(exchange, info.pending, names, family_of)
        renamed = rename_calls(body, info.pending, names, keys, enums)
        if renamed is not None:  # tools advertised under other names: called upstream by theirs
            body, exchange.pending, calls = renamed
            replayed = replay(body, complete, receive)
            scope = {**scope, "headers": with_length(headers, len(body))}
            for call in calls:
                audit.emit(
                    Record(REWRITE, exchange.pending[call].tool, True),
                    method=TOOLS_CALL,
                    jsonrpc_id=call[1],
                    scope=key,
                    era=info.era,
                    listed=True,
                    client=client.label,
                )
        pending = exchange.pending
        if session is not None:
            for id_key, request in pending.items():
                if request.method in WATCHED_METHODS and request.method != TOOLS_LIST:
                    state.await_response(id_key, request)  # its response may come on a later GET
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

    def _tool_family(self, tool: str) -> str:
        """The model API family ``[tools."NAME"] model_api`` names for ``tool`` (``""``: none)."""
        return self.config.tool(tool).model_api

    async def _names(self, scope: Scope, info: RequestInfo, exchange: Exchange, body: bytes) -> Mapping[str, str]:
        """The name map the POST's ``tools/call`` requests are renamed by (rule ``tool_names``): the
        current listing's. A scope with no current listing (never listed, forgotten, listed
        through another replica) fetches the list first when a call names a tool by a name of
        the shape the rule invents, or when a host whose argument names rule ``host_schemas``
        renames calls a tool the scope has no entry for (or one listed to another client without
        its property names read) with a key of the shape it invents;
        otherwise, and when the fetch fails, calls go as sent."""
        calls = {r.tool for r in info.pending.values() if r.method == TOOLS_CALL and r.tool is not None}
        names = exchange.names(self.config, calls)
        if names is not None:
            wanted = set()
        else:
            wanted = {tool for tool in calls if invented(tool)}
        if renames_keys(exchange.client) and mentions_invented_key(body):
            mapped = names or {}
            entries = {tool: exchange.tool(mapped.get(tool, tool)) for tool in calls}
            # no entry, or one listed to another client whose property names were not read
            wanted |= {tool for tool, entry in entries.items() if entry is None or not entry.keys_read}
        if exchange.client.host_needs(ENUM_NON_STRING):  # a call's enum strings need the tool's entry
            mapped = names or {}
            entries = {tool: exchange.tool(mapped.get(tool, tool)) for tool in calls}
            # no entry, or one listed to another client without the rules (its enums not read)
            wanted |= {tool for tool, entry in entries.items() if entry is None or not entry.keys_read}
        if not wanted or not self.config.fetch_tools_list:
            return names or {}
        await self.fetcher.fetch_for(scope, info, exchange, wanted, anyio.Event(), read_keys=True)
        return exchange.names(self.config, calls) or {}

    async def _get(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A legacy session's GET stream: it may carry resumed responses and ``list_changed``."""
        headers: RawHeaders = scope["headers"]
        key = self._scope_key(headers)
        state = self.scopes.peek(key)
        shared = self._shared_id(headers)
        if shared is not None:  # the requests may have gone through another replica
            state = state if state is not None else self.scopes.state(key)
            state.share(shared, self._client_address(scope))
            await self.scopes.load(state, pending=True)
        if state is None:
            await self.app(scope, receive, self._watch_session(scope, send))
            return
        era = header(headers, b"mcp-protocol-version")
        exchange = Exchange(
            state.pending,
            era,
            key,
            state,
            self.scopes.public,
            client=self.config.for_client(state.client),
            witness_of=self._witness_of(headers, era, state),
            upstream_eras=scope.get(UPSTREAM_ERA_KEY),
        )
        unknown: set[str] = set()
        fetch_info = None
        if shared is not None:  # a replica that did not see the calls fetches their tools' list
            requests = [state.pending[k] for k in list(state.pending) if k in state.pending]
            needed = {tool for tool in map(exchange.tool_of, requests) if tool is not None}
            unknown = {tool for tool in needed if exchange.tool(tool) is None and not state.catalog.known_absent(tool)}
            fetch_info = RequestInfo({}, era)
        await self._exchange(scope, receive, send, exchange, None, unknown, fetch_info=fetch_info)

    async def _exchange(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        exchange: Exchange,
        info: RequestInfo | None,
        unknown: set[str],
        audit: AuditLog | None = None,
        *,
        fetch_info: RequestInfo | None = None,
    ) -> None:
        """Run the inner app with the response going through a transformer (and a tool fetch if
        needed: for the requests of ``info``, the POST's, or of ``fetch_info`` on a ``GET``)."""
        fetch_info = fetch_info if fetch_info is not None else info
        state = exchange.state
        if info is not None and any(r.method == TOOLS_LIST for r in info.pending.values()):
            await self.lesson_store.refresh()  # what another replica learned, before the tools are listed
        if state.changes is not None:  # what the exchange learns is shared before the client can act on it
            send = self._sharing(state, send)
        limit = self.config.proxy.max_rewrite_bytes
        audit = self.audit if audit is None else audit  # (a traced exchange's also writes span events)
        transformer = ResponseTransformer(
            exchange, self.normalizer, audit, max_json_bytes=limit, max_event_bytes=limit, capture=self.capture
        )
        fetch = fetch_info is not None and bool(unknown) and self.config.fetch_tools_list
        fetched = anyio.Event() if fetch else None  # a response stalls only for a fetch in flight
        on_404 = (
            self._forget_on_404(exchange.scope) if header(scope["headers"], b"mcp-session-id") is not None else None
        )
        oversize = self.metrics.oversize.inc if self.metrics is not None else None
        listening: AbstractContextManager[None] = nullcontext()
        wrapped: TransformingSend
        if info is None:  # a GET stream: it also carries what other sessions' results taught
            wrapped = stream = AnnouncingSend(send, transformer, fetched, on_404, oversize)
            listening = self.announcer.listening(state, stream)
        else:
            wrapped = TransformingSend(send, transformer, fetched, on_404, oversize)
        failure: UpstreamError | None = None
        with listening:  # (registered while the stream is open)
            try:
                if fetch:
                    assert fetch_info is not None and fetched is not None
                    async with anyio.create_task_group() as tg:  # the fetch runs beside the call
                        exchange.fetching |= unknown
                        tg.start_soon(self.fetcher.fetch_for, scope, fetch_info, exchange, unknown, fetched)
                        failure = await self._run(scope, receive, wrapped)
                else:
                    failure = await self._run(scope, receive, wrapped)  # no task of its own: nothing runs beside it
            finally:
                transformer.close()  # a response abandoned mid-message (a client gone): its work freed now
        wrapped.count_oversize()  # a response broken off before its end
        if wrapped.refused is not None:
            logger.warning("%s (scope %s)", wrapped.refused, exchange.scope)
            if self.metrics is not None:
                self.metrics.upstream_errors.labels("foreign_response").inc()
        if state.changes:
            await self.scopes.flush(state)  # learned after the last byte went out
        if self.lessons.dirty or self.lessons.dirty_evidence:
            await self.lesson_store.save()
        if transformer.taught:  # the other sessions listing those tools hear it now
            await self.announcer.tools_changed(transformer.taught, state if transformer.announced else None)
        if failure is not None:
            if wrapped.started:
                held = transformer.release()  # nothing is lost: what waited goes out as it came
                if held:
                    await send({"type": "http.response.body", "body": held, "more_body": True})
                raise failure  # bytes already went out: break the response, as the upstream did
            ids = _ids(exchange.pending) if info is not None else []
            await _upstream_error(send, failure, ids)

    async def _run(self, scope: Scope, receive: Receive, send: TransformingSend) -> UpstreamError | None:
        """Run the inner app with ``send``; the upstream failure it raised, if any. A response the
        transformer refused (``send`` raised :class:`ResponseRefused`) is answered already."""
        try:
            await self.app(scope, receive, send)
        except UpstreamError as exc:
            return exc
        except ResponseRefused:
            if send.refused is None:
                raise  # (not this exchange's)
        return None

    def _sharing(self, state: ScopeState, send: Send) -> Send:
        """``send`` that first writes what ``state`` learned to the shared backend (a task's tool
        before the client has the task's id; bounded by the backend's timeout)."""
        scopes = self.scopes

        async def sharing(message: Message) -> None:
            if message["type"] == "http.response.start" and not 200 <= message["status"] < 300 and state.changes:
                # The upstream refused the request (an unknown session's 404, a 401, a 400):
                # nothing of it is shared (a client minting scopes the upstream refuses fills no store).
                state.changes = Changes()
            if state.changes:
                await scopes.flush(state)
            await send(message)

        return sharing

    def _shared_id(self, headers: RawHeaders) -> str | None:
        """The scope's name in the shared backend (``None`` without one)."""
        if self.scopes.shared is None:
            return None
        return self.scopes.shared_id(
            self.upstream,
            header(headers, b"mcp-session-id"),
            header(headers, b"authorization"),
            header(headers, b"cookie"),
        )

    def _witness_of(self, headers: RawHeaders, era: str | None, state: ScopeState) -> Callable[[], str | None] | None:
        """What makes the request's witness when a result first needs it (:meth:`_witness`);
        ``None`` while learning is off."""
        return partial(self._witness, headers, era, state) if self.lessons.enabled else None

    def _witness(self, headers: RawHeaders, era: str | None, state: ScopeState) -> str | None:
        """Who the request comes from, as lessons count witnesses (``None`` while learning is off).
        Its session counts only where the upstream assigned it: in an era that has sessions
        (before 2026-07-28), one whose ``initialize`` response the proxy saw carry it (``state``,
        the session's scope, knows its client). A server without sessions ignores an
        ``Mcp-Session-Id``: one made up per request would make one anonymous client many."""
        if not self.lessons.enabled:
            return None
        assigned = era_of(era).sessions and state.client is not UNKNOWN
        session = header(headers, b"mcp-session-id") if assigned else None
        return self.lesson_store.witness(header(headers, b"authorization"), header(headers, b"cookie"), session)

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

    def _identify(self, scope: Scope, info: RequestInfo, state: ScopeState) -> ClientProfile:
        """The client of a POST (:mod:`mcp_normalizer.engine.client_id`): the ``clientInfo`` it
        carries (remembered for its connection and credentials), else what its session named,
        else what its connection or its credentials named before, else what its ``User-Agent``
        names reliably; :data:`UNKNOWN` when none of these names one."""
        if info.client_info is not None:
            client = profile_for(info.client_info)
            self.clients.remember(self._client_keys(scope), client)
            held = self._connection(scope)
            if held is not None and client is not UNKNOWN and client.name is not None:
                held[_CLIENT] = client  # (for as long as the connection lasts)
            return client
        if state.client is not UNKNOWN:
            return state.client
        held = self._connection(scope)
        found = held.get(_CLIENT) if held is not None else None
        if isinstance(found, ClientProfile):
            return found
        if self.clients:  # (no client has named itself yet: nothing to recall)
            found = self.clients.recall(self._client_keys(scope))
            if found is not UNKNOWN:
                return found
        return from_user_agent(header(scope["headers"], b"user-agent"))

    def _connection(self, scope: Scope) -> dict[str, object] | None:
        """What the proxy's listener keeps for the request's connection
        (:data:`~mcp_normalizer.types.CONNECTION`); ``None`` under another server, and behind a
        trusted proxy (whose connections carry many clients' requests)."""
        held = scope.get(CONNECTION)
        peer = scope.get("client")
        if not isinstance(held, dict) or (peer is not None and self.forwarding.trusts(peer[0])):
            return None
        return held

    def _client_keys(self, scope: Scope) -> tuple[str | None, str | None]:
        """The keys a client is remembered by: its connection under another server than the
        proxy's (none behind a trusted proxy, whose connections carry many clients' requests;
        none with the proxy's listener, whose connections keep their client themselves) and its
        credentials (none without any)."""
        headers: RawHeaders = scope["headers"]
        peer = scope.get("client")
        trusted = peer is not None and self.forwarding.trusts(peer[0])
        connection = None if trusted or CONNECTION in scope else connection_key(peer, scope.get("server"))
        auth, cookie = header(headers, b"authorization"), header(headers, b"cookie")
        credentials = credentials_key(scope_key(self.upstream, None, auth, cookie)) if auth or cookie else None
        return connection, credentials

    def _client_address(self, scope: Scope) -> str | None:
        """The address of the request's client (behind ``trusted_proxies``, the one they forwarded)."""
        peer = scope.get("client")
        return self.forwarding.client(scope["headers"], peer[0] if peer else None)

    def _naming_session(self, scope: Scope, client: ClientProfile, send: Send) -> Send:
        """``send`` that remembers ``client`` for the session the ``initialize`` response assigns
        (``Mcp-Session-Id``): the session's later requests do not name their client."""
        headers: RawHeaders = scope["headers"]
        writer = self._client_address(scope)

        async def naming(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 200:
                session = header(message.get("headers", []), b"mcp-session-id")
                if session is not None:
                    auth, cookie = header(headers, b"authorization"), header(headers, b"cookie")
                    state = self.scopes.state(scope_key(self.upstream, session, auth, cookie))
                    shared = self.scopes.shared_id(self.upstream, session, auth, cookie)
                    if shared is not None:
                        state.share(shared, writer)
                    state.name_client(client)
                    await self.scopes.flush(state)  # before the client has its session id
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


def _ids(pending: Mapping[IdKey, PendingRequest]) -> list[JSON]:
    return [value for _, value in pending]


async def _upstream_error(send: Send, error: UpstreamError, ids: list[JSON]) -> None:
    """The upstream broke off before anything was sent: a JSON-RPC error per watched request."""
    logger.warning("%s", error)
    await respond(send, error.status_code, error_body(ids[0] if len(ids) == 1 else ids, str(error)))
