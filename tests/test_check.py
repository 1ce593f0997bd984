"""``mcp-normalizer check``: a live server's faults with their repairs, through the proxy none; every
faulty public case reported and no conforming one; a capture of the proxy's traffic audited offline."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
import tomllib
import zlib
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from mcp_normalizer.check import audit_capture, audit_server
from mcp_normalizer.check.author_fixes import AUTHOR_FIXES, author_fix
from mcp_normalizer.check.faults import KINDS
from mcp_normalizer.config import ProxyConfig
from mcp_normalizer.demo.clients import run_node
from mcp_normalizer.demo.upstream import protean_server
from mcp_normalizer.engine.interventions import shipped
from mcp_normalizer.engine.rules import RULES

from .support import EXE, case_server, load_cases, protean_rules, proxy_for, read_body, serve

pytestmark = pytest.mark.wire

CALLS = ["--call", "protean.scope_list", "--call", "protean.list_runtimes", "--call", "protean.whoami"]
CALLS += ["--call", "protean.deploy", '{"service": "api"}']
PROTEAN_FAULTS = {
    ("protean.scope_list", "tools/call", "error_problem"),
    ("protean.deploy", "tools/call", "error_problem"),
    ("protean.list_runtimes", "tools/list", "nullable"),
    ("protean.whoami", "tools/call", "empty_structured_content"),
}


def check(*args: str) -> tuple[int, str, str]:
    done = subprocess.run([EXE, "check", *args], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


def faults(report: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(f["tool"], f["where"], f["rule"]) for f in report["findings"]}


@pytest.mark.parametrize("era", ["auto", "legacy"])
def test_the_protean_faults_are_listed_with_their_repairs_and_none_through_the_proxy(era: str) -> None:
    with serve(protean_server()) as up, proxy_for(up + "/mcp", protean_rules()) as px:
        direct = check(up + "/mcp", *CALLS, "--era", era, "--format", "json")  # no rule file
        proxied = check(px + "/mcp", *CALLS, "--era", era, "--format", "json")
    code, out, err = direct
    assert code == 1, err
    report = orjson.loads(out)
    assert report["era"] == ("2026-07-28" if era == "auto" else "2025-11-25") and report["calls"] == 4
    assert faults(report) == PROTEAN_FAULTS
    for finding in report["findings"]:
        assert finding["spec"]["section"] and finding["clients"] and finding["repair"]
    problem = next(f for f in report["findings"] if f["tool"] == "protean.scope_list")
    assert problem["kind"] == "error_result_validated" and "/_meta/org.htcom.protean~1problem" in problem["pointers"]
    assert any("TS SDK Client 1.x" in client for client in problem["clients"])
    code, out, err = proxied
    assert code == 0, out + err
    assert orjson.loads(out)["findings"] == [] and orjson.loads(out)["calls"] == 4


def test_the_interventions_table_repairs_the_old_protean_shape_and_without_it_check_prints_the_fix(
    tmp_path: Path,
) -> None:
    off = tmp_path / "off.toml"
    off.write_text("[normalizer]\ninterventions = false\n", encoding="utf-8")
    with serve(protean_server()) as up:
        code, out, err = check(up + "/mcp", *CALLS, "--era", "legacy", "--format", "json")
        code_off, out_off, err_off = check(
            up + "/mcp", *CALLS, "--era", "legacy", "--format", "json", "--config", str(off)
        )
    assert code == 1, err  # the other faults are still faults of the server
    (finding,) = (f for f in orjson.loads(out)["findings"] if f["tool"] == "protean.list_runtimes")
    assert (finding["where"], finding["rule"], finding["fix"]) == ("tools/list", "nullable", "")
    assert "intervention protean-legacy-runtime-scope" in finding["reason"]
    (entry,) = (e for e in shipped().entries if e.id == "protean-legacy-runtime-scope")
    assert finding["author"] == entry.author_fix  # the entry's own word for the server's authors
    assert code_off == 1, err_off
    found = [f for f in orjson.loads(out_off)["findings"] if f["tool"] == "protean.list_runtimes"]
    finding, learned = found
    assert finding["where"] == "tools/call" and finding["rule"] == "conformance"
    assert finding["kind"] == "unrepaired"
    assert finding["fix"] == '[tools."protean.list_runtimes"]\nnullable = ["/runtimes/*/scope"]'
    # and without the table the proxy learns it (rule learn_schema, issue 39)
    assert (learned["rule"], learned["repair"]) == ("learn_schema", "would learn nullable /runtimes/*/scope")
    assert tomllib.loads(finding["fix"]) == {"tools": {"protean.list_runtimes": {"nullable": ["/runtimes/*/scope"]}}}


def test_the_table_names_each_fault_what_it_breaks_and_the_repair() -> None:
    with serve(protean_server("json")) as up:
        code, out, _ = check(up + "/mcp", *CALLS)
    assert code == 1
    assert "protean.scope_list" in out and "error_problem" in out and "error_result_validated" in out
    assert out.count("breaks:") == 4 and out.count("repair:") == 4 and "moved structuredContent to _meta problem" in out
    assert out.rstrip().endswith("3 faults and 1 advisory in 4 tools")
    assert "4 tools listed, 4 results audited" in out
    assert "run with --era legacy" in out  # the upstream is dual-era


@pytest.mark.anyio
async def test_every_faulty_public_case_is_reported_and_no_conforming_one() -> None:
    cases = [case for case in load_cases() if case.get("tool")]
    config = protean_rules()
    reported: dict[str, list[str]] = {}
    with serve(case_server(cases, "sse")) as up:
        for case in cases:
            calls: list[tuple[str, dict[str, Any]]] = [(case["tool"]["name"], {})]
            audit, era = await audit_server(up + "/mcp", calls, config, {"x-case": case["id"]}, era="legacy")
            assert era == "2025-11-25" and audit.calls == 1  # the cases target legacy clients
            reported[case["id"]] = [finding.rule for finding in audit.findings]
    conforming = {
        c["id"] for c in cases if (c["expected"]["tool"], c["expected"]["result"]) == (c["tool"], c["result"])
    }
    assert 5 <= len(conforming) < len(cases)
    assert {case for case, rules in reported.items() if not rules} == conforming


def test_every_rule_and_advisory_names_what_it_breaks() -> None:
    for rule in RULES:
        if rule.name not in ("last_resort", "apps_result_meta", "degrade"):  # opt-in, not repairs of a fault kind
            assert rule.kind in KINDS, rule.name
    for kind in KINDS.values():
        assert kind.spec and kind.section and kind.clients
        assert author_fix(kind.name), kind.name  # and what the server's author changes
    assert set(AUTHOR_FIXES) == set(KINDS)


@pytest.mark.anyio
async def test_a_capture_of_the_proxys_traffic_gives_the_live_findings_offline(tmp_path: Path) -> None:
    path = tmp_path / "traffic.jsonl"
    config = protean_rules()
    config = dataclasses.replace(config, proxy=dataclasses.replace(ProxyConfig(), capture_file=str(path)))
    steps = [
        {"op": "listTools"},
        {"op": "callTool", "name": "protean.scope_list"},
        {"op": "callTool", "name": "protean.list_runtimes"},
        {"op": "callTool", "name": "protean.whoami"},
    ]
    with serve(protean_server()) as up:
        live, _ = await audit_server(up + "/mcp", [(s["name"], {}) for s in steps[1:]], config, {}, era="legacy")
        with proxy_for(up + "/mcp", config) as px:
            sessions = await run_node(
                "v1", [{"url": px + "/mcp", "steps": steps}, {"url": px + "/mcp", "steps": steps}]
            )
    assert all(step["ok"] for session in sessions for step in session["steps"])  # normalized for the client
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert len(lines) == 2 * 2 * 4  # request and response, 4 exchanges, 2 sessions
    assert all("arguments" not in line["message"].get("params", {}) for line in lines)
    assert lines[3]["message"]["result"]["structuredContent"]["status"] == 403  # as the upstream sent it
    offline = audit_capture(str(path), protean_rules())
    key = [(f.tool, f.where, f.rule) for f in live.findings]
    assert [(f.tool, f.where, f.rule) for f in offline.findings] == key
    assert [f.count for f in offline.findings] == [2 * f.count for f in live.findings]  # two sessions
    code, out, _ = check("--capture", str(path), "--format", "json")
    assert code == 1 and {(t, r) for t, _, r in faults(orjson.loads(out))} == {(t, r) for t, _, r in key}


def test_bare_json_rpc_lines_are_paired_by_id_and_garbage_is_counted(tmp_path: Path) -> None:
    case = next(c for c in load_cases() if c["id"] == "ts-sdk-iserror-sc-validated")
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
        {"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18", "capabilities": {}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "result": {"tools": [case["tool"]]}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": case["tool"]["name"]}},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}},
        {"jsonrpc": "2.0", "id": 3, "result": case["result"]},
        {"jsonrpc": "2.0", "id": 99, "result": {"content": []}},
    ]
    path = tmp_path / "bare.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(line) for line in lines) + b"\nnot json\n")
    audit = audit_capture(str(path), protean_rules())
    assert [(f.tool, f.rule) for f in audit.findings] == [(case["tool"]["name"], "error_problem")]
    assert audit.calls == 1 and len(audit.notes) == 2  # the garbage line, the unpaired response


@pytest.mark.parametrize(
    "args",
    [
        ["http://127.0.0.1:9/mcp"],  # nothing listens there
        [],
        ["http://127.0.0.1:9/mcp", "--capture", "x.jsonl"],
        ["--capture", "/nonexistent/traffic.jsonl"],
        ["http://127.0.0.1:9/mcp", "--call", "t", "not json"],
        ["http://127.0.0.1:9/mcp", "--call", "t", "[1]"],
        ["http://127.0.0.1:9/mcp", "--header", "no colon"],
        ["http://127.0.0.1:9/mcp", "--calls", "/nonexistent/calls.json"],
        ["http://127.0.0.1:9/mcp", "--format", "yaml"],
        ["http://127.0.0.1:9/mcp", "--deadline", "0"],
        ["http://127.0.0.1:9/mcp", "--max-message-bytes", "0"],
        ["http://127.0.0.1:9/mcp", "--max-listing-bytes", "-1"],
    ],
)
def test_usage_and_connection_errors_are_one_line_and_exit_2(args: list[str]) -> None:
    code, out, err = check(*args)
    assert code == 2 and out == "" and err.count("\n") == 1, err


def test_calls_come_from_a_file_too(tmp_path: Path) -> None:
    calls = tmp_path / "calls.json"
    calls.write_text('[{"name": "protean.scope_list"}, {"name": "protean.deploy", "arguments": {"service": "api"}}]')
    with serve(protean_server("json")) as up:
        code, out, _ = check(up + "/mcp", "--calls", str(calls), "--era", "legacy", "--format", "json")
    report = orjson.loads(out)
    assert code == 1 and report["calls"] == 2
    assert {f["tool"] for f in report["findings"] if f["where"] == "tools/call"} == {
        "protean.scope_list",
        "protean.deploy",
    }


# -- hostile servers and inputs --------------------------------------------------------------------


def legacy_server(tools_list: Any, tools_call: Any = None) -> Any:
    """A legacy-only server: ``initialize`` answered, ``server/discover`` refused, and ``tools/list``
    answered by ``tools_list(request, send)`` (``tools/call`` by ``tools_call``, if given)."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        message = orjson.loads(await read_body(receive))
        if "id" not in message:
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        if message["method"] == "tools/call" and tools_call is not None:
            await tools_call(message, send)
            return
        if message["method"] != "tools/list":
            init = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "x", "version": "1"}}
            answer: Any = {"jsonrpc": "2.0", "id": message["id"], "result": init}
            if message["method"] != "initialize":
                answer = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no"}}
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": orjson.dumps(answer)})
            return
        await tools_list(message, send)

    return app


