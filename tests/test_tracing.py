"""OpenTelemetry traces on the wire (:mod:`mcp_normalizer.ops.tracing`, the ``[otel]`` extra).

A real upstream on loopback (the demo's legacy server) behind the proxy (``create_app`` under
uvicorn) with an SDK tracer provider and the SDK's in-memory exporter; real MCP clients (the
Python ``mcp`` client, the TS SDK 1.x) and raw HTTP for what clients do not send (a client's own
trace context, batches). The upstream records every request as it arrived, so the propagated
context is checked where it lands. The last tests run the proxy as the CLI does, with ``OTEL_*``
variables pointing an OTLP/HTTP exporter at a small collector of ``/v1/traces`` in the test.
"""

from __future__ import annotations

import http.server
import json
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from mcp_normalizer import NormalizerMiddleware, Settings, create_app
from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.demo.upstream import FORBIDDEN, protean_server
from mcp_normalizer.ops.tracing import session_digest, tracer_provider_from_env, tracing_requested
from mcp_normalizer.types import ASGIApp, Receive, Scope, Send

from .support import (
    EXE,
    ResponseMode,
    free_port,
    protean_rules,
    read_body,
    replay_body,
    run_cli,
    running,
    sdk_app,
    serve,
)

pytestmark = pytest.mark.wire

STEPS: list[dict[str, Any]] = [
    {"op": "listTools"},
    {"op": "callTool", "name": "protean.scope_list"},
    {"op": "callTool", "name": "protean.list_runtimes"},
    {"op": "callTool", "name": "protean.whoami"},
]
#: A client's own trace context (W3C example values).
CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_PARENT = f"00-{CLIENT_TRACE}-00f067aa0ba902b7-01"
HEADER_TRACE = "0af7651916cd43dd8448eb211c80319c"
HEADER_PARENT = f"00-{HEADER_TRACE}-b7ad6b7169203331-01"
JSON_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@dataclass
class Recorded:
    """What the upstream received: each POST's headers (lower-case names) and body, as they came."""

    posts: list[tuple[dict[str, str], bytes]] = field(default_factory=list)

    def messages(self) -> list[tuple[dict[str, Any], dict[str, str]]]:
        """Every JSON-RPC message of every POST, with its POST's headers."""
        out = []
        for headers, body in self.posts:
            decoded = json.loads(body)
            out += [(message, headers) for message in (decoded if isinstance(decoded, list) else [decoded])]
        return out

    def request(self, method: str, jsonrpc_id: str) -> tuple[dict[str, Any], dict[str, str]]:
        """The request ``method`` whose id reads ``jsonrpc_id``, and its POST's headers."""
        found = [(m, h) for m, h in self.messages() if m.get("method") == method and str(m.get("id")) == jsonrpc_id]
        assert len(found) == 1, (method, jsonrpc_id, found)
        return found[0]


