"""The sans-IO response transformer shared by the middleware and the proxy.

One :class:`ResponseTransformer` handles one HTTP response. ``start()`` reads the status and
headers and picks a mode; ``feed(chunk)`` returns the bytes that may go to the client now;
``finish()`` returns the rest. It never awaits, and never holds its caller long:

- when a response needs the schema of a tool whose ``tools/list`` is still being fetched, it sets
  :attr:`~ResponseTransformer.stalled`, keeps that event and everything after it, and the caller
  calls :meth:`~ResponseTransformer.resume` once the fetch is over;
- when a message takes longer than a slice (:data:`mcp_normalizer.engine.steps.SLICE_SECONDS`: the rules over a
  ``tools/list`` of thousands of tools), it sets :attr:`~ResponseTransformer.busy` and keeps the
  work where it stopped; the caller lets the event loop run, then calls ``resume`` again.

- ``application/json`` (status 200): the body is collected, its responses normalized, and
  ``content-length`` recomputed (the caller holds the response start until then).
- ``text/event-stream``: split into events; an event is forwarded byte-identical as soon as it is
  complete unless it carries a response the proxy rewrites.
- Anything else (other statuses, content types, encodings): passed through untouched.

On a POST's own stream (:attr:`Exchange.own_stream`) every response must answer one of the POST's
requests, once. A reply with an id of no such request (or a second reply to one) is another
request's: a late duplicate of an earlier response, or bytes meant for another exchange. It is
never delivered, and its id is never rewritten: the transformer sets :attr:`~ResponseTransformer.foreign`,
drops it and everything after it, and the caller answers the requests still unanswered with a
JSON-RPC error and closes the upstream connection (:mod:`mcp_normalizer.hop.relay`). The one id fault
repaired is the request's own id in another type (``"1"`` for ``1``), ``null`` or missing
(rule ``jsonrpc_id``).

A rule that raises is a bug: the message it was working on is forwarded unchanged and the fault is
logged (fail open, DESIGN section 3).
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Mapping
from typing import Literal

from msgspec import UNSET

from ..errors import DecodeError
from ..types import JSON, JSONObject, RawHeaders
from ..wire.eras import era_of
from ..wire.jsoncodec import Codec, Raw, dumps, is_utf8, join_array, join_object, quiet_gc, split_object
from ..wire.jsonrpc import (
    TASKS_GET,
    TASKS_RESULT,
    TOOLS_CALL,
    TOOLS_LIST,
    WATCHED_METHODS,
    Envelope,
    IdKey,
    PendingRequest,
    header,
    id_key,
    read_batch,
    read_envelope,
    same_value,
)
from ..wire.sse import SSESplitter, parse_event, replace_data
from .audit import AuditLog
from .capture import Capture
from .exchange import Exchange
from .lessons import taught_now
from .normalize import Normalizer, Record
from .rules import Mode as RuleMode
from .rules import Rewrite
from .rules.base import Response, ResponseContext
from .rules.era_fields import missing as era_fields_missing
from .rules.jsonrpc_envelope import LIST_METHODS
from .rules.learned import LIST_CHANGED, Learned
from .rules.learned import RULE as LEARN_RULE
from .rules.lone_surrogates import may_hold as may_hold_surrogate
from .rules.sse_framing import REWRITE as SSE_REWRITE
from .rules.sse_framing import RULE as SSE_FRAMING
from .steps import LARGE_TEXT, SLICE_SECONDS, Steps, Unfinished, run_slice
from .tools_list import tools_list_page

logger = logging.getLogger(__name__)

Mode = Literal["json", "sse", "pass"]
#: The new value of a message member: its JSON text, or the undecoded parts of a JSON object
#: (texts, or lists of texts, by member name) already known to be UTF-8, written together with
#: the message in one pass (a 16 MiB ``tools/list`` page is then copied once, not three times).
NewText = bytes | dict[str, Raw | list[Raw]]


class _Hold(Exception):
    """Internal: an SSE response that answers the POST's request only by position waits for the
    stream's end (or a response with the right id): until then it may not be the answer."""


class _Stall(Exception):
    """Internal: the message needs a tool schema that is still being fetched."""


class _Foreign(Exception):
    """Internal: the message is a reply to no request of the POST (see :attr:`ResponseTransformer.foreign`)."""


#: What a learned record adds while the lesson waits for a second witness (:mod:`mcp_normalizer.engine.lessons`).
_PENDING = "every session's once a result seen from another authorization (or session) shows it too"