def answering(result: Any) -> Any:
    async def tools_list(message: Any, send: Any) -> None:
        body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result(message)}).encode()  # surrogates too
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})

    return tools_list


async def keepalives_forever(message: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    while True:
        await send({"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True})
        await anyio.sleep(0.2)


def test_a_server_that_never_answers_is_an_error_within_the_timeout_not_a_hang() -> None:
    with serve(legacy_server(keepalives_forever)) as up:
        code, out, err = check(up + "/mcp", "--timeout", "1")
    assert code == 2 and "no complete answer" in err and "within 1 s" in err


def test_header_values_are_never_echoed_and_control_characters_are_refused() -> None:
    code, _, err = check("http://127.0.0.1:9/mcp", "--header", "Authorization: Bearer SECRET\r\nX-Evil: 1")
    assert code == 2 and "SECRET" not in err and "Authorization" in err
    code, _, err = check("http://user:hunter2@127.0.0.1:9/mcp")
    assert code == 2 and "hunter2" not in err


def test_a_broken_tool_list_and_a_repeating_cursor_are_faults() -> None:
    broken = answering(lambda m: {"tools": [{"name": "a", "inputSchema": {"type": "object"}}] * 2 + [7]})
    with serve(legacy_server(broken)) as up:
        code, out, _ = check(up + "/mcp", "--format", "json")
    report = orjson.loads(out)
    assert code == 1 and {f["kind"] for f in report["findings"]} == {"invalid_tools_list"}
    assert {tuple(f["pointers"]) for f in report["findings"]} == {("/tools/1/name",), ("/tools/2",)}
    looping = answering(lambda m: {"tools": [{"name": "t", "inputSchema": {"type": "object"}}], "nextCursor": "same"})
    with serve(legacy_server(looping)) as up:
        code, out, _ = check(up + "/mcp", "--format", "json")
    report = orjson.loads(out)
    assert code == 1 and report["tools"] == ["t"]
    assert ["/nextCursor"] in [f["pointers"] for f in report["findings"]]  # (page 2 repeats page 1's tool, too)


def test_hostile_tool_names_cannot_forge_the_table_and_keep_the_json_valid() -> None:
    evil = "evil\x1b]0;PWNED\x07\x1b[2J\nclean: no fault found\n\ud800"
    tools = answering(lambda m: {"tools": [{"name": evil, "inputSchema": {"type": "object"}, "_meta": {"_x": 1}}]})
    with serve(legacy_server(tools)) as up:
        table = check(up + "/mcp")
        document = check(up + "/mcp", "--format", "json")
    assert table[0] == 1 and "\x1b" not in table[1] and "\nclean: no fault found" not in table[1]
    assert document[0] == 1 and orjson.loads(document[1])["findings"][0]["tool"].startswith("evil\x1b")


def test_json_in_a_string_is_only_a_fault_for_a_wrap_result_tool(tmp_path: Path) -> None:
    file_tool = {
        "name": "read",
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "properties": {"content": {"type": "string"}}},
    }
    wrap_tool = {
        "name": "score",
        "inputSchema": {"type": "object"},
        "outputSchema": {
            "type": "object",
            "properties": {"result": {"type": "string"}},
            "required": ["result"],
            "x-fastmcp-wrap-result": True,
        },
    }
    text = '{"name": "pkg", "version": "1.0.0"}'
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        {"jsonrpc": "2.0", "id": 1, "result": {"tools": [file_tool, wrap_tool]}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read"}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "result": {"content": [{"type": "text", "text": text}], "structuredContent": {"content": text}},
        },
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "score"}},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "result": {"content": [{"type": "text", "text": text}], "structuredContent": {"result": text}},
        },
    ]
    path = tmp_path / "capture.jsonl"
    path.write_bytes(b"\n".join(map(orjson.dumps, lines)))
    audit = audit_capture(str(path), protean_rules())
    assert [(f.tool, f.rule) for f in audit.findings] == [("score", "double_encoded_json")]
    # A SHOULD-level advisory no supported client rejects: reported, exit 0; --strict makes it 1.
    code, out, _ = check("--capture", str(path))
    assert code == 0 and "advisory:" in out and "no fault a supported client rejects; 1 advisory" in out
    assert check("--capture", str(path), "--strict")[0] == 1
    document = orjson.loads(check("--capture", str(path), "--format", "json")[1])
    assert document["clean"] is True and document["advisories"] == 1


