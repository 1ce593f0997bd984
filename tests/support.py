"""Test plumbing: real servers on loopback, the public fault cases, log capture, small JSON helpers."""

from __future__ import annotations

import json
import logging
import os
import socketserver
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
import orjson
import pytest
import referencing
import uvicorn
from hypothesis import strategies as st

from mcp_normalizer import NormalizerConfig, Settings, create_app
from mcp_normalizer.audit import REWRITE_LOGGER
from mcp_normalizer.config import ProxyConfig
from mcp_normalizer.demo import DEMO_CONFIG
from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.server import HttpParser, bind, uvicorn_config
from mcp_normalizer.transform import ResponseTransformer
from mcp_normalizer.types import ASGIApp, Message, Receive, Scope, Send

ROOT = Path(__file__).resolve().parents[1]
#: The team's shared folder (fault cases, conformance tools): ``../shared`` next to the checkout.
SHARED = Path(os.environ.get("MCP_NORMALIZER_SHARED", ROOT.parent / "shared"))
CASES_FILE = SHARED / "cases" / "public.json"


def protean_rules() -> NormalizerConfig:
    """The demo's rule file (the shipped defaults and the Protean ``list_runtimes`` declaration), as
    an operator of the Protean upstream passes it with ``--config``."""
    return NormalizerConfig.from_file(DEMO_CONFIG)


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

    With ``proxy``, uvicorn runs as the proxy's command does (:func:`mcp_normalizer.server.uvicorn_config`:
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
    lines = list(iter(rfile.readline, b"\r\n"))
    if not lines or not any(lines):
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
