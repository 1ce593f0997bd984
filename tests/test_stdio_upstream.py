"""``--upstream-cmd`` (issue 24, section 1): stdio servers served over Streamable HTTP by the proxy,
driven by the three strict clients over HTTP, and by raw HTTP where a fault of the child, a session
boundary or an era must be staged exactly (:mod:`tests.stdio_server`)."""

from __future__ import annotations

import io
import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest

from mcp_normalizer import NormalizerConfig
from mcp_normalizer.app import create_app
from mcp_normalizer.config import Settings
from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.wire.jsoncodec import dumps, loads

from .support import EXE, HEADERS, each_client, free_port, listening, load_cases, proxy_for, running, serve, steps
from .test_corpus import UNREPAIRABLE, check, rejected
from .test_everything_wire import DRAFT_07, EVERYTHING, KEPT, STEPS, answers
from .test_stdio_wrapper import each_stdio_client, fixture, ns_pid, plan_with, without_times

pytestmark = pytest.mark.wire

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}


@contextmanager
def stdio_proxy(command: Sequence[str], config: NormalizerConfig | None = None, **proxy: Any) -> Iterator[str]:
    """The proxy serving the stdio server ``command`` (``[proxy]`` keys ``proxy`` set); its base URL."""
    settings = Settings()
    keys = {"upstream_cmd": shlex.join(command), **proxy}
    if config is None:
        config = settings.load_config(keys)
    else:
        config = replace(config, path="/mcp").with_proxy(keys)
    with serve(create_app(settings, config=config), proxy=config.proxy) as url:
        yield url


async def post(http: httpx.AsyncClient, url: str, message: Any, session: str | None = None) -> httpx.Response:
    headers = {**HEADERS, **({"mcp-session-id": session} if session else {})}
    return await http.post(url, content=dumps(message), headers=headers)


def events(response: httpx.Response) -> list[Any]:
    """The JSON-RPC messages of an SSE (or JSON) response body."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    return [loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


async def open_session(http: httpx.AsyncClient, url: str) -> str:
    response = await post(http, url, INIT)
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    assert (
        await post(http, url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    ).status_code == 202
    return session


def call(rid: Any, tool: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": {}, **params}}


# -- real servers, real clients -------------------------------------------------------------------


@pytest.mark.anyio
async def test_server_everything_answers_every_client_as_over_its_own_stdio_and_as_over_http() -> None:
    server = ["node", str(EVERYTHING / "index.js"), "stdio"]
    direct = await each_stdio_client(server, STEPS)
    with stdio_proxy(server) as px:
        through = await each_client(px + "/mcp", STEPS)
    for client, record in through.items():
        assert all(step["ok"] for step in record["steps"]), (client, record)
        assert answers(record) == answers(direct[client]), client  # every result as the server sent it
    for client in ("ts-sdk-1", "ts-client-2"):  # the repair the HTTP path makes for them, and only it
        tools = {tool["name"]: tool for tool in through[client]["steps"][0]["value"]["tools"]}
        server_tools = {tool["name"]: tool for tool in direct[client]["steps"][0]["value"]["tools"]}
        assert {name for name in tools if tools[name] != server_tools[name]} == {"get-structured-content"}
        assert tools["get-structured-content"]["_meta"][KEPT] == {"/outputSchema/$schema": DRAFT_07}
    assert through["python"]["steps"][0] == direct["python"]["steps"][0]


@pytest.mark.anyio
async def test_a_fastmcp_server_gives_every_client_what_the_http_proxy_gives() -> None:
    from .test_fastmcp_wire import STEPS as FASTMCP_STEPS
    from .test_fastmcp_wire import app as fastmcp_app

    server = [sys.executable, str(Path(__file__).with_name("fastmcp_stdio_server.py"))]
    with stdio_proxy(server) as px:
        through = await each_client(px + "/mcp", FASTMCP_STEPS)
    with serve(fastmcp_app(), lifespan="on") as up, proxy_for(up + "/mcp") as px:
        over_http = await each_client(px + "/mcp", FASTMCP_STEPS)
    for client in through:
        assert without_times(through[client]) == without_times(over_http[client]), client
    assert not all(s["ok"] for s in (await each_stdio_client(server, FASTMCP_STEPS))["ts-sdk-1"]["steps"])


@pytest.mark.anyio
async def test_the_python_sdks_own_stdio_server_is_repaired_for_every_client() -> None:
    server = [sys.executable, str(Path(__file__).with_name("mcpserver_stdio_server.py"))]
    calls: list[dict[str, Any]] = [
        {"op": "listTools"},
        {"op": "callTool", "name": "lookup", "arguments": {"id": 9007199254740991}},
        {"op": "callTool", "name": "add", "arguments": {"a": -2, "b": 9007199254740991}},
    ]
    with stdio_proxy(server) as px:
        through = await each_client(px + "/mcp", calls)
    for client, record in through.items():
        _, lookup, add = record["steps"]
        assert lookup["ok"] and add["ok"], (client, record["steps"])
        assert lookup["value"]["structuredContent"] == {
            "id": 9007199254740991,
            "city": "Z\u00fcrich \u2713",
            "balance": 12.5,
        }
        assert lookup["value"]["_meta"]["dev.mcp-normalizer/original-values"] == {"/name": None}
        assert add["value"]["structuredContent"] == {"result": 9007199254740989}


@pytest.mark.anyio
async def test_the_fault_corpus_from_stdio_servers_is_accepted_as_over_http() -> None:
    """Each public case served by its own stdio server behind its own proxy, with the defaults:
    the same acceptance as the HTTP proxy's (tests/test_corpus.py), every value kept."""
    cases = [case for case in load_cases() if case.get("tool")]
    plans = [{"tools": [case["tool"]], "results": {case["tool"]["name"]: case["result"]}} for case in cases]
    with ExitStack() as stack:
        urls = [stack.enter_context(stdio_proxy(fixture(plan))) + "/mcp" for plan in plans]
        sessions = [{"url": url, "steps": steps(case)} for url, case in zip(urls, cases, strict=True)]
        through: dict[str, list[dict[str, Any]]] = {}

        async def node(name: str, sdk: str) -> None:
            through[name] = await run_node(sdk, sessions, timeout=600)

        async def python() -> None:
            through["python"] = [await run_python(url, steps(c)) for url, c in zip(urls, cases, strict=True)]

        async with anyio.create_task_group() as tg:
            tg.start_soon(node, "ts-sdk-1", "v1")
            tg.start_soon(node, "ts-client-2", "v2")
            tg.start_soon(python)
    ordered = {name: through[name] for name in ("ts-sdk-1", "ts-client-2", "python")}
    check(cases, ordered, {case["id"] for case in cases} - UNREPAIRABLE)
    assert rejected(cases, ordered) == UNREPAIRABLE