def envelope(scope: str, message: Any) -> bytes:
    return orjson.dumps({"ts": "t", "scope": scope, "era": "2026-07-28", "message": message})


def test_a_replay_sees_what_the_proxy_saw_public_lists_tasks_and_intermediate_results(tmp_path: Path) -> None:
    tool = {"name": "whoami", "inputSchema": {"type": "object"}}
    done = {"resultType": "complete"}  # (2026-07-28 requires it in every result: rule era_fields)
    empty = {"content": [{"type": "text", "text": "me"}], "structuredContent": {}, **done}
    lines = [
        envelope("A", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}),
        envelope(
            "A", {"jsonrpc": "2.0", "id": 1, "result": {"tools": [tool], "cacheScope": "public", "ttlMs": 0, **done}}
        ),
        # scope B never listed: the public list serves it
        envelope("B", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "whoami"}}),
        envelope("B", {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required", "inputRequests": {}}}),
        envelope("B", {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "whoami"}}),
        envelope("B", {"jsonrpc": "2.0", "id": 2, "result": {"resultType": "task", "taskId": "t1"}}),
        envelope("B", {"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": "t1"}}),
        envelope(
            "B", {"jsonrpc": "2.0", "id": 3, "result": {"taskId": "t1", "status": "completed", "result": empty, **done}}
        ),
    ]
    path = tmp_path / "capture.jsonl"
    path.write_bytes(b"\n".join(lines))
    audit = audit_capture(str(path), protean_rules())
    assert [(f.tool, f.where, f.rule) for f in audit.findings] == [("whoami", "tools/call", "empty_structured_content")]
    assert audit.eras == ["2026-07-28"]


