"""The README's first command: the demo on the built-in example, run as a user would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .support import free_port

pytestmark = pytest.mark.wire


def test_demo_shows_strict_clients_failing_directly_and_succeeding_through_the_proxy() -> None:
    exe = str(Path(sys.executable).with_name("mcp-normalizer"))
    argv = [exe, "demo", "--once", "--port", str(free_port()), "--upstream-port", str(free_port())]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for client in ("TS SDK 1.32.2", "TS client 2.4.0", "Python mcp 2.3.0"):
        assert client in out
    direct = [line for line in out.splitlines() if line.strip().startswith("direct :")]
    proxied = [line for line in out.splitlines() if line.strip().startswith("proxied:")]
    assert len(direct) == len(proxied) == 12  # 4 tools x 3 clients
    assert sum("THROWS" in line for line in direct) == 5  # TS 1.x on 3 tools, the others on list_runtimes
    assert not any("THROWS" in line for line in proxied)
    assert "[SCOPE_DENIED] token lacks scope 'scopes:read'" in out
    log = out.split("The rewrite log meanwhile", 1)[1].splitlines()[1:]
    assert len(log) == 12 and all('"event":"rewrite"' in line for line in log)  # the rewrite log, JSON lines
