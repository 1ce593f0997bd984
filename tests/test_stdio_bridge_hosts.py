"""Real legacy hosts over stdio through the era bridge (issue 41 item 2, the stdio form): Gemini CLI
and Codex start ``mcp-normalizer stdio -- <a 2026-07-28-only server>`` from their config files and
their model gets the server's tool and its result; started directly, the server refuses their
``initialize`` and the model is offered none of its tools.

The server is :mod:`tests.stdio_server` in its ``modern`` mode; its ``measure`` tool answers with
a decimal written ``12.50``, one written with an exponent, text beyond ASCII and nulls at depth.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mcp_normalizer.demo.upstream import RUNTIMES

from .host_claude import run_claude_code
from .host_codex import run_codex
from .host_gemini import run_gemini_cli
from .host_loop import McpServer, ModelView
from .test_stdio_bridge import MEASURE, modern_plan, stderr_of, through
from .test_stdio_wrapper import fixture, log_lines

pytestmark = pytest.mark.wire

SERVER = "era"
TEXT = "12.50 ✓ 1e-7 9007199254740993 café"


def run_claude_v1(server: McpServer, tool: str, arguments: dict[str, Any], tmp: Path) -> ModelView:
    """Claude Code on its legacy MCP client (``MCP_SDK_GENERATION=v1``: no ``server/discover``)."""
    return run_claude_code(server, tool, arguments, tmp, env={"MCP_SDK_GENERATION": "v1"})


HOSTS: dict[str, tuple[str, Callable[[McpServer, str, dict[str, Any], Path], ModelView]]] = {
    "gemini-cli": ("gemini-cli-mcp-client", run_gemini_cli),
    "codex": ("codex-mcp-client", run_codex),
    "claude-code-v1": ("claude-code", run_claude_v1),
}


@pytest.mark.parametrize("host", list(HOSTS))
def test_a_legacy_host_calls_a_2026_07_28_only_stdio_server_through_the_wrapper_and_not_directly(
    host: str, tmp_path: Path
) -> None:
    plan = modern_plan()
    log = tmp_path / "log.jsonl"
    name, run = HOSTS[host]
    direct = run(McpServer(SERVER, command=fixture(plan)), "measure", {}, tmp_path / "direct")
    bridged = run(McpServer(SERVER, command=through(plan, log)), "measure", {}, tmp_path / "bridged")
    assert direct.tools == {} and TEXT not in (direct.result or ""), direct.log[-4000:]  # none offered
    offered = set(bridged.tools)  # (Codex offers the dotted name as protean_list_runtimes)
    assert len(offered) == 5 and {"measure", "progress", "ask", "whoami"} <= offered, bridged.log[-4000:]
    assert bridged.result is not None, bridged.log[-4000:]
    if host == "codex":  # it shows its model structuredContent as JSON: every value, the nulls included
        assert json.loads(bridged.result.partition("Output:\n")[2]) == MEASURE, bridged.result
    elif host == "claude-code-v1":  # structuredContent as JSON too
        assert json.loads(bridged.result) == MEASURE, bridged.result
    else:  # Gemini CLI's model reads content: the text as the server wrote it
        assert TEXT in bridged.result, bridged.result
    stderr = stderr_of(log_lines(log))
    calls = [t for t in stderr if t.startswith("request: tools/call")]
    assert calls and all(f" 2026-07-28 {name} " in t for t in calls), stderr  # the host's own name


@pytest.mark.parametrize("route", ["direct", "wrapper"])
def test_claude_code_on_its_own_handshake_speaks_2026_07_28_natively_and_is_not_bridged(
    route: str, tmp_path: Path
) -> None:
    """Claude Code without ``MCP_SDK_GENERATION=v1``: whatever it speaks to a 2026-07-28-only stdio
    server directly, it speaks through the wrapper, which bridges nothing for it (no ``initialize``
    reaches the server: the host asked ``server/discover`` itself)."""
    plan = modern_plan()
    log = tmp_path / "log.jsonl"
    command = fixture(plan) if route == "direct" else through(plan, log)
    view = run_claude_code(McpServer(SERVER, command=command), "measure", {}, tmp_path)
    assert view.result is not None and json.loads(view.result) == MEASURE, view.log[-4000:]
    if route == "wrapper":
        lines = log_lines(log)
        assert not any("the host is bridged" in line.get("message", "") for line in lines)
        stderr = stderr_of(lines)
        assert "refused: initialize" not in stderr
        assert all(" 2026-07-28 claude-code " in t for t in stderr if t.startswith("request: ")), stderr


def test_the_repaired_result_of_a_bridged_call_reaches_codexs_model_whole(tmp_path: Path) -> None:
    """The Protean tool's result (a ``null`` where its old schema says string: rule ``nullable``
    repairs the schema on the bridged listing) reaches Codex's model with every value; the call
    reached the server once, at 2026-07-28, under Codex's own name."""
    plan = modern_plan()
    log = tmp_path / "log.jsonl"
    view = run_codex(McpServer(SERVER, command=through(plan, log)), "protean.list_runtimes", {}, tmp_path)
    assert view.result is not None, view.log[-4000:]
    assert json.loads(view.result.partition("Output:\n")[2]) == RUNTIMES, view.result
    lines = log_lines(log)
    assert any(line.get("rule") == "nullable" and line.get("upstream_era") == "2026-07-28" for line in lines)
    calls = [t for t in stderr_of(lines) if t.startswith("request: tools/call")]
    assert calls == [calls[0]] and " 2026-07-28 codex-mcp-client " in calls[0]
