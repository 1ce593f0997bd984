"""Test plumbing: real servers on loopback, the public fault cases, log capture, small JSON helpers."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from io import BufferedIOBase
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import anyio
import httpx
import jsonschema
import mcp_types as types
import orjson
import pytest
import referencing
import uvicorn
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from mcp.server.lowlevel import Server

from mcp_normalizer import NormalizerConfig, Settings, create_app
from mcp_normalizer.config import ProxyConfig
from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.demo.upstream import FORBIDDEN, RUNTIMES, ScriptedServer, ToolSpec, protean_tools, returning
from mcp_normalizer.engine.audit import REWRITE_LOGGER, AuditLog
from mcp_normalizer.engine.exchange import Exchange
from mcp_normalizer.engine.normalize import Normalizer
from mcp_normalizer.engine.rules import Mode
from mcp_normalizer.engine.scopes import ScopeStore
from mcp_normalizer.engine.transform import ResponseTransformer
from mcp_normalizer.hop.server import HttpParser, bind, uvicorn_config
from mcp_normalizer.types import ASGIApp, Message, Receive, Scope, Send
from mcp_normalizer.wire.jsonrpc import inspect_request

ROOT = Path(__file__).resolve().parents[1]
#: The team's shared folder (fault cases, conformance tools): ``../shared`` next to the checkout.
SHARED = Path(os.environ.get("MCP_NORMALIZER_SHARED", ROOT.parent / "shared"))
CASES_FILE = SHARED / "cases" / "public.json"


def protean_rules() -> NormalizerConfig:
    """What the demo and a user with no rule file run: the shipped defaults (the interventions
    table declares the Protean ``list_runtimes`` scope nullable, :mod:`mcp_normalizer.engine.interventions`)."""
    return NormalizerConfig.shipped()


#: How a test upstream answers: ``text/event-stream`` or ``application/json``.
ResponseMode = Literal["sse", "json"]


def need_shared(*parts: str) -> Path:
    """The path ``SHARED/parts``; skips the test when the shared folder is not there, unless
    ``MCP_NORMALIZER_REQUIRE_SHARED=1`` (set by ``.ci/run``) makes that a failure."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        if os.environ.get("MCP_NORMALIZER_REQUIRE_SHARED") == "1":
            raise FileNotFoundError(f"{path} is required (MCP_NORMALIZER_REQUIRE_SHARED=1)")
        pytest.skip(f"needs {path}: the team's shared folder next to the checkout (or set MCP_NORMALIZER_SHARED)")
    return path


@contextmanager
def serve(
    app: ASGIApp, *, lifespan: Literal["auto", "on", "off"] = "auto", proxy: ProxyConfig | None = None, port: int = 0
) -> Iterator[str]:
    """Run ``app`` under uvicorn on a free loopback port in a thread; yield ``http://127.0.0.1:PORT``.

    With ``proxy``, uvicorn runs as the proxy's command does (:func:`mcp_normalizer.hop.server.uvicorn_config`:
    httptools with the connection guards, uvloop); without, as uvicorn's defaults (a test upstream).
    """
    sock = bind("127.0.0.1", port)
    port = sock.getsockname()[1]
    if proxy is not None:
        config = uvicorn_config(app, proxy, log_level="warning", parser=cast(HttpParser, proxy.http))
        config.timeout_graceful_shutdown = 2  # as for test upstreams: a test's open streams are cut soon
    else:
        config = uvicorn.Config(
            app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan=lifespan,
            server_header=False,
            date_header=False,
            timeout_graceful_shutdown=2,
        )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@contextmanager
def proxy_for(upstream_url: str, config: NormalizerConfig | None = None, *, port: int = 0) -> Iterator[str]:
    """Run ``create_app`` in front of ``upstream_url`` (an MCP endpoint URL), on ``port`` (0: a free
    one); yield the proxy's base URL."""
    settings = Settings(upstream=upstream_url)
    config = config if config is not None else settings.load_config()
    with serve(create_app(settings, config=config), proxy=config.proxy, port=port) as url:
        yield url