# -- sessions: one child each, nothing crosses --------------------------------------------------------


@pytest.mark.anyio
async def test_each_session_has_its_own_child_and_the_servers_requests_reach_their_own_client() -> None:
    """Two sessions using the same ids at once: each gets its own child (pid), its own answers, and
    the server's ``roots/list`` request on its own stream, answered by its own client."""
    plan = plan_with(ask_on="echo", where_on="where")
    plan["tools"].append({"name": "where", "inputSchema": {"type": "object"}})
    with stdio_proxy(fixture(plan)) as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            sessions = [await open_session(http, url) for _ in range(2)]
            wheres = [events(await post(http, url, call(1, "where"), s))[0] for s in sessions]
            pids = {json.loads(w["result"]["content"][0]["text"])["pid"] for w in wheres}
            assert len(pids) == 2

            results: dict[str, Any] = {}

            async def ask(session: str, root: str) -> None:
                headers = {**HEADERS, "mcp-session-id": session}
                async with http.stream("POST", url, content=orjson.dumps(call(2, "echo")), headers=headers) as stream:
                    async for line in stream.aiter_lines():
                        if not line.startswith("data:"):
                            continue
                        message = orjson.loads(line[5:])
                        if message.get("method") == "roots/list":
                            answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"roots": [{"uri": root}]}}
                            assert (await post(http, url, answer, session)).status_code == 202
                        else:
                            results[session] = message

            async with anyio.create_task_group() as tg:
                tg.start_soon(ask, sessions[0], "file:///a/\u00e9")
                tg.start_soon(ask, sessions[1], "file:///b")
    assert results[sessions[0]]["result"]["content"][0]["text"] == "roots: file:///a/\u00e9"
    assert results[sessions[1]]["result"]["content"][0]["text"] == "roots: file:///b"
    assert results[sessions[0]]["id"] == results[sessions[1]]["id"] == 2


@pytest.mark.anyio
async def test_progress_reaches_the_client_before_the_result_exists() -> None:
    plan = plan_with(progress_on="echo")
    with stdio_proxy(fixture(plan)) as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            session = await open_session(http, url)
            request = call(5, "echo", _meta={"progressToken": "t\u00e9"})
            headers = {**HEADERS, "mcp-session-id": session}
            seen: list[Any] = []
            async with http.stream("POST", url, content=orjson.dumps(request), headers=headers) as stream:
                async for line in stream.aiter_lines():
                    if line.startswith("data:"):
                        seen.append(orjson.loads(line[5:]))
                        if seen[-1].get("method") == "notifications/progress":  # the result does not exist yet
                            release = {"jsonrpc": "2.0", "method": "notifications/release"}
                            assert (await post(http, url, release, session)).status_code == 202
    assert [m.get("method") for m in seen] == ["notifications/progress", None]
    assert seen[0]["params"]["progressToken"] == "t\u00e9" and seen[0]["params"]["message"] == "half way: 12.50 \u2713"
    assert seen[1] == {"jsonrpc": "2.0", "id": 5, "result": {"content": [{"type": "text", "text": "released"}]}}


@pytest.mark.anyio
async def test_a_batch_is_answered_whole_as_sse_and_as_json() -> None:
    plan = plan_with()
    with stdio_proxy(fixture(plan)) as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            session = await open_session(http, url)
            batch = [call("a", "echo"), {"jsonrpc": "2.0", "method": "notifications/x"}, call(2**70, "echo")]
            sse = events(await post(http, url, batch, session))
            headers = {"content-type": "application/json", "accept": "application/json", "mcp-session-id": session}
            plain = await http.post(url, content=dumps(batch), headers=headers)
    assert sorted(str(m["id"]) for m in sse) == sorted(["a", str(2**70)])
    assert plain.headers["content-type"] == "application/json"
    answered = loads(plain.content)
    assert isinstance(answered, list) and sorted(str(m["id"]) for m in answered) == sorted(["a", str(2**70)])
    assert all(m["result"]["content"][0]["text"] == "caf\u00e9 \u2713 12.50 1e-3" for m in answered)


