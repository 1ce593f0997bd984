"""``mcp-normalizer stdio -- CMD ARGS...`` (issue 24, section 2): real stdio servers behind the
wrapper, driven by the SDKs' own stdio client transports (TS SDK 1.x, TS client 2.x, Python ``mcp``)
and by raw lines where a fault of the child must be staged exactly (:mod:`tests.stdio_server`).
"""

from __future__ import annotations

import contextlib
import copy
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.demo.upstream import RUNTIMES, protean_tools

from .support import EXE, ROOT, each_client, load_cases, proxy_for, serve, steps
from .test_corpus import UNREPAIRABLE, check, rejected
from .test_everything_wire import CALLS, DRAFT_07, EVERYTHING, KEPT, STEPS, answers

pytestmark = pytest.mark.wire

FIXTURE = str(Path(__file__).with_name("stdio_server.py"))


def fixture(plan: dict[str, Any]) -> list[str]:
    """The argv of :mod:`tests.stdio_server` serving ``plan``."""
    return [sys.executable, FIXTURE, json.dumps(plan)]


def wrapped(command: Sequence[str], log: Path, *flags: str) -> list[str]:
    """``command`` behind the wrapper, its log (level info) in ``log``."""
    return [EXE, "stdio", "--log-file", str(log), "--log-level", "info", *flags, "--", *command]


def log_lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


