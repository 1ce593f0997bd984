"""A raw stdio MCP server for the tests: newline-delimited JSON-RPC on stdin/stdout, the standard
library only, so each fault of a child process can be staged exactly.

Usage: ``python stdio_server.py PLAN_JSON`` where the plan is::

    {"tools": [<Tool>...], "results": {"<tool>": <CallToolResult>}, "faults": {...}}

Faults (all optional):
  ``noise``: lines written to stdout before each response (a server that logs to stdout);
  ``stderr``: lines written to stderr at start;
  ``crash_on``: the name of a tool whose call makes the server exit (status ``crash_status``)
      without answering, after ``crash_after`` bytes of a half-written line;
  ``big``: bytes of a text block added to every result of tool ``big_tool`` (one long line);
  ``silent_on``: a tool whose calls are never answered;
  ``ignore_term``: SIGTERM is ignored and stdin's end is not an exit (the process must be killed);
  ``exit_status``: the status to exit with when stdin ends;
  ``progress_on``: a tool whose call sends one ``notifications/progress`` (for the request's
      ``progressToken``), then holds its result until the client sends ``notifications/release``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any


def main() -> int:
    plan: dict[str, Any] = json.loads(sys.argv[1])
    faults: dict[str, Any] = plan.get("faults", {})
    out = sys.stdout.buffer
    for line in faults.get("stderr", []):
        sys.stderr.write(line + "\n")
    sys.stderr.flush()
    if faults.get("ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def send(message: dict[str, Any]) -> None:
        for noise in faults.get("noise", []):
            out.write(noise.encode() + b"\n")
        out.write(json.dumps(message, ensure_ascii=False).encode() + b"\n")
        out.flush()

    held: list[Any] = []  # calls of progress_on waiting for notifications/release
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        method, rid = message.get("method"), message.get("id")
        if method == "notifications/release":
            for waiting in held:
                send({"jsonrpc": "2.0", "id": waiting, "result": {"content": [{"type": "text", "text": "released"}]}})
            held.clear()
            continue
        if rid is None or method is None:
            continue  # a notification or a response
        params = message.get("params") or {}
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "stdio-fixture", "version": "1.0.0"},
            }
        elif method == "tools/list":
            result = {"tools": plan["tools"]}
        elif method == "tools/call":
            name = params.get("name")
            if name == faults.get("silent_on"):
                continue
            if name == faults.get("progress_on"):
                token = (params.get("_meta") or {}).get("progressToken")
                progress = {"progressToken": token, "progress": 1, "total": 2, "message": "half way: 12.50 \u2713"}
                send({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
                held.append(rid)
                continue
            if name == faults.get("crash_on"):
                out.write(b'{"jsonrpc":"2.0","id":'[: faults.get("crash_after", 10)])
                out.flush()
                os._exit(faults.get("crash_status", 3))
            result = json.loads(json.dumps(plan["results"][name]))
            if name == faults.get("big_tool"):
                result["content"].append({"type": "text", "text": "x" * faults["big"]})
        elif method == "ping":
            result = {}
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})
            continue
        send({"jsonrpc": "2.0", "id": rid, "result": result})
    if faults.get("ignore_term"):
        while True:
            signal.pause()
    return int(faults.get("exit_status", 0))


if __name__ == "__main__":
    sys.exit(main())
