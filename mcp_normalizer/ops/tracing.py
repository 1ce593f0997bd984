"""OpenTelemetry traces of the MCP requests the proxy serves (the ``[otel]`` extra).

Follows the OpenTelemetry semantic conventions for MCP (``docs/gen-ai/mcp.md`` of
open-telemetry/semantic-conventions-genai, status Development: "Server" span, "Context
propagation"). Nothing here runs, and nothing of OpenTelemetry is imported, unless tracing is on:
the middleware asks :func:`tracing_for` once, at construction, and gets ``None`` when the
``opentelemetry-api`` package is missing, no tracer provider is given and none is set globally,
or the provider is a no-op one (``OTEL_SDK_DISABLED=true``).

**Spans.** One span per JSON-RPC request of a POST body (a 2025-03-26 batch has several),
kind ``SERVER`` (the proxy serves the client's request; the upstream's own server span, if it makes
one, is its child), named ``{mcp.method.name} {target}``: the tool name for ``tools/call``, the
prompt name for ``prompts/get``, else ``{mcp.method.name}`` alone (a resource URI is not a
low-cardinality target; it goes in ``mcp.resource.uri``). Attributes::

    mcp.method.name            "tools/call"                  always
    jsonrpc.request.id         "3"                           the id, as a string
    gen_ai.operation.name      "execute_tool"                tools/call only
    gen_ai.tool.name           "get_weather"                 tools/call (the name the client called)
    gen_ai.prompt.name         "summarize"                   prompts/get
    mcp.resource.uri           "file:///a.txt"               resources/read, /subscribe, /unsubscribe
    mcp.protocol.version       "2025-11-25"                  when the exchange names its era
    mcp.session.id             SHA-256 of Mcp-Session-Id     legacy sessions (32 hex digits: the id
                                                             itself is a bearer handle of the session)
    network.transport          "tcp"
    network.protocol.name      "http"
    network.protocol.version   "1.1"
    client.address, .port      the TCP peer                  when the server knows it
    rpc.response.status_code   "-32602"                      a JSON-RPC error response
    error.type                 "-32602"                      the JSON-RPC error code, or
                               "tool_error"                  a tools/call result with isError: true, or
                               "502"                         an HTTP error status without a JSON-RPC error, or
                               "CancelledError"              the exception that broke the exchange

The span status is ``ERROR`` exactly when ``error.type`` is set (its description the JSON-RPC
error's ``message``). A span ends once its response has gone to the client (by its id, in the JSON
body or an SSE event), else when the response stream ends or breaks (a legacy response delivered
later on a ``GET`` stream, by resumption, is not waited for).

**Rewrites.** Each rewrite log line (:class:`~mcp_normalizer.engine.audit.AuditLog`) of a request is
also an event on its span, named ``mcp_normalizer.<event>`` (``rewrite``, ``unrepaired``,
``skipped``, ``fault``) with ``mcp_normalizer.rule``, ``.kind``, ``.action``, ``.applied``,
``.client`` and ``.pointers`` (a string array of JSON pointers): never a value.

**Propagation.** The span's parent is the context in the request's ``params._meta``
(``traceparent``, ``tracestate``, ``baggage``: SEP-414), else the one in the HTTP ``traceparent``
header (then linked), else the ambient one. The inner app (the upstream, through the forwarder)
gets the span's context with the configured propagators (``OTEL_PROPAGATORS``, by default W3C
trace context and baggage) in each request's ``params._meta`` and, for the first request of the
body, in the HTTP headers; ``content-length`` follows the new body.

**Configuration.** :func:`tracer_provider_from_env` builds the standalone proxy's provider from
the standard ``OTEL_*`` variables. A host mounting the middleware passes its own provider, or
sets the global one before it builds the middleware.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points, version
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
from msgspec import UNSET

from ..config import redact_url
from ..engine.audit import AuditLog, kind_of
from ..engine.normalize import Record
from ..errors import ConfigError, DecodeError
from ..types import JSON, Message, RawHeaders, Receive, Scope, Send
from ..wire.body import with_length
from ..wire.eras import UPSTREAM_ERA_KEY
from ..wire.jsoncodec import Raw, dumps, join_array, join_object, loads, split_object
from ..wire.jsonrpc import TOOLS_CALL, IdKey, RequestInfo, header, id_key, read_batch, read_envelope
from ..wire.sse import SSESplitter, parse_event

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer, TracerProvider

logger = logging.getLogger(__name__)

#: The instrumentation scope name of the proxy's spans.
TRACER_NAME = "mcp_normalizer"
#: The ``params._meta`` and header keys of trace context (W3C Trace Context and Baggage; SEP-414).
_CONTEXT_KEYS = ("traceparent", "tracestate", "baggage")
_PAIR = frozenset({b"traceparent", b"tracestate"})
_RESOURCE_METHODS = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe"})
#: The largest response body (or SSE event) read for the responses it carries; past it, spans
#: end with the stream.
_MAX_READ = 16 * 1024 * 1024


def tracing_for(provider: TracerProvider | None, *, owned: bool = False) -> Tracing | None:
    """The tracing of a middleware, or ``None`` when tracing is off (nothing to do per request).

    Args:
        provider: the tracer provider to use; ``None``: the global one, if one was set.
        owned: ``provider`` is the process's own, shut down with the app (see :class:`Tracing`).
    """
    if provider is None:
        try:
            from opentelemetry import trace
        except ImportError:  # no opentelemetry-api: no tracing
            return None
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            return None  # nobody set a provider (yet): spans would go nowhere
    from opentelemetry import trace

    tracer = provider.get_tracer(TRACER_NAME, version("mcp-normalizer"))
    if isinstance(tracer, trace.NoOpTracer):  # e.g. the SDK's provider under OTEL_SDK_DISABLED=true
        return None
    return Tracing(tracer, provider, owned)


def tracing_requested(environ: Mapping[str, str] | None = None) -> bool:
    """True when the ``OTEL_*`` variables ask the standalone proxy for traces:
    ``OTEL_TRACES_EXPORTER`` names an exporter other than ``none``, or an OTLP endpoint is set
    (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``); and
    ``OTEL_SDK_DISABLED`` is not ``true``."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporters:
        return exporters != "none"
    return bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def tracer_provider_from_env(environ: Mapping[str, str] | None = None) -> TracerProvider | None:
    """The standalone proxy's tracer provider, built from the standard ``OTEL_*`` variables, or
    ``None`` when they ask for no traces (:func:`tracing_requested`).

    The SDK reads the rest itself: ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (the
    resource; the service name defaults to ``mcp-normalizer`` here), ``OTEL_TRACES_SAMPLER``
    (``_ARG``), ``OTEL_BSP_*`` (the batch processor), ``OTEL_EXPORTER_OTLP_*`` (endpoint,
    headers, timeout, compression). ``OTEL_TRACES_EXPORTER`` is a comma-separated list:
    ``otlp`` (default; OTLP/HTTP protobuf, or gRPC when ``OTEL_EXPORTER_OTLP_PROTOCOL=grpc`` and
    its exporter package is installed), ``console``, or any exporter registered under the
    ``opentelemetry_traces_exporter`` entry point group.

    Raises:
        ConfigError: traces are asked for but the SDK is not installed (the ``[otel]`` extra), or
            an exporter is unknown.
    """
    env = os.environ if environ is None else environ
    if not tracing_requested(env):
        return None
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise ConfigError(
            "OTEL_* variables ask for traces, but the OpenTelemetry SDK is not installed: "
            "pip install 'mcp-normalizer[otel]'"
        ) from None
    names = [name.strip().lower() for name in env.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if name.strip()]
    exporters = [_exporter(name, env) for name in names if name != "none"]
    attributes = {} if env.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: "mcp-normalizer"}
    # Shut down by the lifespan, within SHUTDOWN_SECONDS (Tracing.flushing), never by the SDK's
    # exit hook: that one waits for every queued batch to fail against an unreachable collector.
    provider = TracerProvider(resource=Resource.create(attributes), shutdown_on_exit=False)
    for exporter in exporters:
        try:
            provider.add_span_processor(BatchSpanProcessor(exporter))
        except ValueError as exc:  # an OTEL_BSP_* variable out of range: one line at start
            raise ConfigError(f"OTEL_BSP_* variables: {exc}") from None
    return provider