async def each_stdio_client(command: Sequence[str], steps: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One session of ``steps`` with each strict client, each starting ``command`` itself."""
    session = [{"command": list(command), "steps": list(steps)}]
    return {
        "ts-sdk-1": (await run_node("v1", session))[0],
        "ts-client-2": (await run_node("v2", session))[0],
        "python": await run_python("", steps, command=command),
    }


# -- real servers, real clients -------------------------------------------------------------------


def protean_plan() -> dict[str, Any]:
    (spec,) = (s for s in protean_tools() if s.tool["name"] == "protean.list_runtimes")
    return {"tools": [spec.tool], "results": {"protean.list_runtimes": {"content": [], "structuredContent": RUNTIMES}}}


@pytest.mark.anyio
async def test_the_old_protean_shape_over_stdio_is_repaired_for_every_client(tmp_path: Path) -> None:
    plan = protean_plan()
    plan["results"]["protean.list_runtimes"]["content"] = [{"type": "text", "text": json.dumps(RUNTIMES)}]
    steps = [{"op": "listTools"}, {"op": "callTool", "name": "protean.list_runtimes"}]
    log = tmp_path / "log.jsonl"
    direct = await each_stdio_client(fixture(plan), steps)
    through = await each_stdio_client(wrapped(fixture(plan), log), steps)
    for client, record in direct.items():
        assert not record["steps"][1]["ok"], client  # the null where the schema says string
    for client, record in through.items():
        listed, called = record["steps"]
        assert called["ok"], (client, called)
        assert called["value"]["structuredContent"] == RUNTIMES  # every value, the nulls included
        scope = listed["value"]["tools"][0]["outputSchema"]["properties"]["runtimes"]["items"]["properties"]["scope"]
        assert scope["type"] == ["string", "null"], client
    lines = log_lines(log)
    assert any(line.get("rule") == "nullable" and "intervention" in line.get("reason", "") for line in lines)
    assert any(line.get("message", "").endswith("exited with status 0") for line in lines)


@pytest.mark.anyio
async def test_server_everything_over_stdio_answers_every_client_as_directly(tmp_path: Path) -> None:
    server = ["node", str(EVERYTHING / "index.js"), "stdio"]
    log = tmp_path / "log.jsonl"
    direct = await each_stdio_client(server, STEPS)
    through = await each_stdio_client(wrapped(server, log), STEPS)
    for client, record in through.items():
        assert all(step["ok"] for step in record["steps"]), (client, record)
        assert answers(record) == answers(direct[client]), client  # every result as the server sent it
    for client in ("ts-sdk-1", "ts-client-2"):  # the one repair the HTTP path also makes for them
        tools = {tool["name"]: tool for tool in through[client]["steps"][0]["value"]["tools"]}
        server_tools = {tool["name"]: tool for tool in direct[client]["steps"][0]["value"]["tools"]}
        changed = {name for name in tools if tools[name] != server_tools[name]}
        assert changed == {"get-structured-content"}, client
        restored = copy.deepcopy(tools["get-structured-content"])
        assert restored["_meta"].pop(KEPT) == {"/outputSchema/$schema": DRAFT_07}
        if not restored["_meta"]:
            del restored["_meta"]
        restored["outputSchema"]["$schema"] = DRAFT_07
        assert restored == server_tools["get-structured-content"]  # nothing else changed, nothing lost
    assert through["python"]["steps"][0] == direct["python"]["steps"][0]  # known to accept draft-07
    assert len(CALLS) == len(STEPS) - 1
    stderr = [line["stderr"] for line in log_lines(log) if "stderr" in line]
    assert any("STDIO" in text for text in stderr)  # the server's stderr, in the log, tagged
    assert all(line["server"].startswith("node ") for line in log_lines(log) if "stderr" in line)


# -- faults of the child, on raw lines ----------------------------------------------------------------


def call(rid: int, tool: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool}}) + b"\n"


INITIALIZE = (
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    b'"capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}\n'
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
)


async def raw_session(
    command: Sequence[str], lines: bytes, *, close: bool = True, timeout: float = 60
) -> tuple[list[bytes], int]:
    """Write ``lines`` to ``command`` (then close its stdin when ``close``), read its stdout to the
    end; the lines it wrote and its exit status."""
    async with await anyio.open_process(list(command)) as process:
        assert process.stdin is not None and process.stdout is not None
        await process.stdin.send(lines)
        if close:
            await process.stdin.aclose()
        chunks: list[bytes] = []
        with anyio.fail_after(timeout):
            chunks.extend([chunk async for chunk in process.stdout])
            status = await process.wait()
    return b"".join(chunks).splitlines(), status


def plan_with(**faults: Any) -> dict[str, Any]:
    plan = protean_plan()
    tool = {"name": "echo", "inputSchema": {"type": "object"}}
    plan["tools"].append(tool)
    plan["results"]["echo"] = {"content": [{"type": "text", "text": "caf\u00e9 \u2713 12.50 1e-3"}]}
    plan["faults"] = faults
    return plan


@pytest.mark.anyio
async def test_stdout_noise_is_logged_and_never_reaches_the_host(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    noise = ["Server listening (stdio)...", "\x1b[32mready\x1b[0m", "DEBUG {not json"]
    plan = plan_with(noise=noise, stderr=["warming up \u2603"])
    out, status = await raw_session(wrapped(fixture(plan), log), INITIALIZE + call(1, "echo"))
    messages = [orjson.loads(line) for line in out]  # every line is JSON
    assert [m.get("id") for m in messages] == [0, 1] and status == 0
    assert messages[1]["result"]["content"][0]["text"] == "caf\u00e9 \u2713 12.50 1e-3"
    lines = log_lines(log)
    assert [line["stdout"] for line in lines if "stdout" in line] == noise * 2
    assert [line["stderr"] for line in lines if "stderr" in line] == ["warming up \u2603"]
    assert any("that are not JSON-RPC messages: 6," in line.get("message", "") for line in lines)


@pytest.mark.anyio
async def test_a_crash_mid_call_answers_every_pending_request_and_passes_the_status_on(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    plan = plan_with(crash_on="protean.list_runtimes", crash_status=3, silent_on="echo")
    lines = INITIALIZE + call(1, "echo") + call(2, "protean.list_runtimes")
    out, status = await raw_session(wrapped(fixture(plan), log), lines, close=False)
    messages = [orjson.loads(line) for line in out]  # every line is JSON (never the half-written one)
    by_id = {m.get("id"): m for m in messages if "error" in m}
    assert status == 3
    assert set(by_id) == {1, 2}  # the silent call and the one it died in: both answered
    assert all(m["error"]["code"] == -32603 and "status 3" in m["error"]["message"] for m in by_id.values())


@pytest.mark.anyio
async def test_a_line_above_max_rewrite_bytes_is_relayed_untouched_and_whole(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    big = 20 * 1024 * 1024  # above max_rewrite_bytes (16 MiB), within max_message_bytes (32 MiB)
    plan = plan_with(big_tool="echo", big=big)
    out, status = await raw_session(wrapped(fixture(plan), log), INITIALIZE + call(1, "echo") + call(2, "echo"))
    assert status == 0 and len(out) == 3
    for line in out[1:]:
        message = orjson.loads(line)
        assert message["result"]["content"][1]["text"] == "x" * big
        assert message["result"]["content"][0]["text"] == "caf\u00e9 \u2713 12.50 1e-3"


@pytest.mark.anyio
async def test_only_whole_json_rpc_messages_reach_the_host_and_an_oversized_call_is_refused(tmp_path: Path) -> None:
    """Issue 37: a server line above ``max_message_bytes`` is dropped as it comes and its request
    answered with an error; a line above ``max_rewrite_bytes`` that is no JSON never reaches the
    host; a host call above ``max_request_bytes`` never reaches the server unrenamed: the host
    gets a JSON-RPC error for it, as the HTTP proxy answers 413."""
    log = tmp_path / "log.jsonl"
    broken = "{" + "\u00e9 not json " * 8_000  # 104 KB, starts like a message
    plan = plan_with(big_tool="echo", big=2 * 1024 * 1024, noise=[broken])
    limits = [
        "env",
        "MCP_NORMALIZER_MAX_REWRITE_BYTES=65536",
        "MCP_NORMALIZER_MAX_MESSAGE_BYTES=1048576",
        "MCP_NORMALIZER_MAX_REQUEST_BYTES=65536",
    ]
    huge_call = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": "h\u00e9",
            "method": "tools/call",
            "params": {"name": "protean.list_runtimes", "arguments": {"note": "x" * 100_000}},
        }
    )
    lines = INITIALIZE + call(1, "echo") + huge_call + b"\n" + call(3, "protean.list_runtimes")
    out, status = await raw_session([*limits, *wrapped(fixture(plan), log)], lines)
    messages = [orjson.loads(line) for line in out]  # every line is one whole message
    assert status == 0 and sorted(str(m["id"]) for m in messages) == ["0", "1", "3", "h\u00e9"]
    by_id = {m["id"]: m for m in messages}
    assert by_id[0]["result"]["serverInfo"]["name"] == "stdio-fixture"
    assert by_id[1]["error"]["code"] == -32603 and "max_message_bytes" in by_id[1]["error"]["message"]
    refused = by_id["h\u00e9"]["error"]
    assert refused["code"] == -32600 and "max_request_bytes" in refused["message"]
    assert by_id[3]["result"]["structuredContent"]["runtimes"][0]["name"] == "python3.12"
    assert all(len(line) < 65536 for line in out)
    messages_logged = [line.get("message", "") for line in log_lines(log)]
    assert any("above max_request_bytes" in m for m in messages_logged)


@pytest.mark.anyio
async def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_and_its_requests_answered(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log.jsonl"
    plan = plan_with(ignore_term=True, silent_on="echo")
    command = [
        "env",
        "MCP_NORMALIZER_GRACEFUL_SHUTDOWN=0.5",
        *wrapped(fixture(plan), log),
    ]
    out, status = await raw_session(command, INITIALIZE + call(7, "echo"))
    assert status == 128 + 9  # SIGKILL, as the host would see the server end
    (error,) = (orjson.loads(line) for line in out if b'"error"' in line)
    assert error["id"] == 7 and "signal 9" in error["error"]["message"]
    messages = [line.get("message", "") for line in log_lines(log)]
    assert any("SIGTERM" in m for m in messages) and any("SIGKILL" in m for m in messages)


def test_no_command_and_a_missing_command_exit_with_a_clear_error() -> None:
    import subprocess

    none = subprocess.run([EXE, "stdio"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    missing = subprocess.run(
        [EXE, "stdio", "--", "/nonexistent/mcp-server"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert none.returncode == 2 and "no server command" in none.stderr and none.stdout == ""
    assert missing.returncode == 127 and "cannot start" in missing.stderr and missing.stdout == ""


# -- the fault corpus from stdio servers ------------------------------------------------------------


async def stdio_replay(commands: list[list[str]], cases: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per client, one session record per case, each session starting its case's command."""
    sessions = [{"command": command, "steps": steps(case)} for command, case in zip(commands, cases, strict=True)]
    found: dict[str, list[dict[str, Any]]] = {}

    async def node(name: str, sdk: str) -> None:
        found[name] = await run_node(sdk, sessions, timeout=600)

    async def python() -> None:
        found["python"] = [
            await run_python("", steps(case), command=cmd) for cmd, case in zip(commands, cases, strict=True)
        ]

    async with anyio.create_task_group() as tg:
        tg.start_soon(node, "ts-sdk-1", "v1")
        tg.start_soon(node, "ts-client-2", "v2")
        tg.start_soon(python)
    return {name: found[name] for name in ("ts-sdk-1", "ts-client-2", "python")}


@pytest.mark.anyio
async def test_the_fault_corpus_from_stdio_servers_is_accepted_as_over_http(tmp_path: Path) -> None:
    """Each public case served by its own stdio server, through the wrapper, with the defaults: the
    same acceptance as the HTTP proxy's (tests/test_corpus.py), every value kept; without the
    wrapper the same servers fail the clients."""
    cases = [case for case in load_cases() if case.get("tool")]
    plans = [{"tools": [case["tool"]], "results": {case["tool"]["name"]: case["result"]}} for case in cases]
    logs = [tmp_path / f"{i}.jsonl" for i in range(len(cases))]
    through = await stdio_replay([wrapped(fixture(p), log) for p, log in zip(plans, logs, strict=True)], cases)
    check(cases, through, {case["id"] for case in cases} - UNREPAIRABLE)
    assert rejected(cases, through) == UNREPAIRABLE
    direct = await run_node(
        "v1", [{"command": fixture(p), "steps": steps(c)} for p, c in zip(plans, cases, strict=True)]
    )
    failing = {
        case["id"] for case, record in zip(cases, direct, strict=True) if not all(s["ok"] for s in record["steps"])
    }
    assert len(failing) >= 20  # the servers really are faulty for a strict client


@pytest.mark.anyio
async def test_progress_reaches_the_host_before_the_result_exists(tmp_path: Path) -> None:
    """The server sends progress, then holds its result until the host has read that progress
    (and said so): a wrapper that held progress back until the result would never finish."""
    log = tmp_path / "log.jsonl"
    plan = plan_with(progress_on="echo")
    request = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": "echo", "_meta": {"progressToken": "t\u00e9"}},
    }
    async with await anyio.open_process(wrapped(fixture(plan), log)) as process:
        assert process.stdin is not None and process.stdout is not None
        await process.stdin.send(INITIALIZE + orjson.dumps(request) + b"\n")
        seen = b""
        with anyio.fail_after(30):
            while b"notifications/progress" not in seen:
                seen += await process.stdout.receive()
            assert b'"id":5' not in seen  # no result yet: it does not exist
            await process.stdin.send(b'{"jsonrpc":"2.0","method":"notifications/release"}\n')
            while b'"id": 5' not in seen and b'"id":5' not in seen:
                seen += await process.stdout.receive()
            await process.stdin.aclose()
            await process.wait()
    messages = [orjson.loads(line) for line in seen.splitlines()]
    progress = next(m for m in messages if m.get("method") == "notifications/progress")
    assert progress["params"] == {
        "progressToken": "t\u00e9",
        "progress": 1,
        "total": 2,
        "message": "half way: 12.50 \u2713",
    }
    assert messages[-1]["id"] == 5 and messages[-1]["result"]["content"][0]["text"] == "released"


