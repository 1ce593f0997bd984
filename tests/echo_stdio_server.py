"""A raw stdio MCP server that writes down every ``tools/call`` line it receives, byte for byte: the
standard library only.

Usage: ``python echo_stdio_server.py TOOLS_JSON RECORD_FILE``. It lists ``TOOLS_JSON`` (on
2026-07-28 with ``ttlMs`` 60,000 and ``cacheScope: "private"``: the list may be reused for a
minute), appends each ``tools/call`` line as received to ``RECORD_FILE``, and answers the call with
its arguments as text (``json.dumps``, for the client to read; the bytes are in the file).
"""

from __future__ import annotations

import json
import sys
from typing import Any


def main() -> int:
    tools: list[Any] = json.loads(sys.argv[1])
    record = sys.argv[2]
    out = sys.stdout.buffer
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        method, rid = message.get("method"), message.get("id")
        if rid is None or method is None:
            continue  # a notification or a response
        params = message.get("params") or {}
        meta = params.get("_meta") or {}
        modern = str(meta.get("io.modelcontextprotocol/protocolVersion", "")) >= "2026-07-28"
        result: dict[str, Any]
        if method == "initialize":
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "echo-fixture", "version": "1.0.0"},
            }
        elif method == "tools/list":
            result = {"tools": tools}
            if modern:
                result.update(ttlMs=60_000, cacheScope="private")
        elif method == "tools/call":
            with open(record, "ab") as file:
                file.write(raw.rstrip(b"\r\n") + b"\n")
            text = json.dumps(params.get("arguments"), ensure_ascii=False)
            result = {"content": [{"type": "text", "text": text}]}
        else:
            out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": method}}).encode())
            out.write(b"\n")
            out.flush()
            continue
        if modern:
            result["resultType"] = "complete"
        out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}, ensure_ascii=False).encode() + b"\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
