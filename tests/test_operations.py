"""Running the proxy in production: probes and metrics, limits, time limits, failures, security."""

from __future__ import annotations

import dataclasses
import re
import threading
from typing import Any

import anyio
import httpx
import orjson
import pytest

from mcp_normalizer import NormalizerConfig
from mcp_normalizer.config import ProxyConfig
from mcp_normalizer.demo.clients import run_node
from mcp_normalizer.demo.upstream import protean_server
from mcp_normalizer.types import Receive, Scope, Send

from .support import HEADERS, capture_rewrites, free_port, initialize, proxy_for, read_body, rpc, serve

pytestmark = pytest.mark.wire


def with_proxy(**limits: Any) -> NormalizerConfig:
    shipped = NormalizerConfig.shipped()
    return dataclasses.replace(shipped, proxy=dataclasses.replace(ProxyConfig(), **limits))


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in a Prometheus exposition."""
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        match = re.fullmatch(rf"{re.escape(name)}(?:\{{(.*)\}})? (\S+)", line)
        if match and ",".join(sorted((match[1] or "").split(","))) == wanted:
            return float(match[2])
    return 0.0


@pytest.mark.anyio
async def test_probes_and_metrics_under_a_prefix_of_their_own() -> None:
    steps = [{"op": "listTools"}, {"op": "callTool", "name": "protean.scope_list"}]
    with serve(protean_server()) as up, proxy_for(up + "/mcp") as px:
        await run_node("v1", [{"url": px + "/mcp", "steps": steps}])
        async with httpx.AsyncClient(timeout=10) as http:
            live = await http.get(px + "/.mcp-normalizer/livez")
            ready = await http.get(px + "/.mcp-normalizer/readyz")
            exposition = (await http.get(px + "/.mcp-normalizer/metrics")).text
            upstreams_own = await http.get(px + "/metrics")  # the upstream's path, not the proxy's
    assert live.status_code == 200 and ready.status_code == 200
    assert upstreams_own.status_code == 405  # forwarded: the legacy upstream answers GET with 405
    assert (
        metric(exposition, "mcp_normalizer_requests_total", http_method="POST", rpc_method="tools/call", status="200")
        == 1
    )
    assert (
        metric(exposition, "mcp_normalizer_requests_total", http_method="POST", rpc_method="tools/list", status="200")
        == 1
    )
    rewrites = {"rule": "error_problem", "tool": "protean.scope_list", "event": "rewrite", "applied": "true"}
    assert metric(exposition, "mcp_normalizer_rewrites_total", **rewrites) == 1
    assert metric(exposition, "mcp_normalizer_upstream_latency_seconds_count") >= 4
    assert metric(exposition, "mcp_normalizer_bytes_total", direction="response") > 0
    assert metric(exposition, "mcp_normalizer_open_streams") == 0


@pytest.mark.anyio
async def test_readiness_follows_the_upstream() -> None:
    with proxy_for(f"http://127.0.0.1:{free_port()}/mcp", with_proxy(admin_prefix="/ops")) as px:
        async with httpx.AsyncClient(timeout=10) as http:
            assert (await http.get(px + "/ops/livez")).status_code == 200
            assert (await http.get(px + "/ops/readyz")).status_code == 503


@pytest.mark.anyio
async def test_a_foreign_origin_gets_403_and_never_reaches_the_upstream() -> None:
    upstream = protean_server()
    config = with_proxy(allowed_origins=("https://app.example",))
    with serve(upstream) as up, proxy_for(up + "/mcp", config) as px:
        async with httpx.AsyncClient(timeout=10, headers=HEADERS) as http:
            body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
            foreign = await http.post(px + "/mcp", content=body, headers={"origin": "https://evil.example"})
            allowed = await http.post(px + "/mcp", content=body, headers={"origin": "https://APP.example"})
            no_origin = await http.post(px + "/mcp", content=body)
    assert foreign.status_code == 403 and foreign.json()["error"]["message"].startswith(
        "Origin not allowed; the proxy's setting allowed_origins"
    )
    assert allowed.status_code == 200 and no_origin.status_code == 200
    assert len(upstream.requests) == 2


@pytest.mark.anyio
async def test_request_and_rewrite_size_limits() -> None:
    config = with_proxy(max_request_bytes=1000, max_rewrite_bytes=300)
    with serve(protean_server("json")) as up, proxy_for(up + "/mcp", config) as px, capture_rewrites() as log:
        async with httpx.AsyncClient(timeout=10, headers=HEADERS) as http:
            big = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"pad":"' + b"x" * 2000 + b'"}}'
            too_large = await http.post(px + "/other", content=big)
            call = b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"protean.list_runtimes"}}'
            over = await http.post(px + "/mcp", content=call)
            direct = await http.post(up + "/mcp", content=call)
            exposition = (await http.get(px + "/.mcp-normalizer/metrics")).text
    assert (
        too_large.status_code == 413
        and "over 1000 bytes); the proxy's setting max_request_bytes" in too_large.json()["error"]["message"]
    )
    assert over.content == direct.content  # above max_rewrite_bytes: passed through as it came
    assert metric(exposition, "mcp_normalizer_passthrough_oversize_total") == 1
    assert not log.rewrites(method="tools/call")


def silent_upstream(first_event: bytes | None, keepalive_every: float | None, total: float) -> Any:
    """An upstream that answers a tools/call slowly: headers only after ``first_event`` is None...

    With ``first_event`` None it never sends headers; otherwise it sends that event, then keep-alive
    comments every ``keepalive_every`` seconds (or nothing) for ``total`` seconds, then ends."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await read_body(receive)
        if first_event is None:
            await anyio.sleep(total)
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": first_event, "more_body": True})
        elapsed = 0.0
        while elapsed < total:
            step = keepalive_every or total
            await anyio.sleep(step)
            elapsed += step
            if keepalive_every:
                await send({"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"data: done\n\n", "more_body": False})

    return app


PROGRESS = b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}\n\n'
CALL = b'{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{"name":"slow"}}'


@pytest.mark.anyio
async def test_no_first_byte_in_time_is_a_504_with_the_request_id() -> None:
    with serve(silent_upstream(None, None, 5)) as up, proxy_for(up + "/mcp", with_proxy(first_byte_timeout=0.5)) as px:
        async with httpx.AsyncClient(timeout=30, headers=HEADERS) as http:
            response = await http.post(px + "/mcp", content=CALL)
    assert response.status_code == 504
    assert response.json()["id"] == "c-1" and "timed out" in response.json()["error"]["message"]


@pytest.mark.anyio
@pytest.mark.parametrize("keepalive", [None, 0.1])
async def test_an_idle_stream_is_broken_off_but_keep_alive_comments_count(keepalive: float | None) -> None:
    # (a keep-alive every 0.1 s against a 3 s limit, 6 s of silence otherwise: a loaded machine's
    # pauses neither break the kept-alive stream nor let the silent one through)
    app = silent_upstream(PROGRESS, keepalive, 6.0)
    with serve(app) as up, proxy_for(up + "/mcp", with_proxy(idle_timeout=3.0)) as px:
        received = b""
        broken = False
        async with httpx.AsyncClient(timeout=30, headers=HEADERS) as http:
            try:
                async with http.stream("POST", px + "/mcp", content=CALL) as stream:
                    async for chunk in stream.aiter_raw():
                        received += chunk
            except httpx.HTTPError:
                broken = True
            exposition = (await http.get(px + "/.mcp-normalizer/metrics")).text
    assert received.startswith(PROGRESS)
    if keepalive is None:
        assert broken and b"done" not in received
        # (the proxy's own tools/list fetch for the unseen tool went silent too)
        assert metric(exposition, "mcp_normalizer_upstream_errors_total", kind="idle") >= 1
    else:
        assert not broken and received.endswith(b"data: done\n\n")


@pytest.mark.anyio
async def test_upstream_json_rpc_and_http_errors_pass_through_untouched() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        request = orjson.loads(await read_body(receive))
        if request["method"] == "tools/call":
            body = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Unknown tool: x","data":{"n":1.10}}}'
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
        else:
            body = b"<html>bad gateway upstream</html>"
            await send({"type": "http.response.start", "status": 500, "headers": [(b"content-type", b"text/html")]})
        await send({"type": "http.response.body", "body": body})

    with serve(app) as up, proxy_for(up + "/mcp") as px:
        async with httpx.AsyncClient(timeout=10, headers=HEADERS) as http:
            answers = []
            for body in (
                b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}',
                b'{"jsonrpc":"2.0","id":2,"method":"ping"}',
            ):
                direct = await http.post(up + "/mcp", content=body)
                proxied = await http.post(px + "/mcp", content=body)
                answers.append((direct, proxied))
    for direct, proxied in answers:
        assert (proxied.status_code, proxied.content) == (direct.status_code, direct.content)