def recording(app: ASGIApp, recorded: Recorded) -> ASGIApp:
    """``app``, recording every POST's headers and body before it sees them."""

    async def record(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body = await read_body(receive)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        recorded.posts.append((headers, body))
        await app(scope, replay_body(body, receive), send)

    return record


@contextmanager
def traced(mode: ResponseMode = "sse", *, tracing: bool = True) -> Iterator[tuple[str, Recorded, InMemorySpanExporter]]:
    """The demo upstream (recorded) behind the proxy with an SDK provider exporting to memory
    (``tracing=False``: no provider, as without the extra); yield the proxy's MCP URL, the
    record and the exporter."""
    recorded = Recorded()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with serve(recording(protean_server(mode), recorded)) as up:
        settings = Settings(upstream=up + "/mcp")
        config = settings.load_config()
        app = create_app(settings, config=config, tracer_provider=provider if tracing else None)
        with serve(app, proxy=config.proxy) as px:
            yield px + "/mcp", recorded, exporter
    provider.shutdown()


def by_name(spans: Sequence[ReadableSpan]) -> dict[str, ReadableSpan]:
    names = [span.name for span in spans]
    assert len(set(names)) == len(names), names
    return {span.name: span for span in spans}


def traceparent(span: ReadableSpan) -> str:
    """The W3C ``traceparent`` of ``span``."""
    context = span.get_span_context()
    assert context is not None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


@pytest.mark.anyio
@pytest.mark.parametrize(("client", "mode"), [("python", "sse"), ("ts-sdk-1", "json")])
async def test_each_mcp_request_is_a_server_span_with_the_conventions_names_and_attributes(
    client: str, mode: ResponseMode
) -> None:
    with traced(mode) as (url, recorded, exporter):
        if client == "python":
            record = await run_python(url, STEPS)
        else:
            record = (await run_node("v1", [{"url": url, "steps": STEPS}]))[0]
    assert all(step["ok"] for step in record["steps"]), record
    spans = by_name(exporter.get_finished_spans())
    names = {"initialize", "tools/list", *(f"tools/call {step['name']}" for step in STEPS[1:])}
    assert names <= set(spans), sorted(spans)
    session = None
    for name in sorted(names):
        span = spans[name]
        found = attributes(span)
        method = name.split(" ")[0]
        assert span.kind is SpanKind.SERVER, name
        assert span.instrumentation_scope is not None and span.instrumentation_scope.name == "mcp_normalizer"
        assert found["mcp.method.name"] == method
        assert found["network.transport"] == "tcp" and found["network.protocol.name"] == "http"
        assert found["network.protocol.version"] == "1.1" and found["client.address"] == "127.0.0.1"
        message, headers = recorded.request(method, found["jsonrpc.request.id"])
        # The upstream got the span's context in the request's params._meta and in the headers.
        assert message["params"]["_meta"]["traceparent"] == traceparent(span), name
        assert headers["traceparent"] == traceparent(span), name
        assert span.parent is None  # the clients send no context of their own: the span is a root
        if method == "tools/call":
            assert found["gen_ai.operation.name"] == "execute_tool"
            assert found["gen_ai.tool.name"] == message["params"]["name"] == name.split(" ")[1]
            assert found["mcp.protocol.version"] == "2025-11-25"
        else:
            assert "gen_ai.operation.name" not in found and "gen_ai.tool.name" not in found
        if method == "initialize":
            assert "mcp.session.id" not in found  # the response assigns it
        else:
            assert found["mcp.session.id"] == session_digest(headers["mcp-session-id"])
            assert headers["mcp-session-id"] not in repr(span.to_json())  # the id itself is in no span
            session = session or found["mcp.session.id"]
            assert found["mcp.session.id"] == session  # one session throughout
    # isError: true is a failed tool call (error.type tool_error, status ERROR, no description).
    failed = spans["tools/call protean.scope_list"]
    assert attributes(failed)["error.type"] == "tool_error" and "rpc.response.status_code" not in attributes(failed)
    assert failed.status.status_code is StatusCode.ERROR and not failed.status.description
    for name in names - {failed.name}:
        assert "error.type" not in attributes(spans[name]) and spans[name].status.status_code is StatusCode.UNSET

    # Each rewrite is an event on its request's span: rule, kind, action, pointers, no value.
    events: dict[str, list[tuple[str, dict[str, Any]]]] = {
        name: [(e.name, dict(e.attributes or {})) for e in spans[name].events] for name in names
    }
    problem = [a for n, a in events[failed.name] if a["mcp_normalizer.rule"] == "error_problem"]
    assert len(problem) == 1 and problem[0]["mcp_normalizer.applied"] is True
    assert problem[0]["mcp_normalizer.kind"] == "error_result_validated"
    assert "/structuredContent" in problem[0]["mcp_normalizer.pointers"]
    dropped = events["tools/call protean.whoami"]
    assert [(n, a["mcp_normalizer.rule"], a["mcp_normalizer.pointers"]) for n, a in dropped] == [
        ("mcp_normalizer.rewrite", "empty_structured_content", ("/structuredContent",))
    ]
    listed = [a for _, a in events["tools/list"] if a["mcp_normalizer.rule"] == "nullable"]
    assert [a["mcp_normalizer.pointers"] for a in listed] == [("/runtimes/*/scope",)]  # the schema advertised
    assert events["tools/call protean.list_runtimes"] == []  # (its result meets the advertised schema)
    values = [FORBIDDEN["detail"], FORBIDDEN["code"], "team-a", "python3.11", "node22", "scopes:read"]
    for span in spans.values():
        text = span.to_json()
        assert not [value for value in values if str(value) in text], span.name


@pytest.mark.anyio
async def test_a_client_trace_context_in_meta_or_the_header_is_joined() -> None:
    with traced("json") as (url, recorded, exporter):
        async with httpx.AsyncClient(headers=JSON_HEADERS) as http:
            init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            answer = await http.post(
                url,
                json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
                headers={"traceparent": HEADER_PARENT},
            )
            session = {"mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
            meta = {"traceparent": CLIENT_PARENT, "tracestate": "rojo=00f067aa0ba902b7", "progressToken": "p1"}
            call = {"name": "protean.whoami", "arguments": {}, "_meta": meta}
            await http.post(
                url,
                json={"jsonrpc": "2.0", "id": "c-2", "method": "tools/call", "params": call},
                headers={**session, "traceparent": HEADER_PARENT},
            )
    spans = by_name(exporter.get_finished_spans())
    init_span, call_span = spans["initialize"], spans["tools/call protean.whoami"]
    # The header's context is the parent of a request without its own.
    assert init_span.parent is not None and init_span.parent.is_remote
    assert f"{init_span.parent.trace_id:032x}" == HEADER_TRACE and init_span.parent.span_id == 0xB7AD6B7169203331
    # params._meta's context wins over the header's, which is then a link.
    assert call_span.parent is not None and f"{call_span.parent.trace_id:032x}" == CLIENT_TRACE
    assert call_span.parent.span_id == 0x00F067AA0BA902B7
    assert [f"{link.context.trace_id:032x}" for link in call_span.links] == [HEADER_TRACE]
    message, headers = recorded.request("tools/call", "c-2")
    # The upstream gets the proxy's span as its parent, in the client's trace (with its tracestate);
    # the other _meta members are kept.
    assert message["params"]["_meta"]["traceparent"] == traceparent(call_span) == headers["traceparent"]
    assert traceparent(call_span).split("-")[1] == CLIENT_TRACE
    assert message["params"]["_meta"]["tracestate"] == "rojo=00f067aa0ba902b7" == headers["tracestate"]
    assert message["params"]["_meta"]["progressToken"] == "p1"
    assert message["params"]["name"] == "protean.whoami" and message["params"]["arguments"] == {}


@pytest.mark.anyio
async def test_what_a_client_sends_is_cut_short_in_spans_and_whitespace_around_a_request_is_read() -> None:
    """A 2 MB tool name and a 10 KB id (any client can send them) reach the span cut to 256
    characters, so a queue of spans waiting for a slow collector stays small; the response is the
    upstream's all the same. A body with whitespace around its object still joins its trace."""
    huge = "t" * 2**21
    with traced("json") as (url, recorded, exporter):
        async with httpx.AsyncClient(headers=JSON_HEADERS) as http:
            init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            answer = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
            session = {"mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
            long_id = "i" * 10_000
            big = {"jsonrpc": "2.0", "id": long_id, "method": "tools/call", "params": {"name": huge}}
            refused = await http.post(url, json=big, headers=session)
            call = {"name": "protean.whoami", "_meta": {"traceparent": CLIENT_PARENT}}
            spaced = b" \n\t" + json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}).encode()
            joined = await http.post(url, content=spaced + b"\r\n", headers=session)
    assert refused.json()["id"] == long_id and "error" in refused.json()  # answered, as the upstream does
    assert joined.json()["id"] == 3
    spans = exporter.get_finished_spans()
    cut = next(span for span in spans if span.name.startswith("tools/call t"))
    assert cut.name == "tools/call " + "t" * 256 + "…"
    assert attributes(cut)["gen_ai.tool.name"] == "t" * 256 + "…"
    assert attributes(cut)["jsonrpc.request.id"] == "i" * 256 + "…"
    assert all(len(str(value)) <= 300 for span in spans for value in attributes(span).values())
    whoami = next(span for span in spans if span.name == "tools/call protean.whoami")
    assert whoami.parent is not None and f"{whoami.parent.trace_id:032x}" == CLIENT_TRACE


@pytest.mark.anyio
async def test_a_jsonrpc_error_and_a_batch_each_get_their_spans() -> None:
    """2025-03-26 batch: one span per request (a notification has none), each with its own
    context in its ``_meta``; the header carries the first's. A JSON-RPC error response sets
    ``error.type`` and ``rpc.response.status_code`` to its code, the status to its message."""
    with traced("json") as (url, recorded, exporter):
        async with httpx.AsyncClient(headers=JSON_HEADERS) as http:
            init = {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            answer = await http.post(url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
            session = {"mcp-session-id": answer.headers["mcp-session-id"]}
            batch = [
                {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "protean.whoami"}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "no.such.tool"}},
                {"jsonrpc": "2.0", "id": "3", "method": "ping"},
            ]
            answered = await http.post(url, json=batch, headers=session)
    assert answered.status_code == 200 and len(answered.json()) == 3
    spans = by_name(exporter.get_finished_spans())
    assert set(spans) == {"initialize", "tools/call protean.whoami", "tools/call no.such.tool", "ping"}
    unknown = spans["tools/call no.such.tool"]
    assert attributes(unknown)["error.type"] == "-32602" == attributes(unknown)["rpc.response.status_code"]
    assert unknown.status.status_code is StatusCode.ERROR
    assert unknown.status.description == "Unknown tool: no.such.tool"  # JSONRPCError.message (the conventions)
    assert attributes(spans["ping"])["jsonrpc.request.id"] == "3" and "error.type" not in attributes(spans["ping"])
    assert attributes(spans["tools/call protean.whoami"])["jsonrpc.request.id"] == "1"
    # (the proxy's own tools/list fetch, for the unseen tools, is another POST)
    headers, body = next((h, b) for h, b in recorded.posts if b.startswith(b"["))
    sent = json.loads(body)
    assert [m.get("id") for m in sent] == [1, None, 2, "3"]
    assert "params" not in sent[1]  # a notification is not touched
    assert sent[0]["params"]["_meta"]["traceparent"] == traceparent(spans["tools/call protean.whoami"])
    assert sent[2]["params"]["_meta"]["traceparent"] == traceparent(unknown)
    assert sent[3]["params"] == {"_meta": {"traceparent": traceparent(spans["ping"])}}
    assert headers["traceparent"] == traceparent(spans["tools/call protean.whoami"])
    assert int(headers["content-length"]) == len(body)
    # One trace per request: the batch's requests are not each other's parents.
    assert len({traceparent(span).split("-")[1] for span in spans.values()}) == 4


@pytest.mark.anyio
async def test_without_tracing_the_upstream_gets_every_request_byte_identical() -> None:
    bodies = [
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
        b'"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}',
        b'{ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "protean.whoami",'
        b' "_meta": {"traceparent": "' + CLIENT_PARENT.encode() + b'"}} }',
        b'[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","id":4,"method":"tools/list"}]',
    ]
    with traced("json", tracing=False) as (url, recorded, exporter):
        async with httpx.AsyncClient(headers=JSON_HEADERS) as http:
            first = await http.post(url, content=bodies[0], headers={"traceparent": HEADER_PARENT})
            session = {"mcp-session-id": first.headers["mcp-session-id"], "traceparent": HEADER_PARENT}
            for body in bodies[1:]:
                assert (await http.post(url, content=body, headers=session)).status_code == 200
    clients = [(h, b) for h, b in recorded.posts if b"mcp-normalizer-tools-list" not in b]  # not the proxy's fetch
    assert [body for _, body in clients] == bodies
    assert [headers["traceparent"] for headers, _ in clients] == [HEADER_PARENT] * 3
    assert exporter.get_finished_spans() == ()


def test_the_otel_variables_decide_whether_the_proxy_traces() -> None:
    assert not tracing_requested({})
    assert tracer_provider_from_env({}) is None
    assert tracing_requested({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert tracing_requested({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"})
    assert tracing_requested({"OTEL_TRACES_EXPORTER": "console"})
    assert not tracing_requested({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"})
    assert not tracing_requested({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"})
    provider = tracer_provider_from_env({"OTEL_TRACES_EXPORTER": "console"})
    assert isinstance(provider, TracerProvider)
    provider.shutdown()


def test_an_unknown_exporter_is_one_line_and_exit_2() -> None:
    port = free_port()
    done = run_cli(
        "--upstream", "http://127.0.0.1:9/mcp", "--port", str(port), env={"OTEL_TRACES_EXPORTER": "zipkin_json"}
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "mcp-normalizer: error: OTEL_TRACES_EXPORTER: no span exporter 'zipkin_json' is installed"
    ]


class _Collector(http.server.ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver: keeps the body of every ``POST /v1/traces``."""

    daemon_threads = True

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.paths: list[str] = []
        self.types: list[str] = []
        super().__init__(("127.0.0.1", 0), _CollectorHandler)


class _CollectorHandler(http.server.BaseHTTPRequestHandler):
    server: _Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        self.server.paths.append(self.path)
        self.server.types.append(self.headers.get("content-type", ""))
        self.server.bodies.append(body)
        answer = ExportTraceServiceRequest().SerializeToString()  # an empty ExportTraceServiceResponse
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.anyio
async def test_traces_reach_a_collector_over_otlp_http_from_the_cli() -> None:
    """``mcp-normalizer`` with the standard variables: the spans arrive at the collector (at the
    latest when the proxy stops: SIGTERM flushes them), with the conventions' names."""
    collector = _Collector()
    thread = threading.Thread(target=collector.serve_forever, daemon=True)
    thread.start()
    try:
        with serve(protean_server("sse")) as up:
            port = free_port()
            env = {
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.server_address[1]}",
                "OTEL_SERVICE_NAME": "normalizer-under-test",
            }
            argv = [EXE, "--upstream", up + "/mcp", "--port", str(port)]
            with running(argv, port, env=env):
                record = await run_python(f"http://127.0.0.1:{port}/mcp", STEPS)
    finally:
        collector.shutdown()
        collector.server_close()
    assert all(step["ok"] for step in record["steps"]), record
    assert collector.paths and set(collector.paths) == {"/v1/traces"}
    assert set(collector.types) == {"application/x-protobuf"}
    spans: dict[str, Any] = {}
    services = set()
    for body in collector.bodies:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            for attribute in resource_spans.resource.attributes:
                if attribute.key == "service.name":
                    services.add(attribute.value.string_value)
            for scope_spans in resource_spans.scope_spans:
                assert scope_spans.scope.name == "mcp_normalizer"
                for span in scope_spans.spans:
                    spans[span.name] = span
    assert services == {"normalizer-under-test"}
    names = {"initialize", "tools/list", *(f"tools/call {step['name']}" for step in STEPS[1:])}
    assert names <= set(spans), sorted(spans)
    call = spans["tools/call protean.scope_list"]
    assert call.kind == 2  # SPAN_KIND_SERVER (opentelemetry/proto/trace/v1/trace.proto)
    found = {a.key: a.value.string_value for a in call.attributes}
    assert found["mcp.method.name"] == "tools/call" and found["gen_ai.tool.name"] == "protean.scope_list"
    assert found["error.type"] == "tool_error"
    assert [event.name for event in call.events] == ["mcp_normalizer.rewrite"] * len(call.events) and call.events


def test_tracing_is_off_in_a_process_without_otel_variables() -> None:
    """The suite itself runs without ``OTEL_*`` (else every proxy here would trace)."""
    assert not tracing_requested(os.environ)


@pytest.mark.anyio
async def test_the_middleware_around_the_sdk_app_traces_with_the_provider_it_is_given() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with serve(NormalizerMiddleware(sdk_app(False), protean_rules(), tracer_provider=provider), lifespan="on") as base:
        record = await run_python(base + "/mcp", STEPS[:3])
    provider.shutdown()
    assert all(step["ok"] for step in record["steps"]), record
    spans = by_name(exporter.get_finished_spans())
    assert {"initialize", "tools/list", "tools/call protean.scope_list", "tools/call protean.list_runtimes"} <= set(
        spans
    )
    failed = spans["tools/call protean.scope_list"]
    assert failed.kind is SpanKind.SERVER and attributes(failed)["error.type"] == "tool_error"
    assert [dict(e.attributes or {})["mcp_normalizer.rule"] for e in failed.events] == ["error_problem"]
    assert NormalizerMiddleware(sdk_app(False)).tracing is None  # no provider given, none set globally


# -- issue 22, minors of the attack on tracing -------------------------------------------------


@pytest.mark.anyio
async def test_with_tracing_on_repeated_names_and_the_clients_baggage_reach_the_upstream_as_sent() -> None:
    """Adding trace context to ``params._meta`` must not re-write the objects of a body that repeats
    a member name (that collapsed the duplicates: the upstream would read another value); such a
    body goes as it came, its context in the headers only. The client's ``baggage`` header stays."""
    with traced("json") as (url, recorded, _):
        async with httpx.AsyncClient(headers=JSON_HEADERS) as http:
            init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            answer = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
            session = {"mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
            twice = (
                b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"protean.scope_list",'
                b'"name":"protean.whoami","arguments":{"n":12.50,"s":"caf\\u00e9"}}}'
            )
            await http.post(url, content=twice, headers={**session, "baggage": "tenant=t-1,region=eu"})
            joined = {"name": "protean.whoami", "_meta": {"traceparent": CLIENT_PARENT}}  # its context in _meta
            call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": joined}
            await http.post(url, json=call, headers={**session, "baggage": "tenant=t-2"})
    headers, body = next((h, b) for h, b in recorded.posts if b"arguments" in b)
    assert body == twice
    assert headers["baggage"] == "tenant=t-1,region=eu" and headers["traceparent"]
    message, headers = recorded.request("tools/call", "3")
    assert headers["baggage"] == "tenant=t-2" and CLIENT_TRACE in message["params"]["_meta"]["traceparent"]


@pytest.mark.anyio
async def test_a_resource_uri_reaches_spans_without_its_query_values() -> None:
    with traced("json") as (url, _, exporter):
        async with httpx.AsyncClient(headers=JSON_HEADERS) as http:
            read = {"uri": "https://files.example/r?token=s3cret-t0ken&v=2"}
            await http.post(url, json={"jsonrpc": "2.0", "id": 9, "method": "resources/read", "params": read})
    span = next(span for span in exporter.get_finished_spans() if span.name == "resources/read")
    assert attributes(span)["mcp.resource.uri"] == "https://files.example/r?token=***&v=***"
    assert not any("s3cret" in str(value) for s in exporter.get_finished_spans() for value in attributes(s).values())


def test_an_otel_batch_setting_out_of_range_is_one_line_and_exit_2() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_BSP_MAX_QUEUE_SIZE": "-5"}
    done = run_cli("--upstream", "http://127.0.0.1:9/mcp", "--port", str(free_port()), env=env)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "OTEL_BSP_" in done.stderr


@pytest.mark.anyio
async def test_an_unreachable_collector_delays_shutdown_by_a_bounded_time_and_its_lines_are_json() -> None:
    """Many queued batches for a collector that refuses connections: the proxy used to retry each
    at exit (44 s with a 10 s grace). It stops within the shutdown bound, and what OpenTelemetry
    logs meanwhile is JSON lines like every other."""
    with serve(protean_server("json")) as up:
        port = free_port()
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",  # nothing listens: refused
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1",
            "OTEL_BSP_SCHEDULE_DELAY": "60000",
        }
        argv = [EXE, "--upstream", up + "/mcp", "--port", str(port)]
        started = threading.Event()
        with running(argv, port, env=env) as log:
            async with httpx.AsyncClient(headers=JSON_HEADERS, timeout=30) as http:
                for n in range(20):  # twenty batches of one span each, queued
                    await http.post(f"http://127.0.0.1:{port}/mcp", json={"jsonrpc": "2.0", "id": n, "method": "ping"})
            started.set()
        # (running() waits 20 s at most for the process to end after SIGTERM: it did, or it raised)
    assert started.is_set()
    assert log and all(line.startswith("{") and json.loads(line) for line in log), log[:5]