@pytest.mark.anyio
async def test_the_stateless_era_shares_one_child_and_keeps_clients_ids_and_tokens_apart(tmp_path: Path) -> None:
    """2026-07-28: no sessions. Two clients send the same id and progress token at once; each gets
    its own answer under its own id; the Python SDK's stateless client works; a closed stream
    cancels its request at the child."""
    log = tmp_path / "log.jsonl"
    plan = plan_with(progress_on="echo", silent_on="protean.list_runtimes")
    plan["tools"].append({"name": "hello", "inputSchema": {"type": "object"}})
    plan["results"]["hello"] = {"content": [{"type": "text", "text": "h\u00e9llo 1.50"}]}
    modern = {**HEADERS, "mcp-protocol-version": "2026-07-28"}
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    with stdio_proxy(fixture(plan)) as px, running_log(log):
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            seen: dict[int, list[Any]] = {0: [], 1: []}

            async def client(n: int) -> None:
                request = call(7, "echo", _meta={**meta, "progressToken": 7})
                async with http.stream("POST", url, content=orjson.dumps(request), headers=modern) as stream:
                    async for line in stream.aiter_lines():
                        if line.startswith("data:"):
                            seen[n].append(orjson.loads(line[5:]))
                            if len(seen[0]) == len(seen[1]) == 1:  # both progressed: let both finish
                                release = call(99, "release", _meta=meta)
                                await http.post(url, content=orjson.dumps(release), headers=modern)

            async with anyio.create_task_group() as tg:
                tg.start_soon(client, 0)
                tg.start_soon(client, 1)
            with anyio.move_on_after(1):  # a call never answered, abandoned by its client
                await http.post(url, content=orjson.dumps(call(8, "protean.list_runtimes", _meta=meta)), headers=modern)
        python = await run_python(url, [{"op": "callTool", "name": "hello", "arguments": {}}], mode="2026-07-28")
        with anyio.fail_after(10):
            while "cancelled:" not in log.read_text(encoding="utf-8"):
                await anyio.sleep(0.05)
    for n in (0, 1):
        progress, result = seen[n]
        assert progress["params"]["progressToken"] == 7 and result["id"] == 7, seen
        assert result["result"]["content"][0]["text"] == "released"
    assert python["steps"][0]["ok"], python
    assert python["steps"][0]["value"]["content"][0]["text"] == "h\u00e9llo 1.50"
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert sum("started" in line.get("message", "") for line in lines) == 1  # one shared child


@pytest.mark.anyio
async def test_stateless_clients_never_see_or_steer_each_others_requests(tmp_path: Path) -> None:
    """On the shared child: A's progress (A reads JSON) never reaches B's open stream, B cannot
    cancel A's request with a notification, and B reading nothing never holds A up."""
    log = tmp_path / "log.jsonl"
    plan = plan_with(progress_on="echo", flood_on="protean.list_runtimes", flood=400, flood_bytes=64 * 1024)
    modern = {**HEADERS, "mcp-protocol-version": "2026-07-28"}
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    with stdio_proxy(fixture(plan), max_message_bytes=1024 * 1024) as px, running_log(log):
        url = px + "/mcp"
        host, port = px.removeprefix("http://").split(":")
        async with httpx.AsyncClient(timeout=30) as http:
            b_seen: list[Any] = []
            json_only = {**modern, "accept": "application/json"}

            async def b_waits() -> None:  # B: an open SSE stream of its own
                request = call(1, "echo", _meta={**meta, "progressToken": "b"})
                async with http.stream("POST", url, content=dumps(request), headers=modern) as stream:
                    async for line in stream.aiter_lines():
                        if line.startswith("data:"):
                            b_seen.append(loads(line[5:]))  # noqa: PERF401 - seen as they come

            async with anyio.create_task_group() as tg:
                tg.start_soon(b_waits)
                while not b_seen:
                    await anyio.sleep(0.01)
                # A, JSON only, with a progress token: its progress must go nowhere but to A
                a_call = http.post(
                    url, content=dumps(call(2, "echo", _meta={**meta, "progressToken": "a"})), headers=json_only
                )
                async with anyio.create_task_group() as inner:
                    answered: list[httpx.Response] = []

                    async def a() -> None:
                        answered.append(await a_call)

                    inner.start_soon(a)
                    await anyio.sleep(0.5)
                    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
                    refused = await http.post(url, content=dumps(cancel), headers=modern)
                    # C: floods without reading a byte (a raw socket), while D calls
                    flood = dumps(call(3, "protean.list_runtimes", _meta={**meta, "progressToken": "c"}))
                    head = (
                        f"POST /mcp HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n"
                        f"accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n"
                        f"content-length: {len(flood)}\r\n\r\n"
                    ).encode()
                    stalled = await anyio.connect_tcp(host, int(port))
                    await stalled.send(head + flood)
                    await anyio.sleep(0.5)
                    d = await http.post(url, content=dumps(call(4, "release", _meta=meta)), headers=modern)
                    await stalled.aclose()
    assert refused.status_code == 202
    assert [m.get("method") for m in b_seen] == ["notifications/progress", None]  # its own progress only
    assert b_seen[0]["params"]["progressToken"] == "b" and b_seen[1]["id"] == 1
    (a_answer,) = answered
    assert loads(a_answer.content)["id"] == 2 and loads(a_answer.content)["result"]["content"][0]["text"] == "released"
    assert events(d)[0]["id"] == 4  # not held up by C
    assert '"stderr":"cancelled: 1"' not in log.read_text(encoding="utf-8")  # B's notification went nowhere


@contextmanager
def warnings_into() -> Iterator[io.StringIO]:
    """The ``mcp_normalizer`` warnings of this process, as text, while the block runs."""
    import logging

    text = io.StringIO()
    handler = logging.StreamHandler(text)
    handler.setLevel(logging.WARNING)
    target = logging.getLogger("mcp_normalizer")
    target.addHandler(handler)
    try:
        yield text
    finally:
        target.removeHandler(handler)