@pytest.mark.anyio
async def test_a_fastmcp_server_over_stdio_gives_every_client_what_the_http_proxy_gives(tmp_path: Path) -> None:
    """The same FastMCP server over stdio behind the wrapper, and over HTTP behind the proxy: each
    strict client receives the same thing both ways (repairs included), and directly over stdio
    the same faults as directly over HTTP."""
    from .test_fastmcp_wire import STEPS as FASTMCP_STEPS
    from .test_fastmcp_wire import app as fastmcp_app

    server = [sys.executable, str(Path(__file__).with_name("fastmcp_stdio_server.py"))]
    through = await each_stdio_client(wrapped(server, tmp_path / "log.jsonl"), FASTMCP_STEPS)
    direct = await each_stdio_client(server, FASTMCP_STEPS)
    # (learning off over HTTP: there the clients' sessions are several witnesses of one proxy, and a
    # null they meet teaches the nullable schema; behind the wrapper each client has its own proxy)
    no_lessons = NormalizerConfig.from_mapping({"rules": {"learn_schema": "off"}})
    with serve(fastmcp_app(), lifespan="on") as up, proxy_for(up + "/mcp", no_lessons) as px:
        over_http = await each_client(px + "/mcp", FASTMCP_STEPS)
        direct_http = await each_client(up + "/mcp", FASTMCP_STEPS)
    for client in through:
        assert without_times(through[client]) == without_times(over_http[client]), client
        assert [s["ok"] for s in direct[client]["steps"]] == [s["ok"] for s in direct_http[client]["steps"]], client
    assert not all(s["ok"] for s in direct["ts-sdk-1"]["steps"])  # the faults are there without it