def _exporter(name: str, env: Mapping[str, str]) -> SpanExporter:
    """The span exporter ``name`` of ``OTEL_TRACES_EXPORTER`` (entry point group ``opentelemetry_traces_exporter``)."""
    if name == "otlp":
        protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
        name = "otlp_proto_grpc" if protocol.strip().lower() == "grpc" else "otlp_proto_http"
    found = list(entry_points(group="opentelemetry_traces_exporter", name=name))
    if not found:
        raise ConfigError(f"OTEL_TRACES_EXPORTER: no span exporter {name!r} is installed")
    exporter: SpanExporter = found[0].load()()
    return exporter


#: The longest text a span takes from a message (a tool name, an id, a URI, an error message), in
#: characters: any client can send a megabyte tool name, and a span queued for export must stay small.
MAX_TEXT = 256


#: Pointers an event lists at most (a rewrite of a 50,000-item array names one per item).
_MAX_POINTERS = 64


def _cap(text: str) -> str:
    """``text``, cut to :data:`MAX_TEXT` characters (then ending in ``…``)."""
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


def session_digest(session: str) -> str:
    """What spans carry as ``mcp.session.id``: the first 32 hex digits of the SHA-256 of the
    ``Mcp-Session-Id`` value. One session gives one value on every replica, so its spans group, but
    a trace store never holds the id, which lets anyone who has it act in the session (2025-11-25
    ``basic/transports.mdx``, Session Management: "SHOULD be ... cryptographically secure")."""
    return hashlib.sha256(session.encode("utf-8", "surrogateescape")).hexdigest()[:32]