class RawUpstream(socketserver.ThreadingTCPServer):
    """Base of the raw HTTP/1.1 test upstreams (a hostile or broken server: bytes written by hand),
    on a free loopback port; subclasses give the handler class. Run one with :func:`serving`."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, handler: type[socketserver.BaseRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)

    @property
    def url(self) -> str:
        """The upstream's MCP endpoint URL."""
        return f"http://127.0.0.1:{self.server_address[1]}/mcp"


@dataclass(frozen=True, slots=True)
class RawRequest:
    """One request read off a raw upstream's connection: its bytes as sent, and its header fields
    (names lower-case, values stripped)."""

    raw: bytes
    fields: dict[bytes, bytes]


def read_request(rfile: BufferedIOBase) -> RawRequest | None:
    """Read one request (head, then a ``Content-Length`` body) from ``rfile``; ``None`` at the end."""
    lines: list[bytes] = []
    while (line := rfile.readline()) not in (b"\r\n", b""):  # (b"": the peer closed)
        lines.append(line)
    if not lines or not line:
        return None
    fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
    body = rfile.read(int(fields.get(b"content-length", b"0")))
    return RawRequest(b"".join(lines) + b"\r\n" + body, fields)


UpstreamT = TypeVar("UpstreamT", bound=RawUpstream)


@contextmanager
def serving(server: UpstreamT) -> Iterator[UpstreamT]:
    """Serve ``server`` in a thread until the block ends."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


class RewriteLog(logging.Handler):
    """Collects the audit fields of every rewrite log line (from any thread)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[dict[str, Any]] = []
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        audit = getattr(record, "audit", None)
        if isinstance(audit, dict):
            self.lines.append(audit)

    def rewrites(self, **match: Any) -> list[dict[str, Any]]:
        """Lines of event ``rewrite`` whose fields equal ``match``."""
        return [
            line
            for line in self.lines
            if line["event"] == "rewrite" and all(line.get(k) == v for k, v in match.items())
        ]


@contextmanager
def capture_rewrites(logger_name: str = REWRITE_LOGGER) -> Iterator[RewriteLog]:
    """Attach a :class:`RewriteLog` to ``logger_name`` (the rewrite logger by default) for the duration."""
    handler = RewriteLog()
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


async def read_body(receive: Receive) -> bytes:
    """Read a whole ASGI request body (for test upstreams)."""
    body = b""
    while True:
        message = await receive()
        body += bytes(message.get("body", b""))
        if not message.get("more_body"):
            return body


def feed_all(t: ResponseTransformer, *chunks: bytes) -> bytes:
    """Everything ``t`` sends for a body of ``chunks``, driven as the middleware drives it: after
    each chunk and at the end, ``resume()`` while it is :attr:`~ResponseTransformer.busy`."""
    out = bytearray()
    for chunk in chunks:
        out += pump(t, t.feed(chunk))
    return bytes(out + pump(t, t.finish()))


def pump(t: ResponseTransformer, out: bytes) -> bytes:
    """``out`` and what ``t`` gives while it is busy (a half-done message) until it is not."""
    while t.busy:
        out += t.resume()
    return out


def replay_body(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands ``body`` out once, then defers to the real one (for test upstreams
    that read a body and then let another app answer it)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def rpc(http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any], rid: Any, **headers: str) -> Any:
    """POST one JSON-RPC request; return the decoded response (JSON, or the last SSE event's data)."""
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    response = await http.post(url, content=orjson.dumps(body), headers={**HEADERS, **headers})
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return orjson.loads(data[-1])
    return response.json()


async def initialize(http: httpx.AsyncClient, url: str, **headers: str) -> dict[str, str]:
    """A legacy ``initialize``; returns the headers the session's later requests carry."""
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    response = await http.post(url, content=orjson.dumps(body), headers={**HEADERS, **headers})
    return {"mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25", **headers}


