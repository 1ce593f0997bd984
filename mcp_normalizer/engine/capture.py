"""``Capture``: record the traffic the rules see, for ``mcp-normalizer check --capture`` to replay offline.

Off by default; on with ``[proxy] capture_file`` (``MCP_NORMALIZER_CAPTURE_FILE``). For every
response to a watched request (``tools/list`` pages, ``tools/call`` results, task results), the
proxy appends two lines to the file: the request and the response as the upstream sent it, before
any rule ran. Each line is one JSON object::

    {"ts": "2026-11-29T23:59:59.123Z", "scope": "678f6d677c13155d", "era": "2025-11-25",
     "message": {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "protean.scope_list"}}}
    {"ts": "...", "scope": "678f6d677c13155d", "era": "2025-11-25",
     "message": {"jsonrpc": "2.0", "id": 3, "result": {...}}}

The ``notifications/tasks`` and ``notifications/tools/list_changed`` notifications the rules read
are recorded too (one line each). ``scope`` is the hashed session/authorization scope (ids are
unique only within one), ``era`` the exchange's protocol version. The request is reduced to what
the rules use: its method, id, tool name, cursor or task id; arguments are never recorded. Results
are recorded whole, with their values: the file holds payload data (never a header) and must be
treated like the traffic itself.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
from pathlib import Path

from ..errors import DecodeError
from ..types import JSON, JSONObject
from ..wire.jsoncodec import dumps
from ..wire.jsonrpc import TOOLS_CALL, TOOLS_LIST, PendingRequest

logger = logging.getLogger(__name__)


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
    """Appends request/response pairs (and task notifications) to a JSON-lines file.

    Args:
        path: the file; created if missing, appended to otherwise (opened per batch of lines, so
            rotating it needs no signal).
        max_queued_bytes: lines waiting for the disk beyond this are dropped (and counted in a
            warning) rather than held in memory.

    Lines are written by a thread of their own: a slow disk, a full one or a path that blocks (a
    FIFO, a hung network mount) never stalls the traffic. A write that fails is logged once and
    capture stops. :meth:`close` writes what is queued.
    """

    def __init__(self, path: str | Path, max_queued_bytes: int = 64 * 1024 * 1024) -> None:
        self.path = Path(path)
        self.max_queued_bytes = max_queued_bytes
        self.dropped = 0
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._queued = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._failed = False
        atexit.register(self.close)

    def exchange(
        self, *, scope: str, era: str | None, request: PendingRequest, jsonrpc_id: JSON, response: JSON
    ) -> None:
        """Record one watched request and the upstream's response to it (two lines); the response
        may be its undecoded text (a :data:`~mcp_normalizer.wire.jsoncodec.Raw`), written as it came."""
        self._record(scope, era, (request_message(request, jsonrpc_id), response), request.method)

    def notification(self, *, scope: str, era: str | None, message: JSON, method: str) -> None:
        """Record a notification the rules read (a ``notifications/tasks`` final result, ``list_changed``)."""
        self._record(scope, era, (message,), method)

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (waiting at most ``timeout`` seconds) and stop the writer thread."""
        thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout)
            self._thread = None

    def _record(self, scope: str, era: str | None, messages: tuple[JSON, ...], what: str) -> None:
        if self._failed:
            return
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"
        try:
            lines = b"".join(dumps({"ts": ts, "scope": scope, "era": era, "message": m}) + b"\n" for m in messages)
        except DecodeError:
            logger.warning("capture: a %s message that cannot be written as JSON was skipped", what)
            return
        with self._lock:
            if self._queued + len(lines) > self.max_queued_bytes:
                self.dropped += 1
                if self.dropped == 1 or self.dropped % 1000 == 0:
                    logger.warning("capture: the disk is behind; %d messages dropped so far", self.dropped)
                return
            self._queued += len(lines)
            if self._thread is None:
                self._thread = threading.Thread(target=self._write, name="mcp-normalizer-capture", daemon=True)
                self._thread.start()
        self._queue.put(lines)

    def _write(self) -> None:
        """The writer thread: batches of queued lines appended to the file, until ``None``."""
        stop = False
        while not stop:
            batch = [self._queue.get()]
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            stop = None in batch
            data = b"".join(piece for piece in batch if piece is not None)
            if data and not self._failed:
                try:
                    with self.path.open("ab") as file:
                        file.write(data)
                except OSError as exc:  # never let the capture break the traffic
                    self._failed = True
                    logger.error("capture to %s stopped: %s", self.path, exc)
            with self._lock:
                self._queued -= len(data)