#: Seconds the spans still queued at shutdown get to reach the collector (then they are dropped).
SHUTDOWN_SECONDS = 5.0


class Tracing:
    """The spans of one middleware (:func:`tracing_for` makes it when tracing is on).

    Args:
        tracer: where spans start.
        provider: its provider (flushed at shutdown).
        owned: the provider is this process's own (:func:`tracer_provider_from_env`): it is shut
            down at shutdown, not only flushed.
    """

    def __init__(self, tracer: Tracer, provider: TracerProvider, owned: bool = False) -> None:
        self.tracer = tracer
        self.provider = provider
        self.owned = owned

    def flushing(self, receive: Receive) -> Receive:
        """The lifespan's ``receive``, exporting the spans still queued when the server shuts down
        (an SDK provider's ``force_flush``, or its ``shutdown`` when the proxy owns it; a worker
        process may never run its exit hooks), for :data:`SHUTDOWN_SECONDS` at most: a collector
        that is unreachable costs that, never a retry per queued batch (it was 44 s)."""
        close = getattr(self.provider, "shutdown" if self.owned else "force_flush", None)

        async def closing() -> Message:
            message = await receive()
            if message["type"] == "lifespan.shutdown" and close is not None:
                # A daemon thread: one still exporting when the bound is reached is left behind,
                # and the process exits all the same (anyio's worker threads would be waited for).
                worker = threading.Thread(target=close, name="mcp-normalizer-span-flush", daemon=True)
                worker.start()
                with anyio.move_on_after(SHUTDOWN_SECONDS):
                    while worker.is_alive():
                        await anyio.sleep(0.02)
            return message

        return closing

    def start(self, scope: Scope, body: bytes, info: RequestInfo) -> Trace:
        """Start a span for each request of a POST body (``info``: what
        :func:`~mcp_normalizer.wire.jsonrpc.inspect_request` found in ``body``)."""
        from opentelemetry import propagate, trace
        from opentelemetry.trace import Link, SpanKind

        headers: RawHeaders = scope["headers"]
        carrier = {key: value for key in _CONTEXT_KEYS if (value := header(headers, key.encode())) is not None}
        from_header = propagate.extract(carrier) if carrier else None
        header_span = trace.get_current_span(from_header).get_span_context() if from_header is not None else None
        if header_span is not None and not header_span.is_valid:
            from_header = header_span = None
        common: dict[str, str | int] = {"network.transport": "tcp", "network.protocol.name": "http"}
        if "http_version" in scope:
            common["network.protocol.version"] = scope["http_version"]
        if info.era:
            common["mcp.protocol.version"] = info.era
        session = header(headers, b"mcp-session-id")
        if session is not None:
            common["mcp.session.id"] = session_digest(session)
        client = scope.get("client")
        if client:
            common["client.address"], common["client.port"] = client[0], client[1]
        requests = _requests(body)
        spans: dict[IdKey, _Open] = {}
        for key, pending in info.pending.items():
            found = requests.get(key)
            target = _cap(found.name) if found is not None and found.name is not None else None
            attributes = dict(common)
            attributes["mcp.method.name"] = _cap(pending.method)
            attributes["jsonrpc.request.id"] = _cap(str(key[1]))
            if pending.method == TOOLS_CALL:
                attributes["gen_ai.operation.name"] = "execute_tool"
                if target is not None:
                    attributes["gen_ai.tool.name"] = target
            elif pending.method == "prompts/get" and target is not None:
                attributes["gen_ai.prompt.name"] = target
            else:
                target = None
            if pending.method in _RESOURCE_METHODS and found is not None and found.uri is not None:
                attributes["mcp.resource.uri"] = _cap(redact_url(found.uri))  # (a ?token= stays out)
            parent = from_header
            links = []
            if found is not None and found.carrier:
                from_meta = propagate.extract(found.carrier)
                if trace.get_current_span(from_meta).get_span_context().is_valid:
                    parent = from_meta
                    if header_span is not None:
                        links.append(Link(header_span))  # the HTTP request's context (a transport's)
            name = _cap(pending.method) if target is None else f"{_cap(pending.method)} {target}"
            span = self.tracer.start_span(
                name, context=parent, kind=SpanKind.SERVER, attributes=attributes, links=links
            )
            spans[key] = _Open(span, trace.set_span_in_context(span, parent), pending.method)
        bridged = scope.get(UPSTREAM_ERA_KEY)
        return Trace(spans, bridged if isinstance(bridged, list) else None)