def without_times(record: dict[str, Any]) -> list[dict[str, Any]]:
    """A record's steps without the Node client's timestamps."""
    return [{k: v for k, v in step.items() if k != "at"} for step in record["steps"]]


@pytest.mark.anyio
async def test_the_python_sdks_own_stdio_server_is_repaired_for_every_client(tmp_path: Path) -> None:
    server = [sys.executable, str(Path(__file__).with_name("mcpserver_stdio_server.py"))]
    steps: list[dict[str, Any]] = [
        {"op": "listTools"},
        {"op": "callTool", "name": "lookup", "arguments": {"id": 9007199254740991}},
        {"op": "callTool", "name": "add", "arguments": {"a": -2, "b": 9007199254740991}},
    ]
    log = tmp_path / "log.jsonl"
    direct = await each_stdio_client(server, steps)
    through = await each_stdio_client(wrapped(server, log), steps)
    for client, record in through.items():
        listed, lookup, add = record["steps"]
        assert lookup["ok"] and add["ok"], (client, record["steps"])
        person = {"id": 9007199254740991, "city": "Z\u00fcrich \u2713", "balance": 12.5}
        assert lookup["value"]["structuredContent"] == person  # the null removed, kept in _meta
        assert lookup["value"]["_meta"]["dev.mcp-normalizer/original-values"] == {"/name": None}
        assert add["value"]["structuredContent"] == {"result": 9007199254740989}
        assert without_times(direct[client])[2] == without_times(record)[2], client  # untouched: no fault
    assert not direct["ts-sdk-1"]["steps"][1]["ok"]  # the null where the schema says string