async def listed_session(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    """A new session that listed the tools and called ``protean.whoami`` (ids 1 and 2): the proxy
    then knows the session's tools. Returns the session headers."""
    session = await initialize(http, url)
    await rpc(http, url, "tools/list", {}, 1, **session)
    await rpc(http, url, "tools/call", {"name": "protean.whoami"}, 2, **session)
    return session


def load_cases(*kinds: str) -> list[dict[str, Any]]:
    """The public fault cases of the given kinds (all kinds when none given), read from ``../shared``
    (the test is skipped when the shared folder is absent, see :func:`need_shared`)."""
    cases = json.loads(need_shared("cases", "public.json").read_text(encoding="utf-8"))
    return [case for case in cases if not kinds or case["kind"] in kinds]


def conforms(instance: Any, schema: Any) -> bool:
    """Validate as the SDK clients do (dialect from ``$schema``, 2020-12 default, no remote refs)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return bool(cls(schema, registry=referencing.Registry()).is_valid(instance))


def leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every scalar in ``value`` with its path (empty containers count as scalars)."""
    if isinstance(value, dict) and value:
        for key, sub in value.items():
            yield from leaves(sub, (*path, key))
    elif isinstance(value, list) and value:
        for index, sub in enumerate(value):
            yield from leaves(sub, (*path, index))
    else:
        yield path, value


def contains_value(haystack: Any, needle: Any) -> bool:
    """True when ``needle`` equals ``haystack`` or any value nested in it."""
    if haystack == needle and type(haystack) is type(needle):
        return True
    if isinstance(haystack, dict):
        return any(contains_value(v, needle) for v in haystack.values())
    if isinstance(haystack, list):
        return any(contains_value(v, needle) for v in haystack)
    return False


def object_schemas(inner: st.SearchStrategy[Any], names: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """Object schemas (hypothesis): ``properties`` of ``inner`` schemas named from ``names``, some of
    them required, sometimes closed with ``additionalProperties: false``."""
    return st.builds(
        lambda props, required, closed: {
            "type": "object",
            "properties": props,
            "required": sorted(set(required) & set(props)),
            **({"additionalProperties": False} if closed else {}),
        },
        st.dictionaries(names, inner, max_size=4),
        st.lists(names, max_size=3),
        st.booleans(),
    )


# -- upstreams that mangle their answers, and the three clients against them --------------------

#: Rewrites one JSON-RPC message (decoded) into the bytes a faulty server would send for it.
Mangle = Callable[[dict[str, Any]], bytes]


def _as_sent(message: dict[str, Any]) -> bytes:
    return orjson.dumps(message)


class Mangled:
    """ASGI app: ``inner``'s responses (a scripted server's: JSON bodies, or SSE events framed
    ``event: message\\r\\ndata: ...\\r\\n\\r\\n``), each message rewritten by the mangle the request's
    ``x-fault`` header names in ``mangles`` (none: as it was).

    The fault ``unterminated`` (SSE only) sends every event as its data line alone, no ``event:``
    and no blank line, and keeps the stream open after the last one until the client leaves.
    """

    def __init__(self, inner: ASGIApp, mangles: Mapping[str, Mangle]) -> None:
        self.inner = inner
        self.mangles = mangles

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.inner(scope, receive, send)
            return
        fault = dict(scope["headers"]).get(b"x-fault", b"").decode()
        mangle: Mangle = self.mangles.get(fault, _as_sent)
        unterminated = fault == "unterminated"
        held: list[Message] = []
        started: list[Message] = []
        body = bytearray()
        kept_open = False

        async def mangled(message: Message) -> None:
            nonlocal kept_open
            if message["type"] == "http.response.start":
                held.append(message)
                return
            chunk = bytes(message.get("body", b""))
            more = bool(message.get("more_body"))
            start = held[0] if held else started[0]
            if not dict(start["headers"]).get(b"content-type", b"").startswith(b"text/event-stream"):
                body.extend(chunk)
                if more:
                    return
                text = mangle(orjson.loads(body)) if body else b""
                headers = [(k, v) for k, v in start["headers"] if k != b"content-length"]
                headers.append((b"content-length", str(len(text)).encode()))
                await send({**start, "headers": headers})
                await send({"type": "http.response.body", "body": text})
                return
            if held:
                started.append(held[0])
                await send(held.pop())
            out = b""
            for block in chunk.split(b"\r\n\r\n"):
                data = next((line[6:] for line in block.split(b"\r\n") if line.startswith(b"data: ")), None)
                if data is not None:
                    text = mangle(orjson.loads(data))
                    out += (
                        b"data: " + text + b"\n" if unterminated else b"event: message\r\ndata: " + text + b"\r\n\r\n"
                    )
            kept_open = unterminated and not more
            await send({"type": "http.response.body", "body": out, "more_body": more or kept_open})

        await self.inner(scope, receive, mangled)
        if kept_open:  # as the faulty servers do: the stream stays open, the blank line never comes
            with anyio.move_on_after(60):
                while (await receive())["type"] != "http.disconnect":
                    pass


async def each_client(url: str, steps: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """One session of ``steps`` with each strict client (TS SDK 1.x, TS client 2.x, Python ``mcp``):
    its record by client."""
    session = [{"url": url, "steps": list(steps)}]
    return {
        "ts-sdk-1": (await run_node("v1", session))[0],
        "ts-client-2": (await run_node("v2", session))[0],
        "python": await run_python(url, steps),
    }


async def three_clients(
    url: str, faults: Sequence[str], steps: Sequence[Mapping[str, Any]], request_timeout: float
) -> dict[str, list[dict[str, Any]]]:
    """One session per fault (its ``x-fault`` header) with each strict client: the TS SDK 1.x, the
    TS client 2.x and the Python ``mcp`` client; their records by client, in fault order. A Python
    session that hangs past ``request_timeout`` per step is recorded as failed (its own read
    timeout is minutes)."""

    async def python(fault: str) -> dict[str, Any]:
        with anyio.move_on_after(request_timeout * (len(steps) + 1)):
            return await run_python(url, steps, {"x-fault": fault})
        return {"steps": [{"ok": False, "error": {"name": "Timeout", "message": "no answer"}}] * len(steps)}

    sessions = [{"url": url, "headers": {"x-fault": fault}, "steps": list(steps)} for fault in faults]
    return {
        "ts-sdk-1": await run_node("v1", sessions, request_timeout=request_timeout),
        "ts-client-2": await run_node("v2", sessions, request_timeout=request_timeout),
        "python": [await python(fault) for fault in faults],
    }


# -- processes: the mcp-normalizer command under test ---------------------------------------------

#: The ``mcp-normalizer`` command of this environment.
EXE = str(Path(sys.executable).with_name("mcp-normalizer"))


def free_port() -> int:
    """A loopback port free at the time of asking."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening(port: int) -> bool:
    """True when something accepts connections on loopback ``port``."""
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def running(argv: list[str], port: int, env: dict[str, str] | None = None) -> Iterator[list[str]]:
    """Run ``argv`` until it listens on ``port``; on exit stop it with SIGTERM and fill the list
    yielded with its stderr lines (:func:`listening_process`)."""
    with listening_process(argv, port, {**os.environ, **(env or {})}) as (_, lines):
        yield lines


@contextmanager
def listening_process(
    argv: Sequence[str], port: int, env: Mapping[str, str], stop_timeout: float = 20
) -> Iterator[tuple[subprocess.Popen[bytes], list[str]]]:
    """Run ``argv`` with exactly ``env`` until it listens on ``port``; yield the process and a list
    filled with its stderr lines once it has been stopped (SIGTERM, waited for ``stop_timeout`` s).
    Its stderr goes to a file, not a pipe: a chatty process never blocks on a full pipe nobody reads
    while the test runs."""
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen(list(argv), stderr=err, stdout=subprocess.DEVNULL, env=dict(env), cwd=ROOT)
        lines: list[str] = []
        try:
            deadline = time.monotonic() + 20
            while not listening(port):
                if process.poll() is not None:
                    err.seek(0)
                    raise AssertionError(err.read().decode(errors="replace"))
                assert time.monotonic() < deadline, "the proxy did not start listening"
                time.sleep(0.05)
            yield process, lines
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=stop_timeout)
            err.seek(0)
            lines.extend(err.read().decode(errors="replace").splitlines())


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``mcp-normalizer ARGS`` to its end (30 s at most) without this process's
    ``MCP_NORMALIZER_*`` variables; ``env`` adds some."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MCP_NORMALIZER_")}
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=30, env={**clean, **(env or {})})


# -- scripted upstreams from the public fault cases --------------------------------------------


def case_server(cases: list[dict[str, Any]], mode: str) -> ScriptedServer:
    """One upstream for all cases: the ``x-case`` request header picks the case's tool."""
    by_id = {case["id"]: [ToolSpec(case["tool"], returning(case["result"]))] for case in cases}
    return ScriptedServer(lambda headers: by_id.get(headers.get("x-case", ""), []), response_mode=mode)  # type: ignore[arg-type]


def steps(case: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"op": "listTools"}, {"op": "callTool", "name": case["tool"]["name"], "arguments": {}}]


async def replay(url: str, cases: list[dict[str, Any]], request_timeout: float = 30) -> dict[str, list[dict[str, Any]]]:
    """Per client, one session record per case (in case order)."""
    sessions = [{"url": url, "headers": {"x-case": c["id"]}, "steps": steps(c)} for c in cases]
    return {
        "ts-sdk-1": await run_node("v1", sessions, request_timeout=request_timeout),
        "ts-client-2": await run_node("v2", sessions, request_timeout=request_timeout),
        "python": [await run_python(url, steps(c), {"x-case": c["id"]}) for c in cases],
    }


# -- property-test data: field-like values and their strategies -------------------------------

STRINGS = st.one_of(
    st.sampled_from(["", "x", "17", "2.50", "true", "null", '{"a": 1}', "[1]", "a", "b", "error: boom"]),
    st.text(max_size=8),
)
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    STRINGS,
)


NAMES = st.sampled_from(["a", "b", "scope", "items", "result", "_meta", "id", "kind"])


VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(NAMES, inner, max_size=4)),
    max_leaves=12,
)