class ResponseTransformer:
    """Normalizes the JSON-RPC responses of one HTTP response, streaming.

    Args:
        exchange: the requests to watch and where their tools are known.
        normalizer: the rule engine.
        audit: where rewrite log lines go.
        max_json_bytes: a JSON body larger than this is passed through without rewriting (logged).
        max_event_bytes: an SSE event larger than this ends splitting; the rest passes through.
        capture: where watched requests and the upstream's responses are recorded, if anywhere.
        slice_seconds: how long one call may work on a message before it hands back (``busy``).

    A body or event larger than the normalizer's ``max_validate_bytes`` that can only answer a
    ``tools/call`` (no ``tools/list`` is pending) is passed on unparsed: a JSON body is streamed as it
    arrives when its ``content-length`` says so up front. One ``skipped`` line is logged.
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
        slice_seconds: float = SLICE_SECONDS,
    ) -> None:
        self.exchange = exchange
        self.capture = capture
        self.normalizer = normalizer
        self.audit = audit
        self.mode: Mode = "pass"
        self.status = 0
        self.headers: RawHeaders = []
        self._max_json = max_json_bytes
        self._body: list[bytes] = []
        self._size = 0
        # Above this a result is not read at all, unless the response may carry a tools/list.
        self._bulk = math.inf if _may_list(exchange.pending) else normalizer.config.max_validate_bytes
        self._splitter = SSESplitter(max_pending=max_event_bytes)
        # Pieces waiting to go out, in order: (bytes, inspect?). Raw bytes after an oversized event
        # are not event blocks and are never inspected.
        self._queue: deque[tuple[bytes, bool]] = deque()
        self._finished = False
        self._first_block = True
        self._slice = slice_seconds
        # The work on the message at the head of the queue (or the JSON body) where it stopped.
        self._job: Steps[bytes | None] | None = None
        self.stalled = False
        self.busy = False  # a message is half done: let the loop run, then call resume()
        #: Seconds the last slice took (while :attr:`busy`): a slice holding one pass over a huge
        #: text runs past ``slice_seconds``, and the caller lets the loop run longer after it.
        self.spent = 0.0
        self.oversize = False  # a body or event was too large to rewrite and passed through
        self._answered = False  # the POST's one request has had its response
        self._announce = False  # a result taught the scope something: list_changed goes before it (SSE)
        self._answering: JSON = None  # the JSON-RPC id of the response being normalized (a lesson's first id)
        #: The tools (name, definition digest) this response taught the lesson book, for the
        #: middleware to announce to other sessions (:mod:`mcp_normalizer.hop.announcer`).
        self.taught: list[tuple[str, str]] = []
        self.announced = False  # list_changed went out on this (call) stream
        self._answered_by_id = False  # the body (or event) being read answers it by id
        self._framing = normalizer.config.mode(SSE_FRAMING.name, None)
        self._framing_reported = False
        #: Why the response was refused (a reply to another request), ``None`` while it is not.
        self.foreign: str | None = None
        self._seen: set[IdKey] = set()  # the POST's requests answered so far on this stream

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
            length = header(headers, b"content-length")
            if length is not None and length.strip().isdigit() and int(length) > self._bulk:
                self._skip(int(length))
                self.mode = "pass"  # streamed as it comes: the start need not wait for the body
        elif content_type == "text/event-stream":
            self.mode = "sse"
            headers = [(k, v) for k, v in headers if k != b"content-length"]
        self.headers = list(headers)

    @property
    def whole_events(self) -> bool:
        """Does what this transformer emits from now on come as whole SSE events (an SSE stream,
        still split, not ended)? Then a notice of the proxy's own may go between two sends."""
        return self.mode == "sse" and not self._splitter.overflowed and not self._finished

    # -- body ---------------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> bytes:
        """Take the next body chunk; return the bytes that may be sent now."""
        if self.foreign is not None:
            return b""  # refused: nothing more of this response goes out
        if self.mode == "pass":
            return chunk
        if self.mode == "json":
            self._body.append(chunk)
            self._size += len(chunk)
            if self._size > self._max_json or self._size > self._bulk:
                if self._size > self._bulk:
                    self._skip(self._size)
                else:
                    logger.warning("JSON body above %d bytes: passed through without rewriting", self._max_json)
                    self.oversize = True
                self.mode = "pass"
                out, self._body = b"".join(self._body), []
                return out
            return b""
        if self._splitter.overflowed:
            self._queue.append((chunk, False))
        else:
            self._queue.extend((block, True) for block in self._splitter.feed(chunk))
            if self._framing is not RuleMode.OFF and not self._splitter.overflowed:
                self._unframed()
            if self._splitter.overflowed:
                logger.warning(
                    "SSE event above %d bytes: rest of the stream passed through", self._splitter.max_pending
                )
                self._queue.append((self._splitter.flush(), False))
        return b"" if self.stalled else self._drain()

    def finish(self) -> bytes:
        """End of the body: return everything left (normalized where it applies)."""
        self._finished = True
        if self.foreign is not None:
            return b""
        if self.mode == "json":
            return self._finish_json()
        if self.mode == "sse":
            tail = self._splitter.flush()
            if tail:
                self._queue.append((tail, False))  # an unterminated event is never dispatched: as is
            return b"" if self.stalled or self.busy else self._drain()
        return b""

    def resume(self) -> bytes:
        """After the tool fetch the stall waited for, or after the loop ran while :attr:`busy`:
        go on, and return what can now be sent."""
        self.stalled = self.busy = False
        if self.foreign is not None:
            return b""
        if self.mode == "json" and self._finished:
            return self._finish_json()
        return self._drain()

    def release(self) -> bytes:
        """The upstream broke off mid-stream: every byte still held (events waiting for a fetch or
        for their stream's end, an unfinished event) as it came, never rewritten; the transformer
        passes everything through from then on."""
        if self.mode != "sse":
            return b""  # a JSON body is held with its start: the caller answers with an error
        out = b"".join(piece for piece, _ in self._queue) + self._splitter.flush()
        self._queue.clear()
        self.mode = "pass"
        return out

    def unanswered(self) -> list[JSON]:
        """The ids of the POST's requests that no response on this stream answered (yet), in order."""
        return [key[1] for key in self.exchange.pending if key not in self._seen]

    def close(self) -> None:
        """Drop the work on a message left half done (the response was abandoned): its state
        is freed now, not when the cyclic collector finds the generator and this object."""
        job, self._job = self._job, None
        if job is not None:
            job.close()

    def _work(self, job: Steps[bytes | None], size: int) -> bytes | None:
        """Run one slice of ``job`` (the work on one piece of ``size`` bytes); its value if it ended.

        Raises:
            _Stall: the piece waits for a tool fetch (the job is dropped: it starts again).
            Unfinished: the slice is over (the job is kept for the next call).
        """
        self._job = job
        try:
            # The collector rests while this slice builds and frees its values, never across a
            # pause: other sessions run then, and a transformer dropped mid-job cannot leave it off.
            began = time.perf_counter()
            with quiet_gc(size):
                done = run_slice(job, self._slice)
        except Unfinished:
            self.busy = True
            self.spent = time.perf_counter() - began
            raise
        except _Stall:
            self._job = None
            self.stalled = True
            raise
        except (_Hold, _Foreign):
            self._job = None
            raise
        self._job = None
        return done

    def _drain(self) -> bytes:
        out = bytearray()
        while self._queue:
            piece, inspect = self._queue[0]
            if inspect:
                try:
                    new = self._work(self._job or self._event(piece), len(piece))
                except (_Stall, Unfinished, _Hold):
                    break
                except _Foreign:
                    self._queue.clear()  # the reply and all after it: never delivered
                    break
                out += piece if new is None else new
            else:
                out += piece
            self._queue.popleft()
        return bytes(out)

    def _event(self, block: bytes) -> Steps[bytes | None]:
        """The new text of one SSE event block (``None``: as it is)."""
        if block.startswith(_BOM) and not self._first_block:
            return None  # a BOM is ignored only at the stream's start: browsers see no event here
        out = yield from self._one_event(block)  # may raise _Stall: then the block is tried again later
        self._first_block = False
        return out

    def _one_event(self, block: bytes) -> Steps[bytes | None]:
        if len(block) > self._bulk:
            self._skip(len(block))
            return None
        if (
            not (self.exchange.pending and (b'"result"' in block or b'"error"' in block))
            and not any(word in block for word in _NOTICES)
            and not may_hold_surrogate(block)
        ):
            return None
        event = parse_event(block)
        if event.event != "message" or not event.data:
            return None
        new = yield from self._rewrite(event.data)
        out = None if new is None else replace_data(block, new)
        if self._announce:  # before the response that taught it: the client re-lists (tools.mdx, List Changed)
            self._announce, self.announced = False, True
            new = block if out is None else out
            if new.startswith(_BOM):  # a BOM is read only at the stream's start: it stays first
                return _BOM + _LIST_CHANGED_EVENT + new[len(_BOM) :]
            return _LIST_CHANGED_EVENT + new
        return out

    def _skip(self, size: int) -> None:
        """Log that a result of ``size`` bytes passes unread (above ``max_validate_bytes``)."""
        keys = list(self.exchange.pending)
        request = self.exchange.pending.get(keys[0]) if len(keys) == 1 else None
        bound = self.normalizer.config.max_validate_bytes
        reason = f"a response of {size} bytes exceeds max_validate_bytes={bound}: passed on unread"
        record = Record(
            Rewrite("validation", "skipped", (), reason), request.tool if request else None, False, "skipped"
        )
        method = request.method if request else "tools/call"
        jsonrpc_id = keys[0][1] if request is not None else None
        self._log(record, method, jsonrpc_id)

    def _log(self, record: Record, method: str, jsonrpc_id: JSON) -> None:
        """Log ``record``; its metric carries the tool's name only when the upstream listed the tool."""
        exchange = self.exchange
        listed = record.tool is None or exchange.tool(record.tool) is not None
        self.audit.emit(
            record,
            method=method,
            jsonrpc_id=jsonrpc_id,
            scope=exchange.scope,
            era=exchange.era,
            listed=listed,
            client=exchange.client.label,
            upstream_era=exchange.upstream_era,
        )

    def _finish_json(self) -> bytes:
        try:
            new = self._work(self._job or self._body_job(), self._size)
        except (_Stall, Unfinished):
            return b""
        except _Foreign:
            self._body, self._size = [], 0
            return b""  # (the start stays held: the caller answers with an error instead)
        self.mode = "pass"  # the start may go now
        body = self._body[0] if self._body else b""
        self._body, self._size = [], 0
        if new is None:
            return body
        self.headers = [(k, v) for k, v in self.headers if k != b"content-length"]
        self.headers.append((b"content-length", str(len(new)).encode()))
        return new

    def _unframed(self) -> None:
        """Rule ``sse_framing``: the events an unfinished block already holds whole go out now
        (``on``, each logged), or are logged once per stream (``report``)."""
        applied = self._framing is RuleMode.ON
        if not applied and self._framing_reported:
            return
        whole = self._splitter.take_whole(dispatch=applied)
        if not whole:
            return
        if applied:
            self._queue.extend((event, True) for event in whole)
        self._framing_reported = True
        sole = self.exchange.sole
        request = self.exchange.pending.get(sole) if sole is not None else None
        for _ in whole if applied else whole[:1]:
            self._log(
                Record(SSE_REWRITE, request.tool if request else None, applied),
                request.method if request else "",
                sole[1] if sole else None,
            )

    # -- JSON-RPC -----------------------------------------------------------------------------

    def _body_job(self) -> Steps[bytes | None]:
        """:meth:`_rewrite` on the whole JSON body (its chunks joined into one first, in a slice
        of its own when large)."""
        if len(self._body) != 1:
            self._body = [b"".join(self._body)]
            if self._size > LARGE_TEXT:
                yield
        return (yield from self._rewrite(self._body[0]))

    def _rewrite(self, data: bytes) -> Steps[bytes | None]:
        """The new text of one JSON body or SSE event's data (a message or a batch), or ``None``
        to forward ``data`` as it is. Only the envelope is read of messages the proxy does not
        rewrite; parts of a rewritten one that no rule changed are copied byte for byte.

        Raises:
            _Stall: a response needs a tool whose ``tools/list`` is still being fetched (raised
                before anything is done: the job may start again).
            _Hold: an SSE response matches the POST's one request by position only, and the
                stream may still bring the response with its id (also raised before anything
                is done).
        """
        large = len(data) > LARGE_TEXT
        # (a huge text: the rule's own search, a pass at C speed; a small one: a substring test)
        maybe = may_hold_surrogate(data) if large else b"\\u" in data
        repaired = self.normalizer.message_text(data) if maybe else None
        if repaired is not None:
            data = repaired[0]
        if large:
            yield  # each pass over a huge message in a slice of its own
        try:
            batch = read_batch(data)
            messages = [(raw, read_envelope(raw)) for raw in (batch if batch is not None else [data])]
        except DecodeError:
            return None  # not JSON: not the proxy's to judge
        sole = self.exchange.sole
        self._answered_by_id = sole is not None and any(
            envelope.response and id_key(envelope.id) == sole for _, envelope in messages
        )
        unwrapped = self.normalizer.batch_response(batch, sole) if batch is not None else None
        if unwrapped is not None and unwrapped.applied:
            batch = None  # answered as the single message it is
        if large:
            yield  # reading a huge body is a slice of its own
        for _, envelope in messages:
            request = self._request_of(envelope)
            if request is not None and request.method != TOOLS_LIST:
                tool = self.exchange.tool_of(request)
                if tool in self.exchange.fetching and self.exchange.tool(tool) is None:
                    raise _Stall
        out = []
        for raw, envelope in messages:  # (_message may raise _Hold: before anything is done)
            out.append((yield from self._message(raw, envelope, len(data))))
        # Logged once the messages are through: a held event is read again, and logs once.
        if repaired is not None:
            self._log(repaired[1], self._method_of(sole), sole[1] if sole is not None else None)
        if unwrapped is not None and sole is not None:
            self._log(unwrapped, self._method_of(sole), sole[1])
        changed = repaired is not None and repaired[1].applied
        if batch is None:
            if out[0] is None and (changed or (unwrapped is not None and unwrapped.applied)):
                return bytes(messages[0][0])
            return out[0]
        if changed:
            out = [new if new is not None else bytes(raw) for new, (raw, _) in zip(out, messages, strict=True)]
        if all(new is None for new in out):
            return None
        try:
            items = [Raw(new if new is not None else raw) for new, (raw, _) in zip(out, messages, strict=True)]
            return join_array(items)
        except DecodeError:
            return None

    def _foreign(self, envelope: Envelope) -> str | None:
        """Why the response ``envelope`` on the POST's own stream answers none of its requests
        (``None`` when it answers one, or may: its id is ``null``, missing, or the sole request's
        in another type)."""
        key = id_key(envelope.id)
        pending = self.exchange.pending
        if key is not None and key in pending:
            return None if key not in self._seen else f"a second response to request id {_shown(envelope.id)}"
        if envelope.id is UNSET or envelope.id is None:
            return None  # no id: answers the sole request by position, if anything (rule jsonrpc_id)
        sole = self.exchange.sole
        if sole is not None and same_value(envelope.id, sole) and sole not in self._seen:
            return None
        return f"a response with id {_shown(envelope.id)}, which no request of this POST has"

    def _answered_later(self) -> bool:
        """True when an SSE event queued after the one being read answers the POST's request by id."""
        sole = self.exchange.sole
        for piece, inspect in list(self._queue)[1:]:
            if not inspect or b'"id"' not in piece:
                continue
            data = parse_event(piece).data
            if not data:
                continue
            try:
                items = read_batch(data)
                envelopes = [read_envelope(raw) for raw in (items if items is not None else [data])]
            except DecodeError:
                continue
            if any(e.response and id_key(e.id) == sole for e in envelopes):
                return True
        return False

    def _method_of(self, key: IdKey | None) -> str:
        """The method of the pending request ``key`` (for log lines), ``""`` when unknown."""
        request = self.exchange.pending.get(key) if key is not None else None
        return request.method if request is not None else ""

    def _request_of(self, envelope: Envelope) -> PendingRequest | None:
        """The request a response answers: by its id, else (a one-request POST) by position."""
        if not envelope.response:
            return None
        key = id_key(envelope.id)
        request = self.exchange.pending.get(key) if key is not None else None
        sole = self.exchange.sole
        if request is None and sole is not None and not self._answered:
            request = self.exchange.pending.get(sole)
        return request

    def _message(self, raw: bytes | Raw, envelope: Envelope, size: int) -> Steps[bytes | None]:
        """The new text of one message, or ``None`` to keep it."""
        if envelope.id is UNSET and isinstance(envelope.method, str):
            return (yield from self._notification(raw, envelope, size))
        if self.exchange.own_stream and envelope.response:
            why = self._foreign(envelope)
            if why is not None:
                self.foreign = why
                raise _Foreign  # (nothing done yet)
        request = self._request_of(envelope)
        if request is None:
            return None
        exchange = self.exchange
        key = id_key(envelope.id)
        sole = exchange.sole
        by_id = key is not None and exchange.pending.get(key) is not None
        if not by_id and (self._answered_by_id or self._answered_later()):
            return None  # the request's own response is here or on its way: this one answers nothing
        if not by_id and self.mode == "sse" and not self._finished:
            raise _Hold  # (nothing done yet) tried again with every event, and at the stream's end
        answers = key if by_id else sole
        self._answered = self._answered or answers == sole
        jsonrpc_id = answers[1] if answers is not None else envelope.id
        if answers is not None:
            self._seen.add(answers)
            exchange.state.answered(answers)  # answered: no later GET will carry it
        watched = request.method in WATCHED_METHODS and isinstance(envelope.result, dict)
        if self.capture is not None and watched:
            self.capture.exchange(
                scope=exchange.scope, era=exchange.era, request=request, jsonrpc_id=jsonrpc_id, response=Raw(raw)
            )
        members: dict[str, Raw] | None = None
        result = envelope.result if isinstance(envelope.result, dict) else None
        records: list[Record] = []
        try:
            if not by_id or _suspect(envelope, request, exchange.era):
                members = _members(raw)
                if members is None:
                    return None
                context = ResponseContext(request.method, sole, exchange.era, request.cursor)
                fixed, records = self.normalizer.response(Response(members, result), context, request.tool)
                members = dict(fixed.members) if fixed.members is not members else None
                result = dict(fixed.result) if fixed.result is not None and fixed.result is not result else result
            codec = Codec()
            self._answering = jsonrpc_id
            done = (yield from self._result(request, result, codec, size)) if watched and result is not None else None
        except DecodeError as exc:  # a member the proxy will not judge (1e400, a lone surrogate): as it came
            logger.warning("%s id=%r: %s; response forwarded unchanged", request.method, envelope.id, exc)
            return None
        except Exception:
            logger.exception("rule fault on %s id=%r: response forwarded unchanged", request.method, envelope.id)
            return None
        changes: dict[str, NewText] = {}
        if done is not None and done[0] is not None:
            changes["result"] = done[0]
        elif result is not None and result is not envelope.result:
            changes["result"] = dict(result)
        records += done[1] if done is not None else []
        return (yield from self._emit(raw, members, changes, records, request.method, jsonrpc_id))

    def _result(
        self, request: PendingRequest, members: dict[str, Raw], codec: Codec, size: int
    ) -> Steps[tuple[NewText | None, list[Record]] | None]:
        """Normalize the result of one watched request: its new text (``None``: unchanged) and the
        records; ``None`` when the result is not the proxy's to touch."""
        exchange = self.exchange
        if request.method == TOOLS_LIST:
            return (yield from tools_list_page(self.normalizer, self.exchange, request, members, codec))
        if request.method == TOOLS_CALL:
            if "task" in members or "resultType" in members or "taskId" in members:
                small = _decode(codec, members, ("task", "resultType", "taskId", "content"))
                task_id = _task_handle(small)
                if task_id is not None:
                    if request.tool is not None:
                        exchange.state.remember_task(task_id, request.tool)
                    return None
                if small.get("resultType", "complete") != "complete":
                    return None  # input_required, or a result type this proxy does not know
            return self._call(members, request.tool, codec, size)
        if request.method == TASKS_RESULT:  # 2025-11-25: the result is the tool's CallToolResult
            return self._call(members, exchange.tool_of(request), codec, size)
        if request.method == TASKS_GET:  # 2026-07-28 tasks extension: a completed task carries it
            return self._completed_task(members, request.task_id, codec, size)
        return None

    def _call(
        self, members: dict[str, Raw], tool: str | None, codec: Codec, size: int
    ) -> tuple[bytes | None, list[Record]] | None:
        """Normalize one ``CallToolResult`` given as member texts; ``structuredContent`` is decoded
        only when a rule may read it (:meth:`Normalizer.reads_structured`)."""
        normalizer, exchange = self.normalizer, self.exchange
        if normalizer.inert(tool):
            return None
        entry = exchange.tool(tool)
        result = {key: codec.loads(text) for key, text in members.items() if key != "structuredContent"}
        if "structuredContent" in members:
            text = members["structuredContent"]
            read = normalizer.reads_structured(result, text, tool, entry, exchange.era, size, exchange.client)
            result["structuredContent"] = codec.loads(text) if read else text
            result = {key: result[key] for key in members}  # the server's member order
        codec.adopt(result, members)
        outcome = normalizer.tools_call(result, tool, entry, exchange.era, size, codec, exchange.client)
        if outcome.learned is not None and tool is not None:
            outcome.records.append(self._learned(tool, outcome.learned))
        return (codec.splice(outcome.result, result) if outcome.changed else None), outcome.records

    def _learned(self, tool: str, found: Learned) -> Record:
        """Keep what a result of ``tool`` taught (rule ``learn_schema``) and say so: for the scope,
        and as evidence in the lesson book (:mod:`mcp_normalizer.engine.lessons`): once results seen
        from two witnesses (authorizations, or sessions without one) taught it, for the whole
        upstream (every later ``tools/list`` of any session lists the tool so, while its
        definition is the same). A scope many clients share (no session, no credential) keeps
        nothing of its own and is no witness. The notice goes before the result on a legacy SSE
        stream only (on 2026-07-28 ``list_changed`` belongs to ``subscriptions/listen`` streams; a
        JSON body has no room for it): elsewhere the next ``tools/list`` shows it."""
        exchange = self.exchange
        what = found.describe()
        entry = exchange.tool(tool)
        definition = entry.digest() if entry is not None else ""
        book = self.normalizer.lessons
        seen = taught_now(tool, definition, found, self._answering, found.places)
        lasting = bool(definition) and book.witnessed(seen, exchange.witnessed_by())
        scoped = exchange.private and exchange.state.learn(tool, found)
        if not lasting and not scoped:
            in_book = book.enabled and bool(definition) and book.get(tool, definition) is not None
            if in_book or (exchange.private and tool in exchange.state.learned):
                reason = "learned before; the client has not listed the tools since"
                action = f"already learned {what}"
            elif book.enabled and book.refused:
                reason, action = f"not learned: the lesson book is full ({len(book)} lessons)", "left unchanged"
            elif exchange.private:
                reason, action = "not learned: what this scope learned is at its bound", "left unchanged"
                if book.enabled and definition and exchange.witnessed_by() is not None:
                    reason += f"; {_PENDING}"
            else:
                reason = "not learned: the scope has no session and no credential, so every client shares it"
                action = "left unchanged"
            return Record(Rewrite(LEARN_RULE.name, action, (), reason), tool, False, "unrepaired")
        if lasting:
            self.taught.append((tool, definition))
        self._announce = self.mode == "sse" and era_of(exchange.era).list_changed_anywhere
        sent = "; sent notifications/tools/list_changed" if self._announce else ""
        where = "every session of this upstream" if lasting else "this scope"
        pending = not lasting and book.enabled and bool(definition) and exchange.witnessed_by() is not None
        reason = f"the tool's results do not meet its outputSchema; later tools/list of {where} say so"
        if pending:
            reason += f"; {_PENDING}"
        return Record(Rewrite(LEARN_RULE.name, f"learned {what}{sent}", (), reason), tool, True)

    def _completed_task(
        self, members: dict[str, Raw], task_id: str | None, codec: Codec, size: int
    ) -> tuple[bytes | None, list[Record]] | None:
        """A 2026-07-28 task object: when ``completed``, its ``result`` is the tool's ``CallToolResult``."""
        task = _decode(codec, members, ("status", "taskId"))
        inner = members.get("result")
        if task.get("status") != "completed" or inner is None:
            return None
        try:
            inner_members = split_object(inner)
        except DecodeError:
            return None
        known = task.get("taskId") if isinstance(task.get("taskId"), str) else task_id
        tool = self.exchange.state.task_tool(known) if isinstance(known, str) else None
        done = self._call(inner_members, tool, codec, size)
        if done is None:
            return None
        new, records = done
        if new is None:
            return None, records
        return join_object({**members, "result": Raw(new)}), records

    def _notification(self, raw: bytes | Raw, envelope: Envelope, size: int) -> Steps[bytes | None]:
        method = envelope.method
        if method not in ("notifications/tools/list_changed", "notifications/tasks"):
            return None
        if self.capture is not None:
            self.capture.notification(scope=self.exchange.scope, era=self.exchange.era, message=Raw(raw), method=method)
        if method == "notifications/tools/list_changed":
            self.exchange.forget_tools()
            return None
        if not isinstance(envelope.params, Raw):
            return None
        try:
            members = split_object(envelope.params)
            done = self._completed_task(members, None, Codec(), size)
        except DecodeError:
            return None
        except Exception:
            logger.exception("rule fault on %s: notification forwarded unchanged", method)
            return None
        if done is None:
            return None
        changes: dict[str, NewText] = {"params": done[0]} if done[0] is not None else {}
        return (yield from self._emit(raw, None, changes, done[1], method, None))

    def _emit(
        self,
        raw: bytes | Raw,
        members: dict[str, Raw] | None,
        changes: dict[str, NewText],
        records: list[Record],
        method: str,
        jsonrpc_id: JSON,
    ) -> Steps[bytes | None]:
        """The message ``raw`` with the members in ``changes`` replaced (``members``: its members
        already split, and changed, if any), logging ``records`` (a pause after each); a change
        that cannot be written goes out as neither bytes nor records."""
        out: bytes | None = None
        if changes or members is not None:
            large = any(not isinstance(text, bytes) or len(text) > LARGE_TEXT for text in changes.values())
            if large:
                yield  # each pass over a huge message in a slice of its own
            if members is None:
                members = _members(raw)
            if large:
                yield
            out = _with_members(members, changes) if members is not None else None
            if out is None:
                return None  # the change cannot go out (said in the log): neither do its records
        for record in records:
            self._log(record, method, jsonrpc_id)
            yield
        return out


