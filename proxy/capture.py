"""``Capture``: record the traffic the rules see, for ``mcp-normalizer check --capture`` to replay offline.

Off by default; on with ``[proxy] capture_file`` (``MCP_NORMALIZER_CAPTURE_FILE``). For every
response to a watched request (``tools/list`` pages, ``tools/call`` results, task results), the
proxy appends two lines to the file: the request and the response as the upstream sent it, before
any rule ran. Each line is one JSON object::

    {"ts": "2026-11-29T23:59:59.123Z", "scope": "678f6d677c13155d", "era": "2025-11-25",
     "message": {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "protean.scope_list"}}}
    {"ts": "...", "scope": "678f6d677c13155d", "era": "2025-11-25",
     "message": {"jsonrpc": "2.0", "id": 3, "result": {...}}}

``scope`` is the hashed session/authorization scope (ids are unique only within one), ``era`` the
exchange's protocol version. The request is reduced to what the rules use: its method, id, tool
name, cursor or task id; arguments are never recorded. Results are recorded whole, with their
values: the file holds payload data (never a header) and must be treated like the traffic itself.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from .errors import DecodeError
from .jsoncodec import dumps
from .jsonrpc import TOOLS_CALL, TOOLS_LIST, PendingRequest
from .types import JSON, JSONObject

logger = logging.getLogger("mcp_normalizer.capture")


def request_message(request: PendingRequest, jsonrpc_id: JSON) -> JSONObject:
    """The JSON-RPC request a watched response answers, reduced to what the rules use (no arguments)."""
    params: JSONObject = {}
    if request.method == TOOLS_CALL and request.tool is not None:
        params["name"] = request.tool
    if request.method == TOOLS_LIST and request.cursor is not None:
        params["cursor"] = request.cursor
    if request.task_id is not None:
        params["taskId"] = request.task_id
    return {"jsonrpc": "2.0", "id": jsonrpc_id, "method": request.method, "params": params}


class Capture:
    """Appends request/response pairs to a JSON-lines file.

    Args:
        path: the file; created if missing, appended to otherwise.

    A write that fails (disk full, permissions) is logged once and capture stops; the traffic
    itself is never affected.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._failed = False

    def exchange(
        self, *, scope: str, era: str | None, request: PendingRequest, jsonrpc_id: JSON, response: JSONObject
    ) -> None:
        """Record one watched request and the upstream's response to it (two lines)."""
        if self._failed:
            return
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"
        try:
            lines = b"".join(
                dumps({"ts": ts, "scope": scope, "era": era, "message": message}) + b"\n"
                for message in (request_message(request, jsonrpc_id), response)
            )
        except DecodeError:
            logger.warning("capture: a %s response that cannot be written as JSON was skipped", request.method)
            return
        try:
            with self.path.open("ab") as file:  # opened per write: rotating the file needs no signal
                file.write(lines)
        except OSError as exc:  # never let the capture break the traffic
            self._failed = True
            logger.error("capture to %s stopped: %s", self.path, exc)