@contextmanager
def running_log(path: Path) -> Iterator[None]:
    """The ``mcp_normalizer`` log of this process into ``path`` (JSON lines) while the block runs."""
    import logging

    from mcp_normalizer.ops.logs import JSONFormatter

    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(JSONFormatter())
    target = logging.getLogger("mcp_normalizer")
    level = target.level
    target.addHandler(handler)
    target.setLevel(logging.INFO)
    try:
        yield
    finally:
        target.removeHandler(handler)
        target.setLevel(level)
        handler.close()


# -- faults of the child ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_crash_mid_call_answers_the_pending_requests_and_the_next_session_gets_a_new_child(
    tmp_path: Path,
) -> None:
    plan = plan_with(crash_on="protean.list_runtimes", crash_status=3, silent_on="echo")
    with stdio_proxy(fixture(plan)) as px, running_log(tmp_path / "log.jsonl"):
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            session = await open_session(http, url)
            answered: list[Any] = []

            async def silent() -> None:
                answered.extend(events(await post(http, url, call(1, "echo"), session)))

            async with anyio.create_task_group() as tg:
                tg.start_soon(silent)
                await anyio.sleep(0.2)
                answered.extend(events(await post(http, url, call(2, "protean.list_runtimes"), session)))
            gone = await post(http, url, call(3, "echo"), session)
            again = await open_session(http, url)
            works = events(await post(http, url, {"jsonrpc": "2.0", "id": 4, "method": "ping"}, again))
    assert sorted(m["id"] for m in answered) == [1, 2]
    assert all(m["error"]["code"] == -32603 and "status 3" in m["error"]["message"] for m in answered)
    assert gone.status_code == 404 and gone.json()["error"]["message"] == "Session not found"
    assert works == [{"jsonrpc": "2.0", "id": 4, "result": {}}]
    log = (tmp_path / "log.jsonl").read_text(encoding="utf-8")
    assert "exited with status 3" in log


@pytest.mark.anyio
async def test_a_child_that_crashes_in_a_loop_backs_off_with_503() -> None:
    crashing = [sys.executable, "-c", "import sys; sys.stderr.write('no config\\n'); sys.exit(4)"]
    with stdio_proxy(crashing) as px, warnings_into() as log_text:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            first = await post(http, url, INIT)
            second = await post(http, url, INIT)
            third = await post(http, url, INIT)
            ready = await http.get(px + "/.mcp-normalizer/readyz")
            metrics = (await http.get(px + "/.mcp-normalizer/metrics")).text
    for response in (first, second):
        (error,) = events(response)
        assert error["id"] == 0 and "status 4" in error["error"]["message"]
    assert "its last stderr lines: no config" in log_text.getvalue()  # why, at warning level too
    assert third.status_code == 503 and int(third.headers["retry-after"]) >= 1
    assert "failed to start 2 times in a row" in third.json()["error"]["message"]
    assert ready.status_code == 503
    assert 'mcp_normalizer_upstream_errors_total{kind="exit"} 2.0' in metrics
    assert 'mcp_normalizer_upstream_errors_total{kind="backoff"} 1.0' in metrics
    assert "mcp_normalizer_stdio_children 0.0" in metrics


@pytest.mark.anyio
async def test_stdout_noise_and_an_oversized_line_never_reach_a_client(tmp_path: Path) -> None:
    noise = ["Server listening (stdio)...", '{"level":"info","msg":"pino says hi"}', "DEBUG {not json"]
    plan = plan_with(noise=noise, big_tool="protean.list_runtimes", big=50 * 1024 * 1024)
    with stdio_proxy(fixture(plan)) as px, running_log(tmp_path / "log.jsonl"):
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=60) as http:
            session = await open_session(http, url)
            big = await post(http, url, call(1, "protean.list_runtimes"), session)
            after = await post(http, url, call(2, "echo"), session)
    (refused,) = events(big)
    assert refused["id"] == 1 and "max_message_bytes" in refused["error"]["message"]
    assert len(big.content) < 4096  # never held, never relayed
    (fine,) = events(after)
    assert fine["result"]["content"][0]["text"] == "caf\u00e9 \u2713 12.50 1e-3"
    lines = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [line["stdout"] for line in lines if "stdout" in line][:3] == noise


@pytest.mark.anyio
async def test_a_client_that_does_not_read_stops_the_child_and_then_gets_everything_in_order(
    tmp_path: Path,
) -> None:
    """A call whose server writes 50 MB of progress as fast as it can: while the client reads
    nothing the child is held at its own writes (it never gets to say ``flooded``), so the proxy
    holds only its small queue; then the client reads every notification, in order, and the result."""
    log = tmp_path / "log.jsonl"
    plan = plan_with(flood_on="echo", flood=200, flood_bytes=256 * 1024)
    with stdio_proxy(fixture(plan)) as px, running_log(log):
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=60) as http:
            session = await open_session(http, url)
            request = call(1, "echo", _meta={"progressToken": "f"})
            headers = {**HEADERS, "mcp-session-id": session}
            async with http.stream("POST", url, content=dumps(request), headers=headers) as stream:
                await anyio.sleep(3)  # the client reads nothing meanwhile
                held = "flooded" in log.read_text(encoding="utf-8")
                seen = [
                    loads(line[5:]) for line in [line async for line in stream.aiter_lines()] if line[:5] == "data:"
                ]
    assert not held  # the child could not write it all: nothing piled up in the proxy
    assert [m["params"]["progress"] for m in seen[:-1]] == list(range(200))
    assert all(m["params"]["message"].startswith(f"{i} \u00e9\u00e9") for i, m in enumerate(seen[:-1]))
    assert seen[-1]["result"]["content"][0]["text"] == "flood done"