@dataclass(frozen=True, slots=True)
class _Request:
    """What a span needs of one request that :class:`~mcp_normalizer.wire.jsonrpc.PendingRequest` lacks."""

    name: str | None  # params.name (a tool's, a prompt's)
    uri: str | None  # params.uri (a resource's)
    carrier: dict[str, str]  # the trace context keys of params._meta


def _requests(body: bytes) -> dict[IdKey, _Request]:
    """The requests of a POST body by id key (the first of a repeated id)."""
    found: dict[IdKey, _Request] = {}
    try:
        items = read_batch(body)
        for message in items if items is not None else [Raw(body)]:
            members = _object(message)
            key = id_key(loads(members["id"])) if members is not None and "id" in members else None
            if members is None or key is None or key in found:
                continue
            params = _object(members["params"]) if "params" in members else None
            params = params if params is not None else {}
            meta = _object(params["_meta"]) if "_meta" in params else None
            carrier = {
                k: v for k in _CONTEXT_KEYS if meta is not None and k in meta and isinstance(v := loads(meta[k]), str)
            }
            found[key] = _Request(_string(params, "name"), _string(params, "uri"), carrier)
    except DecodeError:
        pass  # the upstream answers what is not JSON
    return found


def _object(raw: Raw | bytes) -> dict[str, Raw] | None:
    """The members of ``raw`` when it is a JSON object (whitespace around it allowed), else ``None``."""
    if bytes(memoryview(raw)[:64]).lstrip(b" \t\r\n")[:1] not in (b"{", b""):
        return None
    return split_object(raw)


def _string(members: Mapping[str, Raw], name: str) -> str | None:
    value = loads(members[name]) if name in members else None
    return value if isinstance(value, str) else None


@dataclass(slots=True)
class _Open:
    """One request's span while its response is awaited."""

    span: Span
    context: Context  # the span's, with the baggage of its parent: what the upstream gets
    method: str