# -- legacy sessions ------------------------------------------------------------------------------


def fetches(upstream: ScriptedServer) -> int:
    """How many ``tools/list`` requests the proxy itself sent upstream."""
    return sum(
        1
        for message, _ in upstream.requests
        if message.get("method") == "tools/list" and str(message.get("id")).startswith("mcp-normalizer-")
    )


# -- raw HTTP ----------------------------------------------------------------------------------------


async def raw_request(url: str, request: bytes, *, close_after_send: bool = False) -> bytes:
    """Send bytes as they are to the server at ``url``'s host and port; return everything it answers."""
    parsed = httpx.URL(url)
    stream = await anyio.connect_tcp(parsed.host, parsed.port or 80)
    async with stream:
        await stream.send(request)
        if close_after_send:
            return b""
        received = b""
        with anyio.move_on_after(10):
            try:
                while chunk := await stream.receive():
                    received += chunk
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
    return received


# -- an in-process MCP SDK app --------------------------------------------------------------------


def sdk_app(json_response: bool, listed: list[str] | None = None) -> Any:
    """The Protean tools served by the real SDK (mcp 2.x low-level ``Server``); each ``tools/list``
    appends the request id to ``listed``."""
    specs = {spec.tool["name"]: spec.tool for spec in protean_tools()}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        if listed is not None:
            listed.append(str(ctx.request_id))
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t["name"],
                    description=t["description"],
                    input_schema=t["inputSchema"],
                    output_schema=t.get("outputSchema"),
                )
                for t in specs.values()
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text: list[types.ContentBlock] = [types.TextContent(type="text", text=FORBIDDEN["detail"])]
        if params.name == "protean.scope_list":
            return types.CallToolResult(content=text, structured_content=FORBIDDEN, is_error=True)
        body = orjson.dumps(RUNTIMES).decode()
        return types.CallToolResult(content=[types.TextContent(type="text", text=body)], structured_content=RUNTIMES)

    server = Server("protean-sdk", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)
    return server.streamable_http_app(json_response=json_response)


