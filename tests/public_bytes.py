"""What the proxy sends a client that is no host, for every public fault case (issue 40's guard).

For each case of ``../shared/cases/public.json`` a scripted upstream serves the case's tool and its
result (``application/json`` responses); the proxy stands in front; a raw HTTP client opens a
session as the Python SDK client names itself (``{"name": "mcp", "version": "1.0"}``) and as a
client that sends no ``clientInfo``, lists the tools and calls the case's tool. The bodies of the
``tools/list`` and ``tools/call`` responses, byte for byte, are what :data:`GOLDEN` holds.

The golden file was written by ``scripts/public-bytes --write`` run on the code before issue 40's
host-aware result rules (commit b9dbf53, this module copied into that tree): the rules for hosts
must never reach these clients. Regenerate it only on purpose, for a change meant for every client.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from .support import ROOT, case_server, load_cases, proxy_for, serve

GOLDEN = ROOT / "tests" / "golden" / "public-bytes.json"
#: The clients compared: the Python SDK client's own name, and none.
CLIENTS: dict[str, dict[str, str] | None] = {"sdk": {"name": "mcp", "version": "1.0"}, "unknown": None}
_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
_VERSION = "2025-06-18"


def _session(http: httpx.Client, url: str, case: dict[str, Any], client: dict[str, str] | None) -> dict[str, str]:
    """The two response bodies (``tools/list``, ``tools/call``) one session gets for ``case``."""
    params: dict[str, Any] = {"protocolVersion": _VERSION, "capabilities": {}}
    if client is not None:
        params["clientInfo"] = client
    headers = {**_HEADERS, "x-case": case["id"]}

    def post(body: dict[str, Any]) -> httpx.Response:
        return http.post(url, content=json.dumps(body).encode(), headers=headers)

    opened = post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
    if "mcp-session-id" in opened.headers:
        headers["mcp-session-id"] = opened.headers["mcp-session-id"]
    headers["mcp-protocol-version"] = _VERSION
    post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    listed = post({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    call = {"name": case["tool"]["name"], "arguments": {}}
    called = post({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
    return {"tools/list": listed.content.decode(), "tools/call": called.content.decode()}


def record() -> dict[str, dict[str, dict[str, str]]]:
    """Every public case's response bodies per client: ``{case id: {client: {method: body}}}``."""
    cases = load_cases()
    found: dict[str, dict[str, dict[str, str]]] = {}
    with serve(case_server(cases, "json")) as up, proxy_for(up + "/mcp") as px, httpx.Client(timeout=30) as http:
        for case in cases:
            found[case["id"]] = {name: _session(http, px + "/mcp", case, info) for name, info in CLIENTS.items()}
    return found


def write(path: Path = GOLDEN) -> None:
    """Write :func:`record`'s bodies to ``path`` (sorted, one JSON document)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record(), indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