@pytest.mark.anyio
async def test_sigterm_to_the_wrapper_reaches_the_server_and_its_status_comes_back(tmp_path: Path) -> None:
    """The host stops the wrapper as it would stop the server: the server gets the signal, its
    unanswered request an error, and the host sees the server's own end (143: SIGTERM)."""
    log = tmp_path / "log.jsonl"
    plan = plan_with(silent_on="echo")
    async with await anyio.open_process(wrapped(fixture(plan), log)) as process:
        assert process.stdin is not None and process.stdout is not None
        await process.stdin.send(INITIALIZE + call(4, "echo"))
        seen = b""
        with anyio.fail_after(30):
            while b'"id":0' not in seen and b'"id": 0' not in seen:
                seen += await process.stdout.receive()  # initialized: the server runs
            process.terminate()
            seen += b"".join([chunk async for chunk in process.stdout])
            status = await process.wait()
    assert status == 128 + 15
    (error,) = (orjson.loads(line) for line in seen.splitlines() if b'"error"' in line)
    assert error["id"] == 4 and "signal 15" in error["error"]["message"]
    assert any("signal 15: passed to" in line.get("message", "") for line in log_lines(log))


@pytest.mark.anyio
async def test_lines_that_are_json_but_no_message_or_not_utf8_never_reach_the_host(tmp_path: Path) -> None:
    """What the attack found relayed: ``[INFO]`` log lines, ``{}``, invalid UTF-8, two messages on
    one line; and a response batch, an id answered as ``"1"`` for ``1`` and a BOM-led line, whose
    requests must not also get an error when the server exits."""
    log = tmp_path / "log.jsonl"
    noise = ["[INFO] server started", "{}", "[]", '{"a": 1}{"b": 2}', "{not json"]
    plan = plan_with(noise=noise)
    out, status = await raw_session(wrapped(fixture(plan), log), INITIALIZE + call(1, "echo"))
    assert status == 0 and [orjson.loads(line)["id"] for line in out] == [0, 1]  # no noise, no error
    assert [line["stdout"] for line in log_lines(log) if "stdout" in line] == noise * 2