# -- the transformer, driven by hand -----------------------------------------------------------

#: A result as field servers write it: every member must survive untouched, byte for byte.
FIELD_RESULT = (
    b'{"content":[{"type":"text","text":"caf\\u00e9 \xe2\x82\xac \\"q\\" \\\\ 12.50"}],'
    b'"structuredContent":{"price":12.50,"ratio":2.5E-3,"big":123456789012345678901234,'
    b'"name":"na\xc3\xafve \\ud83d\\ude00","deep":{"a":[null,{"b":null}]},"empty":""}}'
)


JSON_HEADERS = [(b"content-type", b"application/json")]


def transformer(
    method: str = "ping",
    rid: Any = 1,
    *,
    batch: bool = False,
    modes: dict[str, Mode] | None = None,
    content_type: list[tuple[bytes, bytes]] = JSON_HEADERS,
    params: dict[str, Any] | None = None,
) -> ResponseTransformer:
    """A transformer for the response to one request (``method``, id ``rid``, ``params``: ``{}``
    unless given) on a POST, as the middleware builds it from the request body."""
    request: Any = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}
    info = inspect_request(orjson.dumps([request] if batch else request), [])
    assert info is not None
    config = NormalizerConfig(rules=modes or {})
    exchange = Exchange(info.pending, "2025-11-25", "s", ScopeStore().state("s"), sole=info.sole, own_stream=True)
    t = ResponseTransformer(exchange, Normalizer(config), AuditLog("test"), slice_seconds=0)
    t.start(200, content_type)
    return t