class Trace:
    """The spans of one POST exchange, by JSON-RPC id key; a context manager around the exchange
    (every span still open ends with it, with ``error.type`` when an exception broke it)."""

    def __init__(self, spans: dict[IdKey, _Open], upstream_eras: list[str] | None = None) -> None:
        self.spans = spans
        self._upstream_eras = upstream_eras
        self._first = next(iter(spans.values()), None)
        self._http_error: str | None = None

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.end_all(kind.__qualname__ if kind is not None else self._http_error)

    # -- to the upstream ----------------------------------------------------------------------

    def forward(self, scope: Scope, body: bytes) -> tuple[Scope, bytes]:
        """``scope`` and ``body`` as the inner app must get them: each request's span context in
        its ``params._meta``, the first request's in the HTTP headers, ``content-length`` set."""
        from opentelemetry import propagate

        carriers: dict[IdKey, dict[str, str]] = {}
        for key, opened in self.spans.items():
            carrier: dict[str, str] = {}
            propagate.inject(carrier, context=opened.context)
            carriers[key] = carrier
        new = _with_meta(body, carriers)
        if new is not None:
            body = new
        first = next(iter(carriers.values()), {})
        # traceparent and tracestate go as a pair (the span's); the client's baggage stays unless
        # the propagators write their own
        replaced = _PAIR | {key.encode() for key in first}
        headers = [(k, v) for k, v in scope["headers"] if k not in replaced]
        headers += [(k.encode(), v.encode("latin-1")) for k, v in first.items()]
        return {**scope, "headers": with_length(headers, len(body))}, body

    # -- from the upstream --------------------------------------------------------------------

    def audit(self, audit: AuditLog) -> AuditLog:
        """``audit``, also writing each record as an event on its request's span."""
        return audit.with_sink(self.event)

    def send(self, send: Send) -> Send:
        """``send``, ending each request's span once its response has gone to the client."""
        return _Responses(self, send)

    def event(self, record: Record, jsonrpc_id: JSON, client: str) -> None:
        """Add ``record`` (a rewrite log line) to the span of request ``jsonrpc_id``: rule, kind,
        action, pointers; never a value."""
        key = id_key(jsonrpc_id)
        opened = self.spans.get(key) if key is not None else None
        if opened is None and len(self.spans) == 1:
            opened = self._first  # a record of the exchange's one request that names no id
        if opened is None:
            return
        rewrite = record.rewrite
        opened.span.add_event(
            f"mcp_normalizer.{record.event}",
            {
                "mcp_normalizer.rule": rewrite.rule,
                "mcp_normalizer.kind": kind_of(rewrite.rule, record.event),
                "mcp_normalizer.action": _cap(rewrite.action),
                "mcp_normalizer.applied": record.applied,
                "mcp_normalizer.client": _cap(client),
                "mcp_normalizer.pointers": [_cap(p) for p in rewrite.pointers[:_MAX_POINTERS]],
            },
        )

    def answered(self, key: IdKey | None, error: JSON, tool_error: bool) -> None:
        """The response to ``key`` is out: end its span (``error``: the JSON-RPC error, if any)."""
        opened = self.spans.pop(key, None) if key is not None else None
        if opened is None:
            return
        from opentelemetry.trace import StatusCode

        span = opened.span
        if isinstance(error, dict):
            code = _cap(str(error.get("code")))
            message = error.get("message")
            span.set_attributes({"error.type": code, "rpc.response.status_code": code})
            span.set_status(StatusCode.ERROR, _cap(message) if isinstance(message, str) else None)
        elif tool_error and opened.method == TOOLS_CALL:
            span.set_attribute("error.type", "tool_error")
            span.set_status(StatusCode.ERROR)
        self._bridged(span)
        span.end()

    def _bridged(self, span: Any) -> None:
        if self._upstream_eras:  # the era bridge spoke another era upstream
            span.set_attribute("mcp.upstream.protocol.version", self._upstream_eras[-1])

    def http_status(self, status: int) -> None:
        """The response's HTTP status: an error one is the ``error.type`` of requests left unanswered."""
        self._http_error = str(status) if status >= 400 else None

    def finished(self) -> None:
        """The response is complete: what it did not answer ends (with the HTTP error, if any)."""
        self.end_all(self._http_error)

    def end_all(self, error_type: str | None = None) -> None:
        """End every span still open (``error_type``: why they had no response)."""
        from opentelemetry.trace import StatusCode

        spans, self.spans = self.spans, {}
        for opened in spans.values():
            if error_type is not None:
                opened.span.set_attribute("error.type", error_type)
                opened.span.set_status(StatusCode.ERROR)
            self._bridged(opened.span)
            opened.span.end()


