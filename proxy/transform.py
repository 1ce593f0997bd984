"""The sans-IO response transformer shared by the middleware and the proxy.

One :class:`ResponseTransformer` handles one HTTP response. ``start()`` reads the status and
headers and picks a mode; ``feed(chunk)`` returns the bytes that may go to the client now;
``finish()`` returns the rest. It never awaits: when a response needs the schema of a tool whose
``tools/list`` is still being fetched, it sets :attr:`~ResponseTransformer.stalled`, keeps that
event and everything after it, and the caller calls :meth:`~ResponseTransformer.resume` once the
fetch is over.

- ``application/json`` (status 200): the body is collected, its responses normalized, and
  ``content-length`` recomputed (the caller holds the response start until then).
- ``text/event-stream``: split into events; an event is forwarded byte-identical as soon as it is
  complete unless it carries a response the proxy rewrites.
- Anything else (other statuses, content types, encodings): passed through untouched.

A rule that raises is a bug: the message it was working on is forwarded unchanged and the fault is
logged (fail open, DESIGN section 3).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .audit import AuditLog
from .capture import Capture
from .catalog import ToolCatalog, ToolEntry
from .errors import DecodeError
from .jsoncodec import dumps, loads
from .jsonrpc import (
    TASKS_GET,
    TASKS_RESULT,
    TOOLS_CALL,
    TOOLS_LIST,
    IdKey,
    PendingRequest,
    header,
    id_key,
    object_only,
)
from .normalize import Normalizer, Outcome
from .scopes import ScopeState
from .sse import SSESplitter, parse_event, replace_data
from .types import JSON, JSONObject, RawHeaders

logger = logging.getLogger("mcp_normalizer.transform")

Mode = Literal["json", "sse", "pass"]


@dataclass(slots=True)
class Exchange:
    """What the proxy watches on one HTTP exchange.

    Attributes:
        pending: watched requests by JSON-RPC id key: the POST's own, or for a legacy ``GET``
            stream the session's unanswered ones (resumption).
        era: the protocol version of the exchange, ``None`` when unknown.
        scope: the hashed session/authorization scope (safe to log).
        state: what is remembered for that scope (catalog, unanswered requests, tasks).
        public: tools the upstream listed with ``cacheScope: "public"`` (any scope may use them).
        fetching: tools whose ``tools/list`` fetch is in flight; a response for one of them waits.
        learned: tools learned during this exchange; usable by it even when the list's ``ttlMs``
            is 0 (the list may not be reused by later exchanges).
        lists_expire: honour a 2026-07-28 list's ``ttlMs``; off when replaying a capture, which has
            no clock (a list then lasts until the next one or ``list_changed``).
    """

    pending: Mapping[IdKey, PendingRequest]
    era: str | None
    scope: str
    state: ScopeState
    public: ToolCatalog = field(default_factory=ToolCatalog)
    fetching: set[str] = field(default_factory=set)
    learned: dict[str, ToolEntry] = field(default_factory=dict)
    lists_expire: bool = True

    def tool(self, name: str | None) -> ToolEntry | None:
        """The entry of tool ``name`` as this exchange may use it, if known."""
        if name is None:
            return None
        return self.learned.get(name) or self.state.catalog.get(name) or self.public.get(name)

    def tool_of(self, request: PendingRequest) -> str | None:
        """The tool a watched request concerns: the called tool, or the tool that started its task."""
        if request.tool is not None:
            return request.tool
        return self.state.tasks.get(request.task_id) if request.task_id is not None else None

    def learn_tools(self, result: JSONObject, entries: list[ToolEntry], *, first_page: bool) -> None:
        """Record a ``tools/list`` page: for the scope, for this exchange and, when the upstream
        marked it ``cacheScope: "public"``, for every scope. A 2026-07-28 list is reused for its
        ``ttlMs`` only (absent or negative: 0); a legacy list lasts until invalidated."""
        ttl: float | None = None
        if self.lists_expire and not object_only(self.era):
            ttl_ms = result.get("ttlMs")
            ttl = (
                max(float(ttl_ms), 0.0) / 1000
                if isinstance(ttl_ms, int | float) and not isinstance(ttl_ms, bool)
                else 0.0
            )
        self.state.catalog.learn(entries, first_page=first_page, ttl=ttl)
        if result.get("cacheScope") == "public":
            self.public.learn(entries, first_page=first_page, ttl=ttl)
        self.learned.update((entry.name, entry) for entry in entries)

    def forget_tools(self) -> None:
        """The upstream said its tool list changed: forget what was learned."""
        self.state.catalog.clear()
        self.public.clear()
        self.learned.clear()


class _Stall(Exception):
    """Internal: the message needs a tool schema that is still being fetched."""


class ResponseTransformer:
    """Normalizes the JSON-RPC responses of one HTTP response, streaming.

    Args:
        exchange: the requests to watch and where their tools are known.
        normalizer: the rule engine.
        audit: where rewrite log lines go.
        max_json_bytes: a JSON body larger than this is passed through without rewriting (logged).
        max_event_bytes: an SSE event larger than this ends splitting; the rest passes through.
        capture: where watched requests and the upstream's responses are recorded, if anywhere.
    """

    def __init__(
        self,
        exchange: Exchange,
        normalizer: Normalizer,
        audit: AuditLog,
        *,
        max_json_bytes: int = 64 * 1024 * 1024,
        max_event_bytes: int = 64 * 1024 * 1024,
        capture: Capture | None = None,
    ) -> None:
        self.exchange = exchange
        self.capture = capture
        self.normalizer = normalizer
        self.audit = audit
        self.mode: Mode = "pass"
        self.status = 0
        self.headers: RawHeaders = []
        self._max_json = max_json_bytes
        self._body = bytearray()
        self._splitter = SSESplitter(max_pending=max_event_bytes)
        # Pieces waiting to go out, in order: (bytes, inspect?). Raw bytes after an oversized event
        # are not event blocks and are never inspected.
        self._queue: deque[tuple[bytes, bool]] = deque()
        self._finished = False
        self.stalled = False
        self.oversize = False  # a body or event was too large to rewrite and passed through

    @property
    def hold_start(self) -> bool:
        """True while the response start must be held (JSON mode: ``content-length`` may change)."""
        return self.mode == "json"

    def start(self, status: int, headers: RawHeaders) -> None:
        """Read the response start and choose the mode; :attr:`headers` holds the headers to send."""
        self.status = status
        media_type, _, parameters = (header(headers, b"content-type") or "").partition(";")
        content_type = media_type.strip().lower()
        encoding = (header(headers, b"content-encoding") or "identity").strip().lower()
        charset = _charset(parameters)
        if status != 200 or encoding != "identity" or charset not in (None, "utf-8", "utf8"):
            self.mode = "pass"  # a body the proxy would have to re-encode differently: untouched
        elif content_type == "application/json":
            self.mode = "json"
        elif content_type == "text/event-stream":
            self.mode = "sse"
            headers = [(k, v) for k, v in headers if k != b"content-length"]
        self.headers = list(headers)

    # -- body ---------------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> bytes:
        """Take the next body chunk; return the bytes that may be sent now."""
        if self.mode == "pass":
            return chunk
        if self.mode == "json":
            self._body += chunk
            if len(self._body) > self._max_json:
                logger.warning("JSON body above %d bytes: passed through without rewriting", self._max_json)
                self.oversize = True
                self.mode = "pass"
                out, self._body = bytes(self._body), bytearray()
                return out
            return b""
        if self._splitter.overflowed:
            self._queue.append((chunk, False))
        else:
            self._queue.extend((block, True) for block in self._splitter.feed(chunk))
            if self._splitter.overflowed:
                logger.warning(
                    "SSE event above %d bytes: rest of the stream passed through", self._splitter.max_pending
                )
                self._queue.append((self._splitter.flush(), False))
        return b"" if self.stalled else self._drain()

    def finish(self) -> bytes:
        """End of the body: return everything left (normalized where it applies)."""
        self._finished = True
        if self.mode == "json":
            return self._finish_json()
        if self.mode == "sse":
            tail = self._splitter.flush()
            if tail:
                self._queue.append((tail, False))  # an unterminated event is never dispatched: as is
            return b"" if self.stalled else self._drain()
        return b""

    def resume(self) -> bytes:
        """After the tool fetch the stall waited for: return what can now be sent."""
        self.stalled = False
        if self.mode == "json" and self._finished:
            return self._finish_json()
        return self._drain()

    def _drain(self) -> bytes:
        out = bytearray()
        while self._queue:
            piece, inspect = self._queue[0]
            try:
                out += self._event(piece) if inspect else piece
            except _Stall:
                self.stalled = True
                break
            self._queue.popleft()
        return bytes(out)

    def _event(self, block: bytes) -> bytes:
        if not (self.exchange.pending and b'"result"' in block) and not any(word in block for word in _NOTICES):
            return block
        event = parse_event(block)
        if event.event != "message" or not event.data:
            return block
        try:
            value = loads(event.data)
        except DecodeError:
            return block
        new = self._messages(value, len(event.data))
        if new is value:
            return block
        try:
            return replace_data(block, dumps(new))
        except DecodeError:
            logger.warning("rewritten message cannot be encoded: forwarded unchanged")
            return block

    def _finish_json(self) -> bytes:
        body = bytes(self._body)
        try:
            value = loads(body)
        except DecodeError:
            value = None
        try:
            new = self._messages(value, len(body)) if value is not None else None
        except _Stall:
            self.stalled = True
            return b""
        self.mode = "pass"  # the start may go now
        self._body = bytearray()
        if new is None or new is value:
            return body
        try:
            out = dumps(new)
        except DecodeError:
            logger.warning("rewritten message cannot be encoded: forwarded unchanged")
            return body
        self.headers = [(k, v) for k, v in self.headers if k != b"content-length"]
        self.headers.append((b"content-length", str(len(out)).encode()))
        return out

    # -- JSON-RPC -----------------------------------------------------------------------------

    def _messages(self, value: JSON, size: int) -> JSON:
        """Normalize one message or a batch; return ``value`` itself when nothing changed.

        Raises:
            _Stall: a response needs a tool whose ``tools/list`` is still being fetched.
        """
        batch = value if isinstance(value, list) else [value]
        exchange = self.exchange
        for message in batch:
            request = self._request_of(message)
            if request is not None and request.method != TOOLS_LIST:
                tool = exchange.tool_of(request)
                if tool in exchange.fetching and exchange.tool(tool) is None:
                    raise _Stall
        changed = False
        out = []
        for message in batch:
            new = self._message(message, size)
            changed = changed or new is not message
            out.append(new)
        if not changed:
            return value
        return out if isinstance(value, list) else out[0]

    def _request_of(self, message: JSON) -> PendingRequest | None:
        if not isinstance(message, dict) or not isinstance(message.get("result"), dict):
            return None
        key = id_key(message.get("id"))
        return self.exchange.pending.get(key) if key is not None else None

    def _message(self, message: JSON, size: int) -> JSON:
        if isinstance(message, dict) and "id" not in message and isinstance(message.get("method"), str):
            return self._notification(message, size)
        request = self._request_of(message)
        if request is None:
            return message
        assert isinstance(message, dict)
        exchange = self.exchange
        key = id_key(message.get("id"))
        if key is not None:
            exchange.state.pending.pop(key)  # answered: no later GET will carry it
        if self.capture is not None:
            self.capture.exchange(
                scope=exchange.scope, era=exchange.era, request=request, jsonrpc_id=message.get("id"), response=message
            )
        try:
            result = self._result(request, message["result"], size)
        except Exception:
            logger.exception("rule fault on %s id=%r: response forwarded unchanged", request.method, message.get("id"))
            return message
        if result is None:
            return message
        for record in result.records:
            self.audit.emit(
                record, method=request.method, jsonrpc_id=message.get("id"), scope=exchange.scope, era=exchange.era
            )
        return {**message, "result": result.result} if result.changed else message

    def _result(self, request: PendingRequest, result: JSONObject, size: int) -> Outcome | None:
        """Normalize the result of one watched request; ``None`` when it is not the proxy's to touch."""
        exchange, normalizer = self.exchange, self.normalizer
        if request.method == TOOLS_LIST:
            outcome = normalizer.tools_list(result, exchange.era)
            exchange.learn_tools(result, outcome.entries, first_page=request.cursor is None)
            return outcome
        if request.method == TOOLS_CALL:
            task_id = _task_handle(result)
            if task_id is not None:
                if request.tool is not None:
                    exchange.state.tasks.put(task_id, request.tool)
                return None
            if result.get("resultType", "complete") != "complete":
                return None  # input_required, or a result type this proxy does not know
            return normalizer.tools_call(result, request.tool, exchange.tool(request.tool), exchange.era, size)
        if request.method == TASKS_RESULT:  # 2025-11-25: the result is the tool's CallToolResult
            tool = exchange.tool_of(request)
            return normalizer.tools_call(result, tool, exchange.tool(tool), exchange.era, size)
        if request.method == TASKS_GET:  # 2026-07-28 tasks extension: a completed task carries it
            return self._completed_task(result, request.task_id, size)
        return None

    def _completed_task(self, task: JSONObject, task_id: str | None, size: int) -> Outcome | None:
        inner = task.get("result")
        if task.get("status") != "completed" or not isinstance(inner, dict):
            return None
        known = task.get("taskId") if isinstance(task.get("taskId"), str) else task_id
        tool = self.exchange.state.tasks.get(known) if isinstance(known, str) else None
        outcome = self.normalizer.tools_call(inner, tool, self.exchange.tool(tool), self.exchange.era, size)
        if outcome.changed:
            outcome.result = {**task, "result": outcome.result}
        else:
            outcome.result = task
        return outcome

    def _notification(self, message: JSONObject, size: int) -> JSONObject:
        method = message["method"]
        if method in ("notifications/tools/list_changed", "notifications/tasks") and self.capture is not None:
            self.capture.notification(scope=self.exchange.scope, era=self.exchange.era, message=message)
        if method == "notifications/tools/list_changed":
            self.exchange.forget_tools()
            return message
        params = message.get("params")
        if method != "notifications/tasks" or not isinstance(params, dict):
            return message
        try:
            outcome = self._completed_task(params, None, size)
        except Exception:
            logger.exception("rule fault on %s: notification forwarded unchanged", method)
            return message
        if outcome is None:
            return message
        for record in outcome.records:
            self.audit.emit(record, method=method, jsonrpc_id=None, scope=self.exchange.scope, era=self.exchange.era)
        return {**message, "params": outcome.result} if outcome.changed else message


def _charset(parameters: str) -> str | None:
    """The ``charset`` of a content-type's parameters, lower-cased, or ``None``."""
    for parameter in parameters.split(";"):
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"').lower()
    return None


#: Words that make an event worth parsing even when it answers no watched request.
_NOTICES = (b"list_changed", b"notifications/tasks")


def _task_handle(result: JSONObject) -> str | None:
    """The task id of a ``CreateTaskResult`` (2025-11-25 ``{task: {taskId}}``, 2026-07-28
    ``{resultType: "task", taskId}``), else ``None``."""
    if result.get("resultType") == "task" and isinstance(result.get("taskId"), str):
        return str(result["taskId"])
    task = result.get("task")
    if isinstance(task, dict) and isinstance(task.get("taskId"), str) and "content" not in result:
        return str(task["taskId"])
    return None
