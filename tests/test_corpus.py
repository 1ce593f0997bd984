"""The repair ladder against the whole corpus: every public case that has a tool, and new cases of
each fault kind written here (other names, shapes and nesting), replayed through the proxy with the
three strict clients in JSON and SSE modes.

Through the proxy every client accepts every result; a success result conforms to the schema the
proxy advertised; an error keeps its text; and no value of the original result is lost (each is kept,
repaired in place, or carried in ``_meta``)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from mcp_normalizer import NormalizerConfig
from mcp_normalizer.check.auditor import Finding
from mcp_normalizer.check.command import audit_server
from mcp_normalizer.check.write_config import rule_file
from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.errors import DecodeError
from mcp_normalizer.wire.jsoncodec import loads

from .support import (
    HEADERS,
    NEW_CASES,
    OBJ,
    capture_rewrites,
    case_server,
    conforms,
    contains_value,
    initialize,
    leaves,
    load_cases,
    proxy_for,
    replay,
    rpc,
    serve,
    steps,
    text,
    tool,
)

pytestmark = pytest.mark.wire

#: The two public cases no rule can repair on its own: a tool that never returns the
#: structuredContent it declares, and a const the upstream API outgrew.
UNREPAIRABLE = {"claude-code-serve-null-sc", "decocms-const-mismatch"}
DECLARED = """
[tools.Bash]
drop_output_schema = true
[tools.ASK_PERPLEXITY]
relax = ["/raw/object"]
"""


def config(text: str) -> NormalizerConfig:
    return NormalizerConfig.from_mapping(tomllib.loads(text))


def texts_of(result: dict[str, Any]) -> list[str]:
    content = result.get("content")
    if not isinstance(content, list) and isinstance(result.get("toolResult"), dict):
        content = result["toolResult"].get("content")
    blocks = content if isinstance(content, list) else []
    return [b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]


def assert_values_kept(original: dict[str, Any], received: dict[str, Any], where: str) -> None:
    """Every value of the original's structuredContent and every text it carried is still somewhere
    in what the client received (in place, in the text, or in ``_meta``)."""
    for path, value in leaves(original.get("structuredContent")):
        if value is None or value in ([], {}):
            continue
        found = (
            contains_value(received, value)
            or any(isinstance(value, str) and value in text for text in texts_of(received))
            or (isinstance(value, str) and contains_value(received, decoded(value)))  # double encoding undone
        )
        assert found, f"{where}: value {value!r} at /structuredContent{path} lost: {received!r}"
    for said in texts_of(original):
        assert any(said in got for got in texts_of(received)), f"{where}: text {said!r} lost: {received!r}"


def decoded(value: str) -> Any:
    try:
        return loads(value)
    except DecodeError:
        return object()  # matches nothing


def check(cases: list[dict[str, Any]], proxied: dict[str, list[dict[str, Any]]], expect_ok: set[str]) -> None:
    for client, records in proxied.items():
        for case, record in zip(cases, records, strict=True):
            where = f"{case['id']} via {client}"
            if case["id"] not in expect_ok:
                continue
            assert all(step["ok"] for step in record["steps"]), (where, record["steps"])
            advertised = record["steps"][0]["value"]["tools"][0].get("outputSchema")
            result = record["steps"][1]["value"]
            if result.get("isError"):
                assert texts_of(result), f"{where}: an error without text"
            elif advertised is not None:
                assert conforms(result.get("structuredContent"), advertised), where
            assert_values_kept(case["result"], result, where)


def rejected(cases: list[dict[str, Any]], proxied: dict[str, list[dict[str, Any]]]) -> set[str]:
    """The cases some client failed a step of."""
    return {
        case["id"]
        for records in proxied.values()
        for case, record in zip(cases, records, strict=True)
        if not all(step["ok"] for step in record["steps"])
    }


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_every_public_case_is_accepted_with_the_last_resort_on(mode: str) -> None:
    cases = [case for case in load_cases() if case.get("tool")]
    assert len(cases) >= 50
    with serve(case_server(cases, mode)) as up, proxy_for(up + "/mcp", config('[rules]\nlast_resort = "on"\n')) as px:
        proxied = await replay(px + "/mcp", cases)
    check(cases, proxied, {case["id"] for case in cases})


@pytest.mark.anyio
async def test_with_the_defaults_only_the_unrepairable_cases_are_left_and_logged() -> None:
    cases = [case for case in load_cases() if case.get("tool")]
    with serve(case_server(cases, "sse")) as up, proxy_for(up + "/mcp") as px, capture_rewrites() as log:
        proxied = await replay(px + "/mcp", cases)
    check(cases, proxied, {case["id"] for case in cases} - UNREPAIRABLE)
    assert rejected(cases, proxied) == UNREPAIRABLE
    unrepaired = {line["tool"] for line in log.lines if line["event"] == "unrepaired"}
    assert {"Bash", "ASK_PERPLEXITY"} <= unrepaired


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_by_default_the_unrepairable_cases_are_learned_and_the_next_list_makes_them_conform(mode: str) -> None:
    """Rule ``learn_schema``: the first result is rejected as the server sent it; the upstream's lesson
    book learns the declaration an operator would write (said in the log), announces ``list_changed``
    on an SSE stream, and the session's next ``tools/list`` advertises the tool so that the same result
    is accepted. Once a second session (a second witness: these clients send no credentials) met the
    fault too, every session opened after, by another client, gets the tool so on its first list:
    its first call is accepted."""
    cases = [case for case in load_cases() if case["id"] in UNREPAIRABLE]

    def twice(case: dict[str, Any]) -> list[dict[str, Any]]:
        return [*steps(case), *steps(case)]

    with serve(case_server(cases, mode)) as up, proxy_for(up + "/mcp") as px, capture_rewrites() as log:
        url = px + "/mcp"
        sessions = [{"url": url, "headers": {"x-case": c["id"]}, "steps": twice(c)} for c in cases]
        proxied = {
            "ts-sdk-1": await run_node("v1", sessions),  # the first sessions: they meet the faults
            "ts-client-2": await run_node("v2", sessions),  # second witnesses: they meet them too
            "python": [await run_python(url, twice(c), {"x-case": c["id"]}) for c in cases],
        }
    for client, records in proxied.items():
        for case, record in zip(cases, records, strict=True):
            first, relisted, second = record["steps"][1], record["steps"][2], record["steps"][3]
            if client != "python":
                assert not first["ok"], (client, case["id"], first)  # as the server sent it: still rejected
            else:
                assert first["ok"], (client, case["id"], first)  # learned before this session began
                assert record["steps"][0]["value"]["tools"] == relisted["value"]["tools"]
            assert relisted["ok"] and second["ok"], (client, case["id"], record["steps"])
            tool = relisted["value"]["tools"][0]
            assert tool["_meta"]["dev.mcp-normalizer/original-output-schema"] == case["tool"]["outputSchema"]
            if case["id"] == "claude-code-serve-null-sc":
                assert "outputSchema" not in tool
            else:
                assert conforms(second["value"]["structuredContent"], tool["outputSchema"])
                assert tool["outputSchema"]["properties"]["raw"]["properties"]["object"] == {}
            assert_values_kept(case["result"], second["value"], f"{case['id']} via {client}")
    learned = [(line["tool"], line["action"], line["reason"]) for line in log.lines if line["rule"] == "learn_schema"]
    sent = "; sent notifications/tools/list_changed" if mode == "sse" else ""  # a JSON body has no room
    # for its scope by the first session that met it, then for the upstream by the second; (SSE)
    # announced to each
    scope = "later tools/list of this scope say so; every session's once a result seen from another"
    upstream = "later tools/list of every session of this upstream say so"
    assert sorted((tool, action, scope in reason, upstream in reason) for tool, action, reason in learned) == sorted(
        [
            ("Bash", "learned drop_output_schema" + sent, True, False),
            ("Bash", "learned drop_output_schema" + sent, False, True),
            ("ASK_PERPLEXITY", "learned relax /raw/object" + sent, True, False),
            ("ASK_PERPLEXITY", "learned relax /raw/object" + sent, False, True),
        ]
    )
    reasons = {line["reason"] for line in log.lines if line["rule"] in ("relax", "drop_output_schema")}
    assert reasons == {
        "learned from this tool's results in this scope (rule learn_schema)",  # the first sessions' relists
        "learned from this tool's results of this upstream (rule learn_schema)",
    }


@pytest.mark.anyio
async def test_list_changed_goes_once_on_the_stream_just_before_the_result_that_taught_it() -> None:
    cases = [case for case in load_cases() if case["id"] == "decocms-const-mismatch"]
    call = {"jsonrpc": "2.0", "id": "c-1", "method": "tools/call", "params": {"name": "ASK_PERPLEXITY"}}
    with serve(case_server(cases, "sse")) as up, proxy_for(up + "/mcp") as px:
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize(http, px + "/mcp", **{"x-case": cases[0]["id"]})
            await rpc(http, px + "/mcp", "tools/list", {}, 1, **session)
            bodies = []
            for _ in range(2):
                response = await http.post(px + "/mcp", content=orjson.dumps(call), headers={**HEADERS, **session})
                bodies.append(
                    [orjson.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
                )
    first, again = bodies
    assert first[0] == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert first[1]["id"] == "c-1" and first[1]["result"] == cases[0]["result"]  # the result itself as it came
    assert [message.get("id") for message in again] == ["c-1"]  # nothing new learned: no second notice


@pytest.mark.anyio
async def test_per_tool_declarations_repair_the_unrepairable_cases_as_successes() -> None:
    cases = [case for case in load_cases() if case["id"] in UNREPAIRABLE]
    with serve(case_server(cases, "json")) as up, proxy_for(up + "/mcp", config(DECLARED)) as px:
        proxied = await replay(px + "/mcp", cases)
    check(cases, proxied, UNREPAIRABLE)
    for records in proxied.values():
        assert all(not record["steps"][1]["value"].get("isError") for record in records)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_new_cases_of_every_kind_are_accepted_with_the_defaults(mode: str) -> None:
    cases: list[dict[str, Any]] = [{"id": i, "kind": k, "tool": t, "result": r} for i, k, t, r in NEW_CASES]
    assert len({case["kind"] for case in cases}) >= 20
    with serve(case_server(cases, mode)) as up, proxy_for(up + "/mcp") as px, capture_rewrites() as log:
        direct = await replay(up + "/mcp", cases, request_timeout=15)
        proxied = await replay(px + "/mcp", cases)
    check(cases, proxied, {case["id"] for case in cases})
    rejected = {
        case["id"]
        for records in direct.values()
        for case, record in zip(cases, records, strict=True)
        if not all(step["ok"] for step in record["steps"])
    }
    assert len(rejected) >= 15, rejected  # most of them break a strict client directly
    rewritten = {line["tool"] for line in log.rewrites()}
    assert {case["tool"]["name"] for case in cases} <= rewritten  # every case needed and got a rewrite


def test_the_rules_touch_only_what_needs_it() -> None:
    """A conforming tool and result pass untouched (no rewrite) through the whole ladder."""
    from mcp_normalizer.engine.normalize import Normalizer

    normalizer = Normalizer(NormalizerConfig())
    good = tool("fine", {**OBJ, "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    listed = normalizer.tools_list({"tools": [good]}, "2025-11-25")
    assert not listed.changed and not listed.records
    result = {"content": text('{"n":1}'), "structuredContent": {"n": 1}}
    called = normalizer.tools_call(result, "fine", listed.entries[0], "2025-11-25", 10)
    assert not called.changed and not called.records


@pytest.mark.anyio
async def test_check_writes_the_rule_file_that_makes_every_public_case_accepted(tmp_path: Path) -> None:
    """The round trip: the corpus's server -> ``check --write-config`` (one audit per case, its tool
    called) -> the proxy started with the file -> every case accepted by the three clients, and the
    same audit through the proxy clean."""
    cases = [case for case in load_cases() if case.get("tool")]
    shipped = NormalizerConfig.shipped()

    async def audit(url: str, case: dict[str, Any]) -> list[Finding]:
        calls: list[tuple[str, dict[str, Any]]] = [(case["tool"]["name"], {})]
        done, _ = await audit_server(url, calls, shipped, {"x-case": case["id"]}, era="legacy")
        return done.findings

    with serve(case_server(cases, "json")) as up:
        findings = [finding for case in cases for finding in await audit(up + "/mcp", case)]
        assert any(finding.fix for finding in findings) and any(not finding.advisory for finding in findings)
        path = tmp_path / "rules.toml"
        path.write_text(rule_file(findings, up + "/mcp"), encoding="utf-8")
        written = path.read_text(encoding="utf-8")
        assert "[tools.Bash]" not in written and '[tools."Bash"]' in written  # names quoted, as suggest writes them
        assert "drop_output_schema = true" in written and "author fix:" in written
        with proxy_for(up + "/mcp", NormalizerConfig.from_file(str(path))) as px:
            proxied = await replay(px + "/mcp", cases)
            through = {case["id"]: await audit(px + "/mcp", case) for case in cases}
    check(cases, proxied, {case["id"] for case in cases})
    blocking = {case: [f.rule for f in found if not f.advisory] for case, found in through.items()}
    assert not any(blocking.values()), {case: rules for case, rules in blocking.items() if rules}
