"""The rewrite log (one JSON line per rewrite, no payload values, no secrets), report-only mode (no
byte changes) and fail-open (a rule that raises never loses the response)."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import httpx
import orjson
import pytest

from mcp_normalizer.demo.clients import run_node
from mcp_normalizer.demo.upstream import protean_server
from mcp_normalizer.engine.rules import RESULT_RULES, Rule
from mcp_normalizer.ops.logs import JSONFormatter

from .support import ResponseMode, capture_rewrites, protean_rules, proxy_for, serve

pytestmark = pytest.mark.wire

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
TOOLS = ["protean.scope_list", "protean.list_runtimes", "protean.deploy", "protean.whoami"]


async def raw_session(url: str, headers: dict[str, str] | None = None) -> list[bytes]:
    """initialize, tools/list and a call of every Protean tool over raw HTTP; the response bodies."""
    bodies: list[bytes] = []
    async with httpx.AsyncClient(timeout=30, headers={**HEADERS, **(headers or {})}) as http:
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        }
        response = await http.post(url, content=orjson.dumps(init))
        session = {"mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        bodies.append(response.content)
        messages: list[dict[str, Any]] = [{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
        for i, tool in enumerate(TOOLS, start=3):
            params = {"name": tool, "arguments": {}, "_meta": {"progressToken": i}}
            messages.append({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params})
        for message in messages:
            response = await http.post(url, content=orjson.dumps(message), headers=session)
            bodies.append(response.content)
    return bodies


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_report_only_changes_no_byte_and_logs_every_rewrite(mode: ResponseMode) -> None:
    config = dataclasses.replace(protean_rules(), report_only=True)
    with serve(protean_server(mode)) as up:
        with proxy_for(up + "/mcp", config) as px, capture_rewrites() as report:
            direct = await raw_session(up + "/mcp")
            proxied = await raw_session(px + "/mcp")
        with proxy_for(up + "/mcp", protean_rules()) as px, capture_rewrites() as applied:
            rewritten = await raw_session(px + "/mcp")
    assert proxied == direct
    assert rewritten != direct  # the same traffic is rewritten when not in report-only mode
    assert report.lines and all(line["applied"] is False for line in report.lines)
    assert all(line["applied"] is True for line in applied.lines)
    strip = [{k: v for k, v in line.items() if k not in ("applied", "scope")} for line in report.lines]
    assert strip == [{k: v for k, v in line.items() if k not in ("applied", "scope")} for line in applied.lines]


@pytest.mark.anyio
async def test_each_rewrite_is_one_json_line_without_payload_values_or_secrets() -> None:
    token = "Bearer s3cr3t-t0ken-value"
    steps = [{"op": "listTools"}] + [{"op": "callTool", "name": t} for t in TOOLS]
    with serve(protean_server()) as up, proxy_for(up + "/mcp", protean_rules()) as px, capture_rewrites() as log:
        record = (await run_node("v1", [{"url": px + "/mcp", "headers": {"authorization": token}, "steps": steps}]))[0]
    assert all(step["ok"] for step in record["steps"])
    lines = [JSONFormatter().format(r) for r in log.records]
    assert len(lines) == 4  # tools/list (nullable), scope_list, deploy (error_problem), whoami (empty)
    keys = {(line["rule"], line["jsonrpc_id"]) for line in log.lines}
    assert len(keys) == 4  # exactly one line per rewritten message
    for text in lines:
        line = orjson.loads(text)  # every line is one JSON object
        assert {"ts", "rule", "action", "tool", "jsonrpc_id", "scope", "era", "pointers", "reason"} <= line.keys()
        for secret in ("s3cr3t", "SCOPE_DENIED", "token lacks", "change-freeze", "python3.11", "svc-deployer"):
            assert secret not in text, (secret, text)
    assert {line["scope"] for line in log.lines} == {log.lines[0]["scope"]}  # one client, one hashed scope


def _raising(result: dict[str, Any], ctx: object) -> None:
    raise ZeroDivisionError("a buggy rule")


@pytest.mark.anyio
async def test_a_rule_that_raises_forwards_the_original_response_and_logs_the_fault(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    buggy = Rule(name="text_mirror", kind="test", summary="raises", on_result=_raising)
    monkeypatch.setattr("mcp_normalizer.engine.normalize.RESULT_RULES", (*RESULT_RULES[:-1], buggy))
    with serve(protean_server()) as up, proxy_for(up + "/mcp", protean_rules()) as px:
        direct = await raw_session(up + "/mcp")
        with capture_rewrites("mcp_normalizer.engine.transform") as errors:
            proxied = await raw_session(px + "/mcp")
    assert proxied[2:] == direct[2:]  # every tools/call response forwarded exactly as the upstream sent it
    faults = [r for r in errors.records if r.levelno == logging.ERROR and "rule fault" in r.getMessage()]
    assert len(faults) == len(TOOLS)


def test_log_lines_survive_ids_and_names_that_orjson_cannot_write() -> None:
    formatter = JSONFormatter()
    record = logging.LogRecord("mcp_normalizer.rewrite", logging.INFO, __file__, 1, "rewrite", None, None)
    record.audit = {"jsonrpc_id": 18446744073709551616, "tool": "bad\ud800name", "rule": "error_problem"}
    line = orjson.loads(formatter.format(record))
    assert line["jsonrpc_id"] == 18446744073709551616 and line["rule"] == "error_problem"


@pytest.mark.anyio
async def test_an_upstream_key_in_the_url_query_never_reaches_the_log() -> None:
    with serve(protean_server()) as up:
        with proxy_for(up + "/mcp?api_key=S3cr3tKey", protean_rules()) as px, capture_rewrites() as log:
            await raw_session(px + "/mcp")
    assert log.lines and all("S3cr3t" not in orjson.dumps(line).decode() for line in log.lines)
    assert log.lines[0]["upstream"] == f"{up}/mcp?api_key=***"