def _shown(value: object) -> str:
    """An id as a log line may show it: JSON, at most 40 characters."""
    try:
        text = dumps(value).decode("utf-8", "replace")
    except DecodeError:
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _suspect(envelope: Envelope, request: PendingRequest, era: str | None) -> bool:
    """Whether the envelope rules may have work on a response matched by its id (a cheap look
    first, so that the members of every other message are never split): both a ``result`` and an
    ``error``, a page's ``nextCursor``, or a 2026-07-28 result without a member the era requires
    (rule ``era_fields``). A response matched by position always is."""
    if envelope.error is not UNSET and (envelope.result is not UNSET or envelope.other_result is not UNSET):
        return True
    result = envelope.result
    if not isinstance(result, dict):
        return False
    if "nextCursor" in result and request.method in LIST_METHODS:
        return True
    return bool(era_fields_missing(result, request.method, era))


def _may_list(pending: Mapping[IdKey, PendingRequest]) -> bool:
    """True when one of ``pending`` is a ``tools/list`` (expired entries read as absent)."""
    return any(getattr(pending.get(key), "method", None) == TOOLS_LIST for key in list(pending))


def _decode(codec: Codec, members: dict[str, Raw], names: tuple[str, ...]) -> JSONObject:
    """The named members, decoded (those present)."""
    return {name: codec.loads(members[name]) for name in names if name in members}