def _with_meta(body: bytes, carriers: Mapping[IdKey, Mapping[str, str]]) -> bytes | None:
    """``body`` with each request's ``params._meta`` holding its carrier's keys (every other byte
    copied as it came); ``None`` when it cannot be rewritten so (it then goes as it came): also
    when the body repeats a member name, which re-writing the objects would collapse into one
    (the upstream reads duplicates its own way; the proxy never changes which one counts)."""
    if _repeats_a_name(body):
        return None
    try:
        items = read_batch(body)
        messages = items if items is not None else [Raw(body)]
        out: list[Raw] = []
        changed = False
        for message in messages:
            members = _object(message)
            key = id_key(loads(members["id"])) if members is not None and "id" in members else None
            carrier = carriers.get(key) if key is not None else None
            params = members.get("params") if members is not None else None
            if members is None or not carrier or (params is not None and _object(params) is None):
                out.append(message)  # not a request with a span, or params not an object
                continue
            params_members = _object(params) if params is not None else {}
            assert params_members is not None
            meta = params_members.get("_meta")
            meta_members = _object(meta) if meta is not None else {}
            if meta_members is None:
                out.append(message)  # a _meta that is not an object: not the proxy's to fix here
                continue
            meta_members.update({name: Raw(dumps(value)) for name, value in carrier.items()})
            params_members["_meta"] = Raw(join_object(meta_members))
            members["params"] = Raw(join_object(params_members))
            out.append(Raw(join_object(members)))
            changed = True
        if not changed:
            return None
        return join_array(out) if items is not None else bytes(out[0])
    except DecodeError:
        return None


def _repeats_a_name(body: bytes) -> bool:
    """True when an object anywhere in the JSON ``body`` names a member twice (or ``body`` is not JSON)."""

    def pairs(items: list[tuple[str, object]]) -> dict[str, object]:
        names = [name for name, _ in items]
        if len(set(names)) != len(names):
            raise _Repeated
        return dict(items)

    try:
        json.loads(body, object_pairs_hook=pairs)
    except (_Repeated, ValueError, RecursionError):
        return True
    return False


class _Repeated(Exception):
    """Internal: an object repeats a member name."""


class _Responses:
    """The client's ``send`` for a traced exchange: reads the responses that go out (JSON body or
    SSE events, envelopes only) and ends each request's span after its response has been sent."""

    __slots__ = ("_parts", "_send", "_size", "_splitter", "_sse", "_trace")

    def __init__(self, trace: Trace, send: Send) -> None:
        self._trace = trace
        self._send = send
        self._sse: bool | None = None  # None: neither JSON nor SSE, or too large to read
        self._splitter = SSESplitter(max_pending=_MAX_READ)
        self._parts: list[bytes] = []
        self._size = 0

    async def __call__(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            status = message["status"]
            self._trace.http_status(status)
            content_type = (header(list(message.get("headers", [])), b"content-type") or "").lower()
            if content_type.startswith("text/event-stream"):
                self._sse = True
            elif content_type.startswith("application/json"):
                self._sse = False
            await self._send(message)
            return
        if kind != "http.response.body":
            await self._send(message)
            return
        chunk: bytes = message.get("body", b"")
        final = not message.get("more_body", False)
        done = self._read(chunk, final)
        await self._send(message)
        for key, error, tool_error in done:
            self._trace.answered(key, error, tool_error)
        if final:
            self._trace.finished()

    def _read(self, chunk: bytes, final: bool) -> list[tuple[IdKey | None, JSON, bool]]:
        """The responses that ``chunk`` completes: (id key, JSON-RPC error or ``None``, isError)."""
        if self._sse is None or not self._trace.spans:
            return []
        if self._sse:
            found = []
            for block in self._splitter.feed(chunk):
                data = parse_event(block).data
                if data:
                    found += _responses(data)
            if self._splitter.overflowed:
                self._sse = None
            return found
        self._parts.append(chunk)
        self._size += len(chunk)
        if self._size > _MAX_READ:
            self._sse, self._parts = None, []
            return []
        if not final:
            return []
        data, self._parts = b"".join(self._parts), []
        return _responses(data)


def _responses(data: bytes) -> list[tuple[IdKey | None, JSON, bool]]:
    """The responses in one JSON body or SSE event's data (a message or a batch)."""
    try:
        items = read_batch(data)
        found = []
        for raw in items if items is not None else [data]:
            envelope = read_envelope(raw)
            if not envelope.response:
                continue
            error = loads(envelope.error) if envelope.error is not UNSET else None
            result = envelope.result
            tool_error = (
                isinstance(result, dict) and "isError" in result and bytes(result["isError"]).strip() == b"true"
            )
            found.append((id_key(envelope.id), error, tool_error))
        return found
    except DecodeError:
        return []