@pytest.mark.anyio
async def test_a_capture_file_that_blocks_never_stalls_the_traffic(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it for writing blocks until a reader comes: none ever does
    config = protean_rules()
    config = dataclasses.replace(config, proxy=dataclasses.replace(ProxyConfig(), capture_file=str(fifo)))
    steps = [{"op": "listTools"}, {"op": "callTool", "name": "protean.scope_list"}]
    with serve(protean_server()) as up, proxy_for(up + "/mcp", config) as px:
        with anyio.fail_after(60):  # a hang guard, not a speed assertion
            session = (await run_node("v1", [{"url": px + "/mcp", "steps": steps}]))[0]
    assert all(step["ok"] for step in session["steps"])


def test_check_reads_the_rule_settings_the_proxy_reads_from_the_environment(tmp_path: Path) -> None:
    tool = {"name": "t", "inputSchema": {"type": "object"}}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        {"jsonrpc": "2.0", "id": 1, "result": {"tools": [tool]}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t"}},
        {"jsonrpc": "2.0", "id": 2, "result": {"content": [], "structuredContent": {"n": 12.50}}},
    ]
    path = tmp_path / "capture.jsonl"
    path.write_bytes(b"\n".join(map(orjson.dumps, lines)))

    def run(**env: str) -> subprocess.CompletedProcess[str]:
        argv = [EXE, "check", "--capture", str(path), "--format", "json"]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, env={**os.environ, **env})

    mirrored = orjson.loads(run().stdout)
    assert "text_mirror" in {f["rule"] for f in mirrored["findings"]}
    small = orjson.loads(run(MCP_NORMALIZER_MIRROR_MAX_BYTES="5").stdout)  # the value is 8 bytes: not mirrored
    assert "text_mirror" not in {f["rule"] for f in small["findings"]}
    bad = run(MCP_NORMALIZER_PROBLEM_META_KEY="not a key!")
    assert bad.returncode == 2 and "MCP_NORMALIZER_PROBLEM_META_KEY" in bad.stderr