@pytest.mark.anyio
async def test_the_server_gets_the_hosts_environment_less_the_wrappers_own_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 37: behind the wrapper, the server inherited the wrapper's ``MCP_NORMALIZER_*`` and
    ``OTEL_*`` variables, and an ``LC_CTYPE=C.UTF-8`` the host never sent (the interpreter's own
    locale coercion, PEP 538). It gets what the host sent, less those, plus ``--env``."""
    secrets = {
        "MCP_NORMALIZER_STATE_SECRET": "s3cret-key",
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer s3cret-token",
        "OTEL_SERVICE_NAME": "the-server",
        "FIXTURE_API_KEY": "the server's own key",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    for name in ("LC_ALL", "LC_CTYPE", "LANG"):  # the C locale, as a host may start it
        monkeypatch.delenv(name, raising=False)
    log = tmp_path / "log.jsonl"
    flags = ("--env", "FIXTURE_NOTE=a,b", "--env", "OTEL_SERVICE_NAME", "--env", "EMPTY=")
    out, status = await raw_session(
        wrapped(fixture(plan_with(where_on="echo")), log, *flags), INITIALIZE + call(1, "echo")
    )
    assert status == 0
    environ = json.loads(orjson.loads(out[1])["result"]["content"][0]["text"])["environ"]
    assert "s3cret" not in json.dumps(environ)
    assert {name for name in environ if name.startswith(("MCP_NORMALIZER_", "OTEL_"))} == {"OTEL_SERVICE_NAME"}
    assert environ["FIXTURE_NOTE"] == "a,b" and environ["EMPTY"] == "" and environ["OTEL_SERVICE_NAME"] == "the-server"
    assert environ["FIXTURE_API_KEY"] == "the server's own key"
    assert not {"LC_CTYPE", "LC_ALL", "LANG"} & set(environ)


def ns_pid(pid: int) -> int | None:
    """The pid process ``pid`` has in its own PID namespace (``None``: it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    (line,) = (line for line in status.splitlines() if line.startswith("NSpid:"))
    return int(line.split()[-1])


def children_of(pid: int) -> list[int]:
    """The child processes of ``pid`` (every thread's)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def test_as_pid_1_the_wrapper_reaps_what_its_server_leaves_behind(tmp_path: Path) -> None:
    """Issue 37: ``docker run -i IMAGE stdio -- CMD`` makes the wrapper PID 1, the parent of what the
    server's helpers leave behind. Run here as PID 1 of a new PID namespace in front of a server whose
    call leaves a grandchild that exits: it is reaped, and the server's own status is still the
    wrapper's exit code."""
    from .test_image import as_pid_1, wait_until

    prefix = as_pid_1()
    if not prefix:
        pytest.skip("unshare cannot make a PID namespace on this machine (no unshare, or not allowed)")
    plan = plan_with(orphan_on="echo", exit_status=3)
    log = tmp_path / "log.jsonl"
    process = subprocess.Popen([*prefix, *wrapped(fixture(plan), log)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(INITIALIZE + call(1, "echo"))
        process.stdin.flush()
        lines = [process.stdout.readline() for _ in range(2)]
        left = int(orjson.loads(lines[1])["result"]["content"][0]["text"])  # exited by now
        (wrapper,) = children_of(process.pid)
        assert ns_pid(wrapper) == 1

        def reaped() -> bool:
            return all(ns_pid(pid) != left for pid in children_of(wrapper))

        wait_until(reaped, "the process the server left behind was reaped (it stayed a zombie)", process)
        process.stdin.close()
        assert process.wait(timeout=60) == 3  # the server's status, not a reaper's
    finally:
        if process.poll() is None:
            process.kill()  # (--kill-child takes the wrapper along)
            process.wait()
        process.stdout.close()


def test_a_bad_cwd_env_or_log_level_is_named() -> None:
    import subprocess

    cases = {
        ("--cwd", "/nonexistent/dir"): "--cwd '/nonexistent/dir' is not a directory",
        ("--env", "=FOO"): "--env takes NAME=VALUE or NAME",
        ("--log-level", "loud"): "must be one of critical, error, warning, info, debug",
        ("--log-file", "/nonexistent/dir/x.log"): "cannot open the log file",
    }
    for flags, said in cases.items():
        done = subprocess.run([EXE, "stdio", *flags, "--", "true"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and said in done.stderr and done.stdout == "", (flags, done.stderr)


CLAUDE_CODE = ROOT / "tests" / "node" / "node_modules" / "@anthropic-ai" / "claude-code" / "cli.js"


@pytest.mark.anyio
async def test_claude_codes_own_mcp_serve_is_accepted_by_every_client_from_the_first_call(tmp_path: Path) -> None:
    """Claude Code 2.0.72 as a server (``claude mcp serve``, anthropics/claude-code#14465): its tools
    declare an outputSchema and its results carry the data only as JSON text. Directly every strict
    client rejects every call; through the wrapper the default rule ``promote_text_json`` makes the
    first call conform, no rule file, no interventions entry."""
    home = tmp_path / "home"
    home.mkdir()
    server = ["env", f"HOME={home}", "node", str(CLAUDE_CODE), "mcp", "serve"]
    steps: list[dict[str, Any]] = [
        {"op": "callTool", "name": "Bash", "arguments": {"command": "echo 'caf\u00e9 12.50'"}}
    ]
    log = tmp_path / "log.jsonl"
    steps.insert(0, {"op": "listTools"})  # (as every host does first)
    direct = await each_stdio_client(server, steps)
    through = await each_stdio_client(wrapped(server, log), steps)
    for client, record in direct.items():
        failed = record["steps"][1]
        assert not failed["ok"] and "did not return structured content" in failed["error"]["message"], client
    for client, record in through.items():
        listed, called = record["steps"]
        assert called["ok"], (client, called)
        assert any(tool["name"] == "Bash" and "outputSchema" in tool for tool in listed["value"]["tools"])
        (block,) = called["value"]["content"]
        assert called["value"]["structuredContent"] == json.loads(block["text"])  # the text, kept too
        assert called["value"]["structuredContent"]["stdout"].strip() == "caf\u00e9 12.50"
    rules = {line.get("rule") for line in log_lines(log) if line.get("tool") == "Bash"}
    assert "promote_text_json" in rules