@pytest.mark.anyio
async def test_hundreds_of_aborted_streams_leave_nothing_open() -> None:
    open_handlers = 0
    lock = threading.Lock()

    async def upstream(scope: Scope, receive: Receive, send: Send) -> None:
        nonlocal open_handlers
        if scope["type"] != "http":
            return
        await read_body(receive)
        with lock:
            open_handlers += 1
        try:
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
            )
            async with anyio.create_task_group() as tg:

                async def stream_forever() -> None:  # a stream that never ends on its own
                    while True:
                        await send({"type": "http.response.body", "body": PROGRESS, "more_body": True})
                        await anyio.sleep(0.05)

                tg.start_soon(stream_forever)
                while (await receive())["type"] != "http.disconnect":  # until the proxy hangs up
                    pass
                tg.cancel_scope.cancel()
        finally:
            with lock:
                open_handlers -= 1

    with serve(upstream) as up, proxy_for(up + "/mcp") as px:

        async def abort_one() -> None:
            async with httpx.AsyncClient(timeout=30, headers=HEADERS) as http:
                async with http.stream("POST", px + "/mcp", content=CALL) as stream:
                    async for _ in stream.aiter_raw():
                        break  # the client goes away after the first chunk

        with anyio.fail_after(120):
            for _ in range(10):
                async with anyio.create_task_group() as tg:
                    for _ in range(30):
                        tg.start_soon(abort_one)
            async with httpx.AsyncClient(timeout=10) as http:
                while True:  # every upstream stream is closed once its client has left
                    exposition = (await http.get(px + "/.mcp-normalizer/metrics")).text
                    with lock:
                        drained = open_handlers == 0
                    counted = metric(
                        exposition,
                        "mcp_normalizer_requests_total",
                        http_method="POST",
                        rpc_method="tools/call",
                        status="200",
                    )
                    # A request is counted when its exchange ends (its tools/list fetch included).
                    if drained and metric(exposition, "mcp_normalizer_open_streams") == 0 and counted == 300:
                        break
                    await anyio.sleep(0.05)
    assert (
        metric(exposition, "mcp_normalizer_requests_total", http_method="POST", rpc_method="tools/call", status="200")
        == 300
    )