@pytest.mark.anyio
async def test_a_child_that_never_answers_gets_an_error_after_the_idle_timeout() -> None:
    plan = plan_with(silent_on="echo")
    with stdio_proxy(fixture(plan), idle_timeout=1) as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            session = await open_session(http, url)
            (error,) = events(await post(http, url, call("q\u00e9", "echo"), session))
            deleted = await http.delete(url, headers={"mcp-session-id": session})
            after = await post(http, url, call(2, "echo"), session)
    assert error["id"] == "q\u00e9" and "idle_timeout" in error["error"]["message"]
    assert deleted.status_code == 200 and after.status_code == 404


@pytest.mark.anyio
async def test_a_server_gets_no_descriptor_of_the_proxy_and_its_helpers_end_with_it() -> None:
    """The child holds its three pipes and nothing else (never the proxy's listening socket). A
    helper it started that keeps its stdout open does not keep its session's slot or outlive it."""
    plan = plan_with(where_on="where")
    plan["tools"].append({"name": "where", "inputSchema": {"type": "object"}})
    script = "sleep 317 & exec " + shlex.join(fixture(plan))
    with stdio_proxy(["sh", "-c", script], max_children=1) as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            session = await open_session(http, url)
            (where,) = events(await post(http, url, call(1, "where"), session))
            deleted = await http.delete(url, headers={"mcp-session-id": session})
            with anyio.fail_after(20):
                while any("sleep 317" in cmdline for cmdline in cmdlines()):
                    await anyio.sleep(0.05)
                again = await post(http, url, INIT)
                while again.status_code == 503:  # (the slot frees once its server is reaped)
                    await anyio.sleep(0.05)
                    again = await post(http, url, INIT)
    fds = json.loads(where["result"]["content"][0]["text"])["fds"]
    assert sorted(fds) == ["0", "1", "2"] and all(link.startswith("pipe:") for link in fds.values()), fds
    assert deleted.status_code == 200 and again.status_code == 200


def cmdlines() -> list[str]:
    """The command lines of the processes running now."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue
    return found


@pytest.mark.anyio
async def test_a_server_that_closes_stdout_but_runs_on_is_stopped_and_its_request_answered() -> None:
    plan = plan_with(close_stdout_on="echo")
    with stdio_proxy(fixture(plan), graceful_shutdown=0.5) as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            session = await open_session(http, url)
            (error,) = events(await post(http, url, call(1, "echo"), session))
            gone = await post(http, url, call(2, "echo"), session)
    assert error["id"] == 1 and "exited" in error["error"]["message"]
    assert gone.status_code == 404


@pytest.mark.anyio
async def test_max_children_holds_under_concurrent_initializes_and_one_sessions_crash_backs_no_one_off() -> None:
    plan = plan_with(crash_on="protean.list_runtimes")
    with stdio_proxy(fixture(plan), max_children=2) as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            started: list[httpx.Response] = []

            async def start() -> None:
                started.append(await post(http, url, INIT))

            async with anyio.create_task_group() as tg:
                for _ in range(12):
                    tg.start_soon(start)
            # Each new session past the limit ends the longest-idle one's server (never one whose
            # initialize is still being answered): at most two ever run; every start is answered.
            assert {r.status_code for r in started} <= {200, 503} and [r.status_code for r in started].count(200) >= 2
            gauge = (await http.get(px + "/.mcp-normalizer/metrics")).text
            assert "mcp_normalizer_stdio_children 2.0" in gauge or "mcp_normalizer_stdio_children 1.0" in gauge
            for response in started:
                if response.status_code == 200:
                    await http.delete(url, headers={"mcp-session-id": response.headers["mcp-session-id"]})
            with anyio.fail_after(20):  # (their servers are stopped, then reaped)
                while (await http.get(px + "/.mcp-normalizer/metrics")).text.count(
                    "mcp_normalizer_stdio_children 0.0"
                ) == 0:
                    await anyio.sleep(0.05)
            for _ in range(3):  # a call that crashes its own server, again and again
                session = await open_session(http, url)
                (crashed,) = events(await post(http, url, call(1, "protean.list_runtimes"), session))
                assert "exited" in crashed["error"]["message"]
            fresh = await post(http, url, INIT)
            ready = await http.get(px + "/.mcp-normalizer/readyz")
    assert fresh.status_code == 200 and ready.status_code == 200


@pytest.mark.anyio
async def test_an_unreadable_response_is_answered_at_once_and_a_huge_number_reaches_the_server() -> None:
    plan = plan_with(nan_on="echo")
    plan["tools"].append({"name": "sum", "inputSchema": {"type": "object"}})
    plan["results"]["sum"] = {"content": [{"type": "text", "text": "summed"}]}
    with stdio_proxy(fixture(plan)) as px:  # idle_timeout stays 300 s: an answer now is no timeout's
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            session = await open_session(http, url)
            (error,) = events(await post(http, url, call(1, "echo"), session))
            body = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sum","arguments":{"x":1e400}}}'
            huge = await http.post(url, content=body, headers={**HEADERS, "mcp-session-id": session})
    assert error["id"] == 1 and "not valid JSON" in error["error"]["message"]
    assert huge.status_code == 200 and events(huge)[0]["result"]["content"][0]["text"] == "summed"


def proxy_children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def test_sigterm_to_the_proxy_stops_every_child_even_one_that_ignores_sigterm(tmp_path: Path) -> None:
    """The command's own form (``-- CMD ARGS``, the env and cwd flags): each session's child runs
    with them; SIGTERM to the proxy ends them all, the stubborn one by SIGKILL; none is left."""
    plan = plan_with(ignore_term=True, where_on="echo")
    port = free_port()
    argv = [EXE, "--port", str(port), "--upstream-env", "FIXTURE_NOTE=n\u00e9", "--upstream-cwd", str(tmp_path)]
    env = {"MCP_NORMALIZER_GRACEFUL_SHUTDOWN": "0.5"}
    with running([*argv, "--", *fixture(plan)], port, env) as log:
        with httpx.Client(timeout=30) as http:
            url = f"http://127.0.0.1:{port}/mcp"
            sessions = []
            for _ in range(2):
                response = http.post(url, content=orjson.dumps(INIT), headers=HEADERS)
                sessions.append(response.headers["mcp-session-id"])
            where = [
                events(http.post(url, content=orjson.dumps(call(1, "echo")), headers={**HEADERS, "mcp-session-id": s}))
                for s in sessions
            ]
    found = [json.loads(w[0]["result"]["content"][0]["text"]) for w in where]
    assert {f["note"] for f in found} == {"n\u00e9"} and {f["cwd"] for f in found} == {str(tmp_path)}
    for pid in (f["pid"] for f in found):
        assert not Path(f"/proc/{pid}").exists()  # gone, and reaped: no zombie left
    text = "\n".join(log)
    assert "SIGTERM" in text and "SIGKILL" in text


#: The proxy's own variables with secrets in them (issue 37): none may reach the server it starts.
SECRETS = {
    "MCP_NORMALIZER_STATE_URL": "redis://:s3cret-password@127.0.0.1:1/0",
    "MCP_NORMALIZER_STATE_SECRET": "s3cret-key",
    "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer s3cret-token",
    "OTEL_SERVICE_NAME": "the-server",
    "FIXTURE_API_KEY": "the server's own key",  # (what operators pass through the container's env)
}


def c_locale(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's locale variables removed, so the processes it starts run in the C locale:
    the interpreter then coerces its own to UTF-8 (PEP 538) and sets ``LC_CTYPE`` in its environment."""
    for name in ("LC_ALL", "LC_CTYPE", "LANG"):
        monkeypatch.delenv(name, raising=False)