def _members(raw: bytes | Raw) -> dict[str, Raw] | None:
    """The members of the message ``raw``, undecoded; ``None`` (logged) when it is not an object."""
    try:
        return split_object(raw)
    except DecodeError:
        logger.warning("rewritten message cannot be encoded: forwarded unchanged")
        return None


def _with_members(members: dict[str, Raw], changes: Mapping[str, NewText]) -> bytes | None:
    """The JSON object of ``members`` with the values of ``changes`` in place of theirs (other
    members copied byte for byte); ``None`` when it cannot be written (the copied bytes must be
    UTF-8, RFC 8259 8.1: the envelope reader does not check inside strings, and a ``bytes`` text
    copies parts of the old value; undecoded parts are checked by their maker)."""
    copied = [bytes(value) for key, value in members.items() if key not in changes]
    texts = [text for text in changes.values() if isinstance(text, bytes)]
    if not all(is_utf8(part) for part in (*copied, *texts)):
        logger.warning("rewritten message holds bytes that are not UTF-8: forwarded unchanged")
        return None
    try:
        return join_object(
            {**members, **{name: Raw(text) if isinstance(text, bytes) else text for name, text in changes.items()}}
        )
    except DecodeError:
        logger.warning("rewritten message cannot be encoded: forwarded unchanged")
        return None


def _charset(parameters: str) -> str | None:
    """The ``charset`` of a content-type's parameters, lower-cased, or ``None``."""
    for parameter in parameters.split(";"):
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"').lower()
    return None


_BOM = b"\xef\xbb\xbf"
#: The SSE event announcing a tool list the scope now advertises otherwise (:mod:`mcp_normalizer.engine.rules.learned`).
_LIST_CHANGED_EVENT = b"event: message\ndata: " + LIST_CHANGED + b"\n\n"
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
