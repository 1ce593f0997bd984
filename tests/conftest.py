"""Test tiers: every test is one of

- ``pure``: the sans-IO core and the rules, no event loop server, no socket, no process;
- ``inprocess``: ASGI apps driven in this process (httpx's ASGI transport, the Python MCP client
  over in-memory streams), still no socket and no process;
- ``wire``: real servers on loopback, real MCP clients (Node, Python), the command's processes.

A module names its tier with ``pytestmark``, or (a module of mixed tiers) each test names its own;
never both, so ``-m`` selects each test in exactly one tier. A ``pure`` or ``inprocess`` test
that opens a network connection, listens or starts a process fails: the tiers say what they run.
``pytest -m pure`` (seconds), ``-m "pure or inprocess"``, ``-m wire`` (minutes).
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

TIERS = ("pure", "inprocess", "wire")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tiers = {m.name for m in item.iter_markers() if m.name in TIERS}
        if len(tiers) != 1:
            named = ", ".join(sorted(tiers)) or "none"
            raise pytest.UsageError(f"{item.nodeid} must name one tier of {', '.join(TIERS)} (names {named})")


@pytest.fixture(autouse=True)
def _tier_holds(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    tier = next(m.name for m in request.node.iter_markers() if m.name in TIERS)
    if tier != "wire":

        def refused(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"a {tier} test opened a connection, listened or started a process: mark it wire")

        for name in ("connect", "connect_ex", "bind", "listen"):
            monkeypatch.setattr(socket.socket, name, refused)
        monkeypatch.setattr(subprocess.Popen, "__init__", refused)
    yield