def started_with(port: int) -> dict[str, str]:
    """The environment the stdio server behind the proxy on ``port`` was started with."""
    with httpx.Client(timeout=30) as http:
        url = f"http://127.0.0.1:{port}/mcp"
        session = http.post(url, content=orjson.dumps(INIT), headers=HEADERS).headers["mcp-session-id"]
        answer = http.post(url, content=orjson.dumps(call(1, "echo")), headers={**HEADERS, "mcp-session-id": session})
    environ: dict[str, str] = json.loads(events(answer)[0]["result"]["content"][0]["text"])["environ"]
    return environ


def test_the_server_gets_the_proxys_environment_less_the_proxys_own_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 37: the stdio server inherited the state store's password, the state secret and the
    collector's token, and an ``LC_CTYPE`` nobody set. It gets the rest of the environment, what
    ``--upstream-env`` sets (a value with a comma too) and what it passes through by name."""
    c_locale(monkeypatch)
    plan = plan_with(where_on="echo")
    port = free_port()
    flags = ["--upstream-env", "FIXTURE_NOTE=a,b", "--upstream-env", "OTEL_SERVICE_NAME"]
    with running([EXE, "--port", str(port), *flags, "--", *fixture(plan)], port, SECRETS):
        environ = started_with(port)
    assert "s3cret" not in json.dumps(environ)
    assert {name for name in environ if name.startswith(("MCP_NORMALIZER_", "OTEL_"))} == {"OTEL_SERVICE_NAME"}
    assert environ["OTEL_SERVICE_NAME"] == "the-server" and environ["FIXTURE_NOTE"] == "a,b"
    assert environ["FIXTURE_API_KEY"] == "the server's own key" and environ["PATH"] == os.environ["PATH"]
    assert not {"LC_CTYPE", "LC_ALL", "LANG"} & set(environ)  # the proxy's UTF-8 is its own


@pytest.mark.parametrize(
    "variable",
    [
        '{"FIXTURE_NOTE": "a,b=c", "OTEL_SERVICE_NAME": null}',
        "FIXTURE_NOTE=a,b=c\n  OTEL_SERVICE_NAME\n\n",
    ],
)
def test_mcp_normalizer_upstream_env_carries_a_value_with_a_comma(variable: str) -> None:
    """Issue 37: the variable split every value at its commas. As a JSON object or one item per
    line, a value keeps them (and a name alone, or ``null``, passes the proxy's variable through)."""
    plan = plan_with(where_on="echo")
    port = free_port()
    with running(
        [EXE, "--port", str(port), "--", *fixture(plan)], port, {**SECRETS, "MCP_NORMALIZER_UPSTREAM_ENV": variable}
    ):
        environ = started_with(port)
    assert environ["FIXTURE_NOTE"] == "a,b=c" and environ["OTEL_SERVICE_NAME"] == "the-server"
    assert "s3cret" not in json.dumps(environ) and "MCP_NORMALIZER_UPSTREAM_ENV" not in environ


def test_the_three_forms_of_mcp_normalizer_upstream_env() -> None:
    from mcp_normalizer.keys import env_list

    assert env_list("A=1, B=", "V") == ["A=1", "B="]  # the first form, unchanged
    assert env_list("A=x,y\n", "V") == ["A=x,y"]  # one line: a trailing newline says so
    assert env_list("A=x,y\r\n\n  PASSED  \n", "V") == ["A=x,y", "PASSED"]
    assert env_list('{"A": "x,y", "PASSED": null, "E": ""}', "V") == ["A=x,y", "PASSED", "E="]


def test_an_upstream_env_that_cannot_be_read_is_named() -> None:
    from .support import run_cli

    for value, said in (
        ("FIXTURE_NOTE=a,b", "'b' is not NAME=VALUE"),  # a comma in a value: the other forms say it
        ('{"FIXTURE_NOTE": 1}', "JSON object of names and string values"),
        ('{"FIXTURE_NOTE": ', "not a JSON object"),
        ("=nameless\nA=1", "'=nameless' is not NAME=VALUE or NAME"),
        ('{"A=B": "x"}', "not a variable name"),
    ):
        done = run_cli("--", "true", env={"MCP_NORMALIZER_UPSTREAM_ENV": value})
        assert done.returncode == 2 and "UPSTREAM_ENV" in done.stderr.upper() and said in done.stderr, done.stderr


def test_as_pid_1_the_proxy_reaps_what_a_server_leaves_behind_and_keeps_its_servers_own_status(
    tmp_path: Path,
) -> None:
    """Issue 37: in a container with no init the proxy is PID 1, the parent of every process a
    server's helper leaves behind; a helper that exited stayed a zombie. The proxy runs here as PID 1
    of a new PID namespace, in front of a server whose call leaves a grandchild that exits: it is
    reaped. The server's own exit status still reaches its waiter (status 3, not a reaper's)."""
    from .test_image import as_pid_1, wait_until

    prefix = as_pid_1()
    if not prefix:
        pytest.skip("unshare cannot make a PID namespace on this machine (no unshare, or not allowed)")
    plan = plan_with(orphan_on="echo", crash_on="protean.list_runtimes", crash_status=3)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_NORMALIZER_")}
    with (tmp_path / "log").open("wb") as err:
        process = subprocess.Popen(
            [*prefix, EXE, "--port", str(port), "--", *fixture(plan)], stdout=err, stderr=err, env=env
        )
    try:
        wait_until(lambda: listening(port), "the proxy listened", process)
        (proxy,) = proxy_children(process.pid)  # the namespace's PID 1
        assert ns_pid(proxy) == 1
        with httpx.Client(timeout=30) as http:
            url = f"http://127.0.0.1:{port}/mcp"
            session = http.post(url, content=orjson.dumps(INIT), headers=HEADERS).headers["mcp-session-id"]
            headers = {**HEADERS, "mcp-session-id": session}
            answer = events(http.post(url, content=orjson.dumps(call(1, "echo")), headers=headers))
            left = int(answer[0]["result"]["content"][0]["text"])  # exited: its end of the pipe is closed

            def reaped() -> bool:
                return all(ns_pid(pid) != left for pid in proxy_children(proxy))

            wait_until(reaped, "the process the server left behind was reaped (it stayed a zombie)", process)
            crashed = events(http.post(url, content=orjson.dumps(call(2, "protean.list_runtimes")), headers=headers))
        assert "status 3" in crashed[0]["error"]["message"], crashed
    finally:
        with suppress(ValueError, OSError):
            (proxy,) = proxy_children(process.pid)
            os.kill(proxy, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()  # (--kill-child takes the proxy along)
            process.wait()
    assert process.returncode == 0, (tmp_path / "log").read_text()


def test_the_rule_file_and_the_environment_name_the_command_and_bad_settings_are_named(tmp_path: Path) -> None:
    from .support import run_cli

    plan = plan_with()
    rules = tmp_path / "rules.toml"
    rules.write_text(f"[proxy]\nupstream_cmd = {json.dumps(shlex.join(fixture(plan)))}\n", encoding="utf-8")
    for how in ({"MCP_NORMALIZER_CONFIG": str(rules)}, {"MCP_NORMALIZER_UPSTREAM_CMD": shlex.join(fixture(plan))}):
        port = free_port()
        with running([EXE, "--port", str(port)], port, how), httpx.Client(timeout=30) as http:
            response = http.post(f"http://127.0.0.1:{port}/mcp", content=orjson.dumps(INIT), headers=HEADERS)
            assert events(response)[0]["result"]["serverInfo"]["name"] == "stdio-fixture", how
    both = run_cli("--upstream", "http://127.0.0.1:1/mcp", "--", "true")
    neither = run_cli()
    twice = run_cli("--upstream-cmd", "true", "--", "true")
    quoted = run_cli("--upstream-cmd", "node 'unclosed")
    workers = run_cli("--workers", "2", "--", "true")
    env = run_cli("--upstream-env", "=VALUE", "--", "true")
    missing = run_cli("--", "nosuchcmd-xyz", "arg")
    for done, words in (
        (both, "both an upstream URL and an upstream command"),
        (neither, "no upstream"),
        (twice, "once"),
        (quoted, "upstream_cmd"),
        (workers, "workers must be 1"),
        (env, "NAME=VALUE"),
        (missing, "'nosuchcmd-xyz' is not found on PATH"),
    ):
        assert done.returncode == 2 and words in done.stderr, (words, done.stderr)


@pytest.mark.anyio
async def test_refusals_name_what_is_wrong() -> None:
    plan = plan_with()
    with stdio_proxy(fixture(plan), max_children=1) as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            no_session = await post(http, url, call(1, "echo"))
            unknown = await post(http, url, call(1, "echo"), "nope")
            session = await open_session(http, url)
            listen = {"accept": "text/event-stream", "mcp-session-id": session}
            async with http.stream("GET", url, headers=listen):  # its one session is in use
                full = await post(http, url, INIT)
            not_json = await http.post(url, content=b"{nope", headers={**HEADERS, "mcp-session-id": session})
            bad_id = await post(http, url, {"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, session)
            get_without = await http.get(url, headers={"accept": "text/event-stream"})
            other_path = await post(http, px + "/elsewhere", INIT)
    assert no_session.status_code == 400 and "Mcp-Session-Id" in no_session.json()["error"]["message"]
    assert unknown.status_code == 404
    assert full.status_code == 503 and "max_children" in full.json()["error"]["message"]
    assert not_json.status_code == 400 and not_json.json()["error"]["code"] == -32700
    assert bad_id.status_code == 400
    assert get_without.status_code == 405
    assert other_path.status_code == 404


@pytest.mark.anyio
async def test_a_get_stream_carries_what_the_server_says_outside_any_request() -> None:
    """A notification no request owns (progress for no token the client sent) goes on the
    session's GET stream, not on the call's; one GET stream per session."""
    plan = plan_with(progress_on="echo")
    with stdio_proxy(fixture(plan)) as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            session = await open_session(http, url)
            headers = {"accept": "text/event-stream", "mcp-session-id": session}
            result: list[Any] = []
            async with http.stream("GET", url, headers=headers) as stream:
                assert stream.status_code == 200
                second = await http.get(url, headers=headers)
                async with anyio.create_task_group() as tg:

                    async def the_call() -> None:
                        result.extend(events(await post(http, url, call(3, "echo"), session)))

                    tg.start_soon(the_call)
                    lines = stream.aiter_lines()
                    line = await anext(lines)
                    while not line.startswith("data:"):
                        line = await anext(lines)
                    unowned = orjson.loads(line[5:])
                    release = {"jsonrpc": "2.0", "method": "notifications/release"}
                    assert (await post(http, url, release, session)).status_code == 202
    assert second.status_code == 409
    assert unowned["method"] == "notifications/progress" and unowned["params"]["progressToken"] is None
    assert [m["id"] for m in result] == [3]  # the call's own stream: its result only


@pytest.mark.anyio
async def test_a_get_stream_that_reads_nothing_is_cut_and_the_session_goes_on() -> None:
    """The session's GET stream takes no bytes while the server floods it: after ``send_timeout``
    the stream is cut, and the session's calls are answered again."""
    plan = plan_with(flood_on="protean.list_runtimes", flood=300, flood_bytes=64 * 1024)
    with stdio_proxy(fixture(plan), send_timeout=1) as px:
        url = px + "/mcp"
        host, port = px.removeprefix("http://").split(":")
        async with httpx.AsyncClient(timeout=60) as http:
            session = await open_session(http, url)
            stalled = await anyio.connect_tcp(host, int(port))
            await stalled.send(
                f"GET /mcp HTTP/1.1\r\nhost: {host}:{port}\r\naccept: text/event-stream\r\n"
                f"mcp-session-id: {session}\r\n\r\n".encode()
            )
            json_only = {"content-type": "application/json", "accept": "application/json", "mcp-session-id": session}
            flooded = await http.post(url, content=dumps(call(1, "protean.list_runtimes")), headers=json_only)
            ping = await post(http, url, {"jsonrpc": "2.0", "id": 2, "method": "ping"}, session)
            await stalled.aclose()
    assert loads(flooded.content)["result"]["content"][0]["text"] == "flood done"
    assert events(ping) == [{"jsonrpc": "2.0", "id": 2, "result": {}}]


@pytest.mark.anyio
async def test_what_waits_for_a_get_stream_is_handed_over_whole_again_and_again() -> None:
    """Messages no request owns wait for the GET stream; each GET takes all that waited, and the
    next ones wait afresh (the bound is on what waits now, not on all that ever waited)."""
    plan = plan_with(flood_on="protean.list_runtimes", flood=100, flood_bytes=64 * 1024)
    with stdio_proxy(fixture(plan)) as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=60) as http:
            session = await open_session(http, url)
            json_only = {"content-type": "application/json", "accept": "application/json", "mcp-session-id": session}
            got: list[list[Any]] = []
            announced: list[Any] = []
            for round_ in range(3):  # 6.4 MB each round, 19 MB in all: more than the 16 MiB bound (child_buffer_bytes)
                flooded = await http.post(url, content=dumps(call(round_, "protean.list_runtimes")), headers=json_only)
                assert loads(flooded.content)["result"]["content"][0]["text"] == "flood done"
                seen: list[Any] = []
                headers = {"accept": "text/event-stream", "mcp-session-id": session}
                async with http.stream("GET", url, headers=headers) as stream:
                    async for line in stream.aiter_lines():
                        if not line.startswith("data:"):
                            continue
                        message = loads(line[5:])
                        if message.get("method") == "notifications/tools/list_changed":
                            # the proxy's own: the result without structuredContent taught it to drop
                            # the outputSchema, and a GET stream open when that lands is told
                            announced.append(message)
                            continue
                        seen.append(message)
                        if len(seen) == 100:
                            break
                got.append(seen)
            ping = await post(http, url, {"jsonrpc": "2.0", "id": "p", "method": "ping"}, session)
    assert announced in ([], [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}])
    for seen in got:
        assert [m["params"]["progress"] for m in seen] == list(range(100))
        assert all(m["params"]["message"].startswith(f"{i} \u00e9") for i, m in enumerate(seen))
    assert events(ping) == [{"jsonrpc": "2.0", "id": "p", "result": {}}]