# -- the new fault cases (2026): tools and results no public case file has yet --------------


def tool(name: str, output: Any = None, **extra: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"name": name, "inputSchema": {"type": "object", "properties": {}}}
    if output is not None:
        found["outputSchema"] = output
    return {**found, **extra}


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


OBJ = {"type": "object"}


#: New cases of each kind: (id, kind, tool, faulty result). None copies a public case.
NEW_CASES: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    (
        "gen-promote-nested",
        "missing_structured_content",
        tool(
            "inventory.count",
            {**OBJ, "properties": {"total": {"type": "integer"}, "sites": OBJ}, "required": ["total"]},
        ),
        {"content": text('{\n "total": 7,\n "sites": {"ams": {"racks": [1, 2]}}\n}')},
    ),
    (
        "gen-vacuous-audio",
        "spurious_output_schema",
        tool("voice.say", {**OBJ, "description": "audio", "properties": {"uri": {"type": "string"}}}),
        {"content": [{"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}]},
    ),
    (
        "gen-impossible-schema",
        "spurious_output_schema",
        {"name": "never.ok", "inputSchema": {"type": "object"}, "outputSchema": False},
        {"content": text("fine")},
    ),
    (
        "gen-error-list",
        "error_result_validated",
        tool("rows.fetch", {**OBJ, "properties": {"rows": {"type": "array"}}, "required": ["rows"]}),
        {"content": [], "structuredContent": {"errors": [{"code": "E_TIMEOUT", "after_ms": 3000}]}, "isError": True},
    ),
    (
        "gen-error-unflagged",
        "error_not_flagged",
        tool("bucket.list", {**OBJ, "properties": {"keys": {"type": "array"}}, "required": ["keys"]}),
        {"content": text("NOT_FOUND: bucket 'logs-2026' does not exist"), "isError": False},
    ),
    (
        "gen-null-nested",
        "null_for_non_nullable",
        tool(
            "pages.read",
            {
                **OBJ,
                "properties": {
                    "pages": {
                        "type": "array",
                        "items": {
                            **OBJ,
                            "properties": {"items": {"type": "array"}, "cursor": {"type": "string"}},
                            "required": ["items"],
                        },
                    }
                },
            },
        ),
        {"content": text("2 pages"), "structuredContent": {"pages": [{"items": None, "cursor": None}, {"items": [3]}]}},
    ),
    (
        "gen-enum-bool",
        "enum_mismatch",
        tool("flag.get", {**OBJ, "properties": {"enabled": {"enum": ["true", "false"]}, "weight": {"const": 1}}}),
        {"content": text("flag"), "structuredContent": {"enabled": True, "weight": "1"}},
    ),
    (
        "gen-scalar-sc",
        "non_object_structured_content",
        tool("clock.epoch"),
        {"content": text("1764417600"), "structuredContent": 1764417600},
    ),
    (
        "gen-string-root",
        "non_object_output_schema",
        tool("name.get", {"type": "string", "minLength": 1}),
        {"content": text("ada"), "structuredContent": "ada"},
    ),
    (
        "gen-oneof-refs",
        "non_object_output_schema",
        tool(
            "shape.get",
            {
                "oneOf": [{"$ref": "#/$defs/circle"}, {"$ref": "#/$defs/square"}],
                "$defs": {
                    "circle": {**OBJ, "properties": {"r": {"type": "number"}}, "required": ["r"]},
                    "square": {**OBJ, "properties": {"side": {"type": "number"}}, "required": ["side"]},
                },
            },
        ),
        {"content": text("circle"), "structuredContent": {"r": 2.5}},
    ),
    (
        "gen-dangling-in-items",
        "schema_ref_unresolvable",
        tool(
            "graph.nodes",
            {**OBJ, "properties": {"nodes": {"type": "array", "items": {"$ref": "#/definitions/Node"}}}},
        ),
        {"content": text("1 node"), "structuredContent": {"nodes": [{"id": "n1"}]}},
    ),
    (
        "gen-draft07-translate",
        "schema_dialect",
        tool(
            "pair.get",
            {
                "$schema": "http://json-schema.org/draft-07/schema#",
                **OBJ,
                "properties": {"pair": {"type": "array", "items": [{"type": "string"}, {"$ref": "#/definitions/n"}]}},
                "definitions": {"n": {"type": "integer"}},
            },
        ),
        {"content": text("pair"), "structuredContent": {"pair": ["a", 1]}},
    ),
    (
        "gen-extra-nested",
        "additional_properties",
        tool(
            "user.profile",
            {
                **OBJ,
                "properties": {
                    "user": {**OBJ, "properties": {"id": {"type": "string"}}, "additionalProperties": False}
                },
            },
        ),
        {"content": text("u9"), "structuredContent": {"user": {"id": "u9", "debug_trace": "x1"}}},
    ),
    (
        "gen-date-in-prefix",
        "format_date_time",
        tool(
            "window.get",
            {**OBJ, "properties": {"window": {"type": "array", "prefixItems": [{"type": "string", "format": "date"}]}}},
        ),
        {"content": text("window"), "structuredContent": {"window": ["2026-11"]}},
    ),
    (
        "gen-coerce",
        "type_mismatch",
        tool(
            "metrics.get",
            {
                **OBJ,
                "properties": {"count": {"type": "integer"}, "ratio": {"type": "number"}, "label": {"type": "string"}},
            },
        ),
        {"content": text("metrics"), "structuredContent": {"count": "17", "ratio": "2.50", "label": 99}},
    ),
    (
        "gen-rewrap",
        "wrapped_result",
        tool(
            "files.tree",
            {**OBJ, "properties": {"result": {"type": "array"}}, "required": ["result"], "x-fastmcp-wrap-result": True},
        ),
        {"content": text("tree"), "structuredContent": {"success": True, "code": 200, "payload": [{"path": "/a"}]}},
    ),
    (
        "gen-double-encoded",
        "double_encoded_json",
        tool("cfg.dump"),
        {"content": text("config"), "structuredContent": '{"retries": 3, "backoff": {"base_ms": 100}}'},
    ),
    (
        "gen-no-text",
        "missing_text_content",
        tool("geo.locate", {**OBJ, "properties": {"lat": {"type": "number"}}}),
        {"content": [], "structuredContent": {"lat": 52.37, "lon": 4.89}},
    ),
    (
        "gen-no-content",
        "missing_content_field",
        tool("sys.uptime"),
        {"structuredContent": {"seconds": 86400}},
    ),
    (
        "gen-block-kinds",
        "invalid_content_block",
        tool("doc.render"),
        {"content": [{"type": "markdown", "text": "# Title"}, {"type": "text", "text": None}, "plain words"]},
    ),
    (
        "gen-null-envelope",
        "null_optional_fields",
        tool("ping.pong"),
        {"content": [{"type": "text", "text": "pong", "annotations": None}], "isError": None, "_meta": None},
    ),
    (
        "gen-meta-keys",
        "meta_key_invalid",
        tool("meta.echo", _meta={"-internal": {"v": 1}, "com.example/ok": True}),
        {"content": text("echo"), "_meta": {"trace id": "t-1", "com.example/ok": True}},
    ),
    (
        "gen-shape",
        "invalid_schema_shape",
        {
            "name": "shape.broken",
            "inputSchema": {
                "type": "object",
                "properties": {"ids": {"type": "array"}, "opts": {**OBJ, "properties": []}},
            },
            "outputSchema": {**OBJ, "properties": {"meta": {**OBJ, "properties": None}}, "required": None},
        },
        {"content": text("ok"), "structuredContent": {"meta": {"k": "v"}}},
    ),
]


# -- legacy resumption and 2026-07-28 task upstreams ------------------------------------------

#: The 2026-07-28 protocol version.
MODERN = "2026-07-28"

#: The default _meta key of an error's RFC 9457 problem (the Protean contract).
PROBLEM_KEY = "org.htcom.protean/problem"


def params(**values: Any) -> dict[str, Any]:
    """Request params with the 2026-07-28 per-request protocol fields."""
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    return {**values, "_meta": meta}


def headers(method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    found = {"mcp-protocol-version": MODERN, "mcp-method": method, **extra}
    if name is not None:
        found["mcp-name"] = name
    return found


def task_server() -> ScriptedServer:
    return ScriptedServer([dataclasses.replace(spec, as_task=True) for spec in protean_tools()], response_mode="json")


def resuming_upstream() -> tuple[ASGIApp, list[dict[str, Any]]]:
    """A 2025-11-25 server that closes each tools/call POST stream right after a priming event
    (SEP-1699 polling) and delivers the responses on a GET with ``Last-Event-ID``."""
    held: list[dict[str, Any]] = []
    tools = ScriptedServer(protean_tools(), response_mode="json")
    results = {spec.tool["name"]: spec.handler for spec in protean_tools()}
    seen_gets: list[dict[str, Any]] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        if scope["method"] == "GET":
            seen_gets.append(headers)
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
            )
            for n, message in enumerate(held, start=1):
                event = b"id: r-%d\nevent: message\ndata: %s\n\n" % (n, orjson.dumps(message))
                await send({"type": "http.response.body", "body": event, "more_body": True})
            held.clear()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        body = await read_body(receive)
        message = orjson.loads(body)
        if message.get("method") != "tools/call":
            await tools(scope, replay_body(body, receive), send)
            return
        from mcp_normalizer.demo.upstream import ToolCall

        result = await results[message["params"]["name"]](ToolCall(message["params"]["name"], {}, headers))
        held.append({"jsonrpc": "2.0", "id": message["id"], "result": result})
        start = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
        await send(start)
        await send({"type": "http.response.body", "body": b"id: r-0\ndata: \nretry: 10\n\n", "more_body": False})

    return app, seen_gets