# -- bounds: a page, a result, the listing and the run ------------------------------------------------

MiB = 1024 * 1024


def check_measured(tmp_path: Path, *args: str) -> tuple[int, str, int]:
    """Run ``check`` with ``args``; its exit code, its stdout and its peak RSS in bytes (``wait4``: this
    child alone, not the largest of every child the test run waited for)."""
    out = tmp_path / "check.out"
    with out.open("wb") as stdout:
        child = subprocess.Popen([EXE, "check", *args], stdout=stdout, stderr=subprocess.DEVNULL)
    waited = 0.0
    while True:  # a hang guard, not a speed assertion
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        if waited > 120:
            child.kill()
        time.sleep(0.05)
        waited += 0.05
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, out.read_text(), usage.ru_maxrss * 1024  # Linux: KiB


def streamed_page(size: int) -> Any:
    """``tools/list`` answered with one page of ``size`` bytes of JSON, written 1 MiB at a time from one
    chunk (the test holds 1 MiB, never the page)."""
    tool = b'{"name":"t","description":"' + b"x" * (64 * 1024) + b'","inputSchema":{"type":"object"}},'
    chunk = tool * (MiB // len(tool))

    async def tools_list(message: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        head = b'{"jsonrpc":"2.0","id":%d,"result":{"tools":[' % message["id"]
        await send({"type": "http.response.body", "body": head, "more_body": True})
        for _ in range(size // len(chunk)):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b'{"name":"u","inputSchema":{"type":"object"}}]}}'})

    return tools_list


def test_a_200_mib_page_is_cut_at_the_bound_as_it_streams_and_the_report_says_so(tmp_path: Path) -> None:
    page = 200 * MiB
    with serve(legacy_server(streamed_page(page))) as up:
        code, out, peak = check_measured(tmp_path, up + "/mcp", "--format", "json")
    small = answering(lambda m: {"tools": [{"name": "a", "inputSchema": {"type": "object"}}]})
    with serve(legacy_server(small)) as up:
        _, _, baseline = check_measured(tmp_path, up + "/mcp", "--format", "json")  # about 95 MiB, imports
    assert peak < baseline + 2 * 32 * MiB, (peak, baseline)  # the bound (32 MiB) read, never the page
    report = orjson.loads(out)
    (finding,) = report["findings"]
    assert code == 1 and not report["clean"] and report["tools"] == []
    assert (finding["where"], finding["rule"], finding["kind"]) == (
        "tools/list",
        "max_message_bytes",
        "oversized_message",
    )
    assert "page 1 of tools/list is larger than --max-message-bytes (33554432 bytes)" in finding["reason"]


def gzip_bomb(media_type: bytes) -> Any:
    """``tools/list`` answered with ``Content-Encoding: gzip``: blanks without end (after ``data: ``
    on an SSE stream), each 64 KiB sent inflating to 64 MiB (deflate's ratio; the test holds one
    block)."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)  # (31: the gzip format)
    block = squeeze.compress(b" " * (64 * MiB)) + squeeze.flush(zlib.Z_FULL_FLUSH)  # (each block inflates alone)
    head = squeeze.compress(b"data: " if media_type == b"text/event-stream" else b"")

    async def tools_list(message: Any, send: Any) -> None:
        headers = [(b"content-type", media_type), (b"content-encoding", b"gzip")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": head, "more_body": True})
        for _ in range(64):  # 4 GiB inflated
            await send({"type": "http.response.body", "body": block, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    return tools_list


@pytest.mark.parametrize("media_type", [b"application/json", b"text/event-stream"])
def test_a_compressed_answer_is_bounded_as_it_inflates_not_after(tmp_path: Path, media_type: bytes) -> None:
    """A server may compress its answer (gzip) though check never asks it to: 64 KiB on the wire
    inflate to 64 MiB. The bound (``--max-message-bytes``) holds for the inflated bytes as they
    come (a guard: at most what one read of the socket inflates to is held past it)."""
    with serve(legacy_server(gzip_bomb(media_type))) as up:
        code, out, peak = check_measured(tmp_path, up + "/mcp", "--max-message-bytes", str(MiB), "--format", "json")
    small = answering(lambda m: {"tools": [{"name": "a", "inputSchema": {"type": "object"}}]})
    with serve(legacy_server(small)) as up:
        _, _, baseline = check_measured(tmp_path, up + "/mcp", "--format", "json")
    assert peak < baseline + 16 * MiB, (peak - baseline) // MiB
    report = orjson.loads(out)
    (finding,) = report["findings"]
    assert code == 1 and (finding["rule"], finding["kind"]) == ("max_message_bytes", "oversized_message")


def paging_forever(delay: float, size: int = 0) -> Any:
    """``tools/list`` answered after ``delay`` seconds with one tool (padded to about ``size`` bytes) and a
    ``nextCursor`` never seen before: the listing never ends."""

    async def tools_list(message: Any, send: Any) -> None:
        await anyio.sleep(delay)
        number = int(message["params"].get("cursor", "0"))
        tool = {"name": f"t{number}", "description": "x" * size, "inputSchema": {"type": "object"}}
        body = orjson.dumps(
            {"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [tool], "nextCursor": str(number + 1)}}
        )
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})

    return tools_list


def test_a_dripping_pager_is_ended_by_the_deadline_and_the_report_says_so() -> None:
    with serve(legacy_server(paging_forever(0.5))) as up:
        code, out, err = check(up + "/mcp", "--deadline", "3", "--format", "json")
        table = check(up + "/mcp", "--deadline", "3", "--call", "t0")
    assert code == 1, err
    report = orjson.loads(out)
    (finding,) = report["findings"]
    assert (finding["where"], finding["rule"], finding["kind"]) == ("tools/list", "deadline", "audit_cut")
    assert finding["reason"].startswith("the run met --deadline (3 s) while listing tools:")
    assert f": {len(report['tools'])} tools/list pages read; " in finding["reason"]  # each page lists one tool
    assert (
        table[0] == 1
        and "tools/list  deadline" in table[1]
        and "fault:    audit_cut: the run met --deadline" in table[1]
    )
    assert "; 0 of 1 calls done, 1 not" in table[1]


def test_the_listing_is_bounded_across_pages_and_a_result_by_bytes(tmp_path: Path) -> None:
    big = {"content": [{"type": "text", "text": "y" * (2 * MiB)}]}

    async def tools_call(message: Any, send: Any) -> None:  # one SSE event, never ended
        event = b"event: message\ndata: " + orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": big})
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": event, "more_body": True})
        await anyio.sleep(60)

    with serve(legacy_server(paging_forever(0, 512 * 1024), tools_call)) as up:
        code, out, err = check(
            up + "/mcp", "--max-listing-bytes", str(2 * MiB), "--max-message-bytes", str(MiB), "--call", "t0",
            "--format", "json",
        )  # fmt: skip
    assert code == 1, err
    report = orjson.loads(out)
    assert report["tools"] == ["t0", "t1", "t2"]  # a fourth page of 512 KiB would pass 2 MiB
    listing, result = report["findings"]
    assert (listing["where"], listing["rule"], listing["kind"]) == ("tools/list", "max_listing_bytes", "audit_cut")
    assert "larger than --max-listing-bytes (2097152 bytes): page 4" in listing["reason"]
    assert (result["where"], result["rule"], result["kind"]) == ("tools/call", "max_message_bytes", "oversized_message")
    assert "the result of t0 is larger than --max-message-bytes (1048576 bytes)" in result["reason"]
    assert report["calls"] == 0


def test_a_handshake_above_the_bound_is_a_one_line_error() -> None:
    tools = answering(lambda m: {"tools": []})
    with serve(legacy_server(tools)) as up:
        code, out, err = check(up + "/mcp", "--max-message-bytes", "10")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "server/discover: the answer is larger than 10 bytes" in err


# -- severities: what the named clients and hosts do --------------------------------------------------

DRAFT_07 = "http://json-schema.org/draft-07/schema#"


def one_tool(tool: dict[str, Any], result: dict[str, Any]) -> Any:
    async def tools_call(message: Any, send: Any) -> None:
        body = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})

    return legacy_server(answering(lambda m: {"tools": [tool]}), tools_call)


def test_a_naive_date_time_is_a_fault_for_the_ts_sdk_clients_that_check_formats() -> None:
    schema = {"type": "object", "properties": {"taken": {"type": "string", "format": "date-time"}}}
    tool = {"name": "reading", "inputSchema": {"type": "object"}, "outputSchema": schema}
    taken = {"taken": "2026-04-02T10:15:00"}
    result = {"content": [{"type": "text", "text": json.dumps(taken)}], "structuredContent": taken}
    with serve(one_tool(tool, result)) as up:
        code, out, err = check(up + "/mcp", "--call", "reading", "--format", "json")
    assert code == 1, out + err
    (finding,) = orjson.loads(out)["findings"]
    assert (finding["rule"], finding["pointers"], finding["advisory"]) == (
        "date_time_format",
        ["/structuredContent/taken"],
        False,
    )
    assert any("TS SDK Client 1.x and 2.x" in c and 'must match format "date-time"' in c for c in finding["clients"])


def test_a_draft_07_output_schema_is_a_fault_for_the_claude_apps_and_an_advisory_otherwise() -> None:
    """Claude Desktop and claude.ai (modelled: their issues) refuse it; Claude Code 2.1.332 takes it
    (tests/test_check_hosts.py runs it), so for it, as for Codex, it is an advisory."""
    schema = {"$schema": DRAFT_07, "type": "object", "properties": {"n": {"type": "integer"}}}
    # (an inputSchema with properties: a bare object is every model API family's fault, found for each host)
    tool = {"name": "count", "inputSchema": {"type": "object", "properties": {}}, "outputSchema": schema}
    with serve(one_tool(tool, {})) as up:
        runs = {host: check(up + "/mcp", "--format", "json", *(["--host", host] if host else [])) for host in (
            "", "claude-code", "claude-desktop", "claude-connectors", "codex",
        )}  # fmt: skip
    for host, (code, out, err) in runs.items():
        (finding,) = orjson.loads(out)["findings"]
        assert finding["rule"] == "schema_dialect", host
        refused = host in ("claude-desktop", "claude-connectors")
        assert (code, finding["advisory"]) == ((1, False) if refused else (0, True)), (host, out + err)
        assert refused == ("refuses every call to a tool whose outputSchema declares draft-07" in finding["clients"][0])


def test_a_call_of_a_tool_the_server_does_not_list_is_a_finding_not_a_clean_report() -> None:
    tool = {"name": "listed", "inputSchema": {"type": "object"}}
    with serve(one_tool(tool, {"content": [{"type": "text", "text": "ok"}]})) as up:
        code, out, err = check(up + "/mcp", "--call", "listd", "--call", "listed", "--format", "json")
        table = check(up + "/mcp", "--call", "listd")
    assert code == 1, out + err
    report = orjson.loads(out)
    (finding,) = report["findings"]
    assert (finding["tool"], finding["kind"], finding["reason"]) == (
        "listd",
        "tool_not_listed",
        "not listed by the server (tools/list)",
    )
    assert report["calls"] == 1  # the listed one; the other was not called
    assert table[0] == 1 and "fault:    tool_not_listed: not listed by the server" in table[1]