@pytest.mark.anyio
async def test_a_tool_name_with_control_characters_is_counted_as_invalid() -> None:
    """A client (or upstream) controls tool names: an ESC or a CR must not reach the exposition."""
    from mcp_normalizer.demo.upstream import FORBIDDEN, ScriptedServer, ToolSpec, returning

    name = "evil\x1b[31m\rtool"
    problem = {"isError": True, "content": [{"type": "text", "text": "no"}], "structuredContent": FORBIDDEN}
    tool = {"name": name, "inputSchema": {"type": "object"}}
    with serve(ScriptedServer([ToolSpec(tool, returning(problem))], response_mode="json")) as up:
        with proxy_for(up + "/mcp") as px:
            async with httpx.AsyncClient(timeout=10) as http:
                session = await initialize(http, px + "/mcp")
                answer = await rpc(http, px + "/mcp", "tools/call", {"name": name, "arguments": {}}, 1, **session)
                exposition = (await http.get(px + "/.mcp-normalizer/metrics")).text
    assert "org.htcom.protean/problem" in answer["result"]["_meta"]  # the rewrite happened
    assert "\x1b" not in exposition and "\r" not in exposition
    labels = {"rule": "error_problem", "tool": "invalid", "event": "rewrite", "applied": "true"}
    assert metric(exposition, "mcp_normalizer_rewrites_total", **labels) == 1
