"""The stdio server of ``bench/stdio.py`` (the standard library only, so it costs little itself).

Tools: ``small`` (a small result with ``structuredContent``), ``big`` (a 1 MiB text result),
``progress`` (100 ``notifications/progress`` 5 ms apart, each carrying the time it was written as
its ``message``, then a small result).
"""

from __future__ import annotations

import json
import sys
import time

TOOLS = [
    {
        "name": name,
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "number"}}},
    }
    for name in ("small", "big", "progress")
]
SMALL = {"content": [{"type": "text", "text": '{"ok": true, "n": 12.5}'}], "structuredContent": {"ok": True, "n": 12.5}}
BIG = {"content": [{"type": "text", "text": "x" * (1 << 20)}], "structuredContent": {"ok": True, "n": 1e-3}}


def main() -> None:
    out = sys.stdout.buffer
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        rid, method = message.get("id"), message.get("method")
        if rid is None:
            continue
        params = message.get("params") or {}
        if method == "initialize":
            result: object = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "bench-stdio", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif params.get("name") == "big":
            result = BIG
        elif params.get("name") == "progress":
            token = (params.get("_meta") or {}).get("progressToken")
            for i in range(100):
                note = {"progressToken": token, "progress": i, "total": 100, "message": repr(time.time())}
                out.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": note}).encode())
                out.write(b"\n")
                out.flush()
                time.sleep(0.005)
            result = SMALL
        else:
            result = SMALL
        out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
