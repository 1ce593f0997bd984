"""The era bridge's I/O: legacy clients of a 2026-07-28-only upstream, over Streamable HTTP.

:class:`EraBridge` is an ASGI app between the normalizer middleware and the forwarder: the rules
see the client's legacy traffic as they see any legacy session (and run on it the same way), the
forwarder carries the bridge's stateless requests upstream with every bound it has. What it
translates is decided by :mod:`mcp_normalizer.engine.era_bridge` (sans-IO); this module reads and
writes:

- a legacy ``initialize`` (no session): when the upstream is known to speak only 2026-07-28, it is
  answered from ``server/discover``; in ``auto`` mode it first goes upstream as it came, and only a
  refusal (an HTTP error, a JSON-RPC error) is followed by a ``server/discover`` probe; a probe that
  finds no stateless version gives the client the refusal as it came;
- a POST of a bridged session: requests the session answers itself, the client's answers to the
  server's ``input_required`` questions (202), ``notifications/cancelled`` (closes the upstream
  request's stream, 202), and every other request upstream in the stateless form; the answer comes
  back as JSON when the server answered JSON and asked nothing, else as an SSE stream (the server's
  notifications as they came, the questions as legacy requests, the response last);
- ``GET`` of a bridged session: ``subscriptions/listen`` upstream, its notifications as the session's
  stream (one per session: a second gets 409); restarted when the session's resource
  subscriptions change; ended when the upstream ends it (the client reconnects);
- ``DELETE``: the session and everything in flight in it end.

Everything else (a native legacy upstream, a 2026-07-28 client, a session the upstream minted)
passes through untouched. A session id the bridge minted and no longer keeps gets 404, so the client
initializes again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from ..engine.era_bridge import (
    MAX_ROUNDS,
    MODERN_RESULT_MEMBERS,
    SESSION_PREFIX,
    Ask,
    BridgedSession,
    LegacyBridge,
    TooLarge,
    credential_of,
    discover_request,
    is_refusal,
    legacy_notification,
    stateless_version,
)
from ..errors import ClientDisconnect, DecodeError
from ..types import JSON, ASGIApp, JSONObject, RawHeaders, Receive, Scope, Send
from ..wire.body import buffer_body, replay
from ..wire.eras import UPSTREAM_ERA_KEY
from ..wire.jsoncodec import Raw, dumps, join_object, loads, split_object
from ..wire.jsonrpc import IdKey, header, id_key
from ..wire.modern import request_headers
from ..wire.responses import error_body, respond
from ..wire.sse import SSESplitter, parse_event
from .subrequest import (
    SSE_HEAD,
    ClientStream,
    ClientTooSlow,
    UpstreamCall,
    deadline_send,
    hang_up,
    message_of,
    relay_whole,
    response_of,
    subscope,
    upstream_headers,
)

__all__ = ["EraBridge"]

logger = logging.getLogger("mcp_normalizer.bridge")

#: The most bytes of an upstream refusal kept to decide on a probe (a larger one passes as it came).
_REFUSAL_BYTES = 64 * 1024
#: The most bytes of a ``server/discover`` answer read.
_DISCOVER_BYTES = 1024 * 1024
#: ``HeaderMismatchError`` (``S2026-07-28/basic/index.mdx`` §Error Codes): a request whose
#: ``Mcp-*`` headers the server finds missing or wrong.
_HEADER_MISMATCH = -32020
#: ``tools/list`` pages the bridge reads to learn the tools' ``x-mcp-header`` declarations.
_LIST_PAGES = 100


@dataclass(frozen=True, slots=True)
class _Relist:
    """The server refused a ``tools/call`` for its ``Mcp-Param-*`` headers (``-32020``): its
    answer for the client, should learning the tools' declarations not help."""

    answer: bytes


class EraBridge:
    """ASGI app: legacy clients of a 2026-07-28 upstream (see the module docstring).

    Args:
        inner: the app that reaches the upstream (the forwarder).
        core: the sessions and what was learned of the upstream (:class:`LegacyBridge`).
        max_body_bytes: the largest request body read (a larger one passes to ``inner``, which refuses it).
        max_message_bytes: the largest upstream answer translated; a larger JSON answer passes as it came.
        ask_timeout: seconds a client has to answer one of the server's questions.
        send_timeout: seconds a client may take to accept one message of a response the bridge
            writes (a client that stopped reading: the response is broken off, the upstream
            request cancelled); 0: no bound.
    """

    def __init__(
        self,
        inner: ASGIApp,
        core: LegacyBridge,
        *,
        max_body_bytes: int = 16 * 1024 * 1024,
        max_message_bytes: int = 16 * 1024 * 1024,
        ask_timeout: float = 300.0,
        send_timeout: float = 60.0,
    ) -> None:
        self.inner = inner
        self.core = core
        self.max_body_bytes = max_body_bytes
        self.max_message_bytes = max_message_bytes
        self.ask_timeout = ask_timeout
        self.send_timeout = send_timeout
        #: Requests in flight per session: the client's request id to its cancel event.
        self._inflight: dict[str, dict[IdKey, asyncio.Event]] = {}
        #: Questions to the client waiting for answers: the minted id to its future.
        self._asks: dict[tuple[str, IdKey], asyncio.Future[JSONObject]] = {}
        #: Per session: set when its listen filter changes or it ends (a listening GET wakes up).
        self._wake: dict[str, asyncio.Event] = {}
        self._listening: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.core.mode == "legacy":
            await self.inner(scope, receive, send)
            return
        headers: RawHeaders = scope["headers"]
        session_id = header(headers, b"mcp-session-id")
        method = scope["method"]
        if session_id is not None and session_id.startswith(SESSION_PREFIX):
            _bridged(scope, self.core.upstream_version)
            try:
                await self._in_session(session_id, scope, receive, deadline_send(send, self.send_timeout))
            except ClientTooSlow as exc:
                logger.warning("a bridged session's response was broken off: %s", exc)
            return
        if method != "POST" or session_id is not None or not (self.core.bridging or self.core.may_probe):
            await self.inner(scope, receive, send)
            return
        try:
            body, complete, over = await buffer_body(receive, self.max_body_bytes)
        except ClientDisconnect:
            return
        message = message_of(body) if complete and not over and b"initialize" in body else None
        if message is None or message.get("method") != "initialize" or "id" not in message:
            await self.inner(scope, replay(body, complete, receive), send)
            return
        await self._initialize(scope, receive, send, body, message)

    # -- initialize ---------------------------------------------------------------------------

    async def _initialize(self, scope: Scope, receive: Receive, send: Send, body: bytes, message: JSONObject) -> None:
        if not self.core.bridging:
            call = UpstreamCall(self.inner, subscope(scope, scope["headers"]), body)
            try:
                status = await call.start()
                refused = b""
                if status and (status >= 400 or call.content_type == b"application/json"):
                    refused, longer = await call.read(_REFUSAL_BYTES)
                    parsed = None if longer else message_of(refused)
                    if not longer and is_refusal(status, parsed):
                        await call.aclose()
                        if await self._probe_and_open(scope, send, message):
                            return
                        await relay_whole(send, call, refused)
                        return
                    await relay_whole(send, call, refused, rest=True)
                    return
                await relay_whole(send, call, refused, rest=True)
            finally:
                await call.aclose()
            return
        version = self.core.upstream_version
        assert version is not None
        _bridged(scope, version)
        discovered, probe, raw = await self._discover(scope, message, version)
        if discovered is None and self.core.mode == "auto":
            # Learned, and no longer so (the upstream now speaks a legacy era, or is down): unlearn,
            # and let this initialize go as it came (a refusal teaches it again).
            self.core.forget()
            logger.info("the upstream no longer answers server/discover: legacy clients are no longer bridged")
            await self._initialize(scope, receive, send, body, message)
            return
        if discovered is None:
            if probe is not None and probe.status:
                await relay_whole(send, probe, raw)
            else:
                await respond(
                    send,
                    502,
                    error_body(message.get("id"), "the 2026-07-28 upstream did not answer server/discover", -32603),
                )
            return
        await self._open(scope, send, message, discovered, version)

    async def _probe_and_open(self, scope: Scope, send: Send, message: JSONObject) -> bool:
        discovered, _, _ = await self._discover(scope, message, "2026-07-28")
        version = stateless_version(discovered)
        if discovered is None or version is None:
            return False
        if version != "2026-07-28":
            discovered, _, _ = await self._discover(scope, message, version)
            if discovered is None:
                return False
        self.core.learned(version)
        _bridged(scope, version)
        logger.info(
            "the upstream refused initialize and answered server/discover for %s: legacy clients are bridged", version
        )
        await self._open(scope, send, message, discovered, version)
        return True

    async def _discover(
        self, scope: Scope, message: JSONObject, version: str
    ) -> tuple[JSONObject | None, UpstreamCall | None, bytes]:
        request = discover_request(message, version)
        call = UpstreamCall(self.inner, self._upstream_scope(scope, request, version, None), dumps(request))
        try:
            status = await call.start()
            if status != 200:
                raw, _ = await call.read(_REFUSAL_BYTES)
                return None, call, raw
            response = await response_of(call, request.get("id"), _DISCOVER_BYTES)
        finally:
            await call.aclose()
        result = response.get("result") if response is not None else None
        return (result if isinstance(result, dict) else None), call, b""

    async def _open(self, scope: Scope, send: Send, message: JSONObject, discovered: JSONObject, version: str) -> None:
        credential = credential_of(header(scope["headers"], b"authorization"))
        before = list(self.core.sessions)
        try:
            session, result = self.core.open(message, discovered, version, credential=credential, now=time.monotonic())
        except TooLarge as exc:
            await respond(send, 400, error_body(message.get("id"), str(exc), -32602))
            return
        for ended in before:  # ended by the bound (or expired): its requests and its stream end too
            if ended not in self.core.sessions:
                self._ended(ended)
        body = dumps({"jsonrpc": "2.0", "id": message.get("id"), "result": result})
        await respond(send, 200, body, headers=[(b"mcp-session-id", session.id.encode())])

    # -- a bridged session --------------------------------------------------------------------

    async def _in_session(self, session_id: str, scope: Scope, receive: Receive, send: Send) -> None:
        credential = credential_of(header(scope["headers"], b"authorization"))
        _, session = self.core.lookup(session_id, credential, time.monotonic())
        if session is None:
            await respond(send, 404, error_body(None, "Session not found", -32001))
            return
        method = scope["method"]
        if method == "DELETE":
            self._end(session)
            await respond(send, 204, b"", None)
            return
        if method == "GET":
            await self._listen(session, scope, receive, send)
            return
        if method != "POST":
            await respond(send, 405, b"", None, headers=[(b"allow", b"GET, POST, DELETE")])
            return
        try:
            body, complete, over = await buffer_body(receive, self.max_body_bytes)
        except ClientDisconnect:
            return
        if over or not complete:
            await respond(send, 413, error_body(None, f"request body over {self.max_body_bytes} bytes", -32600))
            return
        try:
            parsed = loads(body)
        except DecodeError:
            await respond(send, 400, error_body(None, "Parse error: the body is not JSON", -32700))
            return
        if not isinstance(parsed, dict):
            await respond(send, 400, error_body(None, "a bridged session takes one JSON-RPC message per POST", -32600))
            return
        if "method" not in parsed:
            self._answered(session, parsed)
            await respond(send, 202, b"", None)
            return
        if "id" not in parsed:
            self._notified(session, parsed)
            await respond(send, 202, b"", None)
            return
        local = session.local_answer(parsed)
        if local is not None:
            if parsed.get("method") in ("resources/subscribe", "resources/unsubscribe"):
                self._wake_up(session.id)
            await respond(send, 200, dumps(local))
            return
        accept = header(scope["headers"], b"accept") or ""
        stream = ClientStream(send, "text/event-stream" in accept or "*/*" in accept or not accept)
        session.busy += 1
        cancelled = asyncio.Event()
        key = id_key(parsed.get("id"))
        inflight = self._inflight.setdefault(session.id, {})
        if key is not None:
            inflight[key] = cancelled
        watcher = asyncio.ensure_future(hang_up(receive, cancelled))  # the client's hang-up cancels it
        try:
            await self._relay(session, scope, parsed, stream, cancelled)
        finally:
            watcher.cancel()
            session.busy -= 1
            session.last_used = time.monotonic()
            if key is not None:
                inflight.pop(key, None)
            if not inflight:
                self._inflight.pop(session.id, None)

    def _answered(self, session: BridgedSession, message: JSONObject) -> None:
        key = id_key(message.get("id"))
        future = self._asks.pop((session.id, key), None) if key is not None else None
        if future is not None and not future.done():
            future.set_result(message)

    def _notified(self, session: BridgedSession, message: JSONObject) -> None:
        if message.get("method") != "notifications/cancelled":
            return  # 2026-07-28 defines no client notification over HTTP: accepted, nothing to do
        params = message.get("params")
        key = id_key(params.get("requestId")) if isinstance(params, dict) else None
        event = self._inflight.get(session.id, {}).get(key) if key is not None else None
        if event is not None:
            event.set()

    def _end(self, session: BridgedSession) -> None:
        self.core.close(session.id)
        self._ended(session.id)

    def _ended(self, session_id: str) -> None:
        """A session the core no longer keeps: its requests in flight are cancelled (their upstream
        streams closed) and its GET stream ends."""
        for event in self._inflight.pop(session_id, {}).values():
            event.set()
        self._wake_up(session_id)

    def _wake_up(self, session_id: str) -> None:
        event = self._wake.get(session_id)
        if event is not None:
            event.set()

    async def _relay(
        self,
        session: BridgedSession,
        scope: Scope,
        message: JSONObject,
        stream: ClientStream,
        cancelled: asyncio.Event,
    ) -> None:
        """Send ``message`` upstream (again after each round of questions) and its answer to the client."""
        upstream = session.stateless(message)
        upstream_id: JSON = message.get("id")
        relisted = False
        for round_ in range(MAX_ROUNDS + 1):
            if round_:
                upstream_id = f"{SESSION_PREFIX}retry.{round_}.{message.get('id')}"
            outcome = await self._one_round(session, scope, message, upstream, upstream_id, stream, cancelled)
            if isinstance(outcome, _Relist) and not relisted:
                # The server wants Mcp-Param-* headers the bridge did not know of (a call before any
                # tools/list it saw, or a tool whose declarations changed): learn the tools'
                # declarations, and send the call once more.
                relisted = True
                if await self._learn_declarations(session, scope):
                    outcome = await self._one_round(session, scope, message, upstream, upstream_id, stream, cancelled)
            if isinstance(outcome, _Relist):
                outcome = outcome.answer  # the server's own refusal
            if outcome is None:
                return  # answered as it came, or cancelled
            if isinstance(outcome, bytes):
                await stream.finish(outcome)
                return
            if not stream.accepts_sse:
                await stream.finish(_error(message, "the server asks for input, which needs an SSE stream (Accept)"))
                return
            responses = await self._ask(session, outcome, stream, cancelled)
            if responses is None:
                await stream.finish(
                    None if cancelled.is_set() else _error(message, "the client gave no answer in time")
                )
                return
            if isinstance(responses, str):
                await stream.finish(_error(message, responses))
                return
            upstream = session.retry(message, "", responses, outcome.state)
        await stream.finish(_error(message, f"the server asked for input more than {MAX_ROUNDS} times"))

    async def _one_round(
        self,
        session: BridgedSession,
        scope: Scope,
        message: JSONObject,
        upstream: JSONObject,
        upstream_id: JSON,
        stream: ClientStream,
        cancelled: asyncio.Event,
    ) -> bytes | Ask | _Relist | None:
        upstream["id"] = upstream_id
        declared = self.core.declared_for(upstream)
        call = UpstreamCall(
            self.inner, self._upstream_scope(scope, upstream, session.version, declared), dumps(upstream)
        )
        stop = call.cancel_on(cancelled)
        try:
            status = await call.start()
            if cancelled.is_set():
                await stream.finish(None)
                return None
            kind = call.content_type
            if status == 200 and kind == b"text/event-stream":
                return await self._from_stream(session, message, call, upstream_id, stream, cancelled)
            raw, longer = await call.read(self.max_message_bytes)
            if cancelled.is_set():
                await stream.finish(None)
                return None
            parsed = None if longer else message_of(raw)
            if parsed is not None and ("result" in parsed or "error" in parsed):
                if status == 400 and message.get("method") == "tools/call" and _header_mismatch(parsed):
                    refused = self._outcome(session, message, parsed, raw)
                    if isinstance(refused, bytes):
                        return _Relist(refused)
                if status == 200 or "error" in parsed:
                    return self._outcome(session, message, parsed, raw)
            if stream.started:
                await stream.finish(_error(message, f"the upstream answered HTTP {status} with no JSON-RPC response"))
                return None
            await relay_whole(stream.send, call, raw, rest=longer)
            stream.started = True
            return None
        finally:
            stop.cancel()
            await call.aclose()

    def _outcome(self, session: BridgedSession, message: JSONObject, response: JSONObject, raw: bytes) -> bytes | Ask:
        """The client's answer to ``message`` from the server's ``response`` (decoded from ``raw``):
        its bytes (the server's, but for the client's id and the members only 2026-07-28 has, see
        :func:`_legacy_bytes`), or :class:`Ask`."""
        if message.get("method") == "tools/list" and isinstance(response.get("result"), dict):
            self.core.saw_tools(response["result"])
        outcome = session.answer(message, response)
        if isinstance(outcome, Ask):
            return outcome
        return _legacy_bytes(outcome.message, response, raw)

    async def _from_stream(
        self,
        session: BridgedSession,
        message: JSONObject,
        call: UpstreamCall,
        upstream_id: JSON,
        stream: ClientStream,
        cancelled: asyncio.Event,
    ) -> bytes | Ask | None:
        splitter = SSESplitter(self.max_message_bytes)
        wanted = id_key(upstream_id)
        async for chunk in call.chunks():
            for block in splitter.feed(chunk):
                event = parse_event(block)
                if event.data is None:
                    continue
                parsed = message_of(event.data)
                if parsed is None:
                    continue
                if "method" not in parsed and id_key(parsed.get("id")) == wanted:
                    if stream.accepts_sse:
                        await stream.open()  # the server answered with a stream: so does the bridge
                    return self._outcome(session, message, parsed, bytes(event.data))
                if stream.accepts_sse:
                    await stream.event(event.data)  # a notification of the request, as it came
            if splitter.overflowed:
                # An event past max_message_bytes: it and the rest of the stream pass as they came
                # (the response, on the first round, carries the client's own id).
                await stream.raw(splitter.flush())
                async for rest in call.chunks():
                    await stream.raw(rest)
                await stream.finish(None)
                return None
        if cancelled.is_set():
            await stream.finish(None)
            return None
        await stream.finish(_error(message, "the server's stream ended before its response"))
        return None

    async def _ask(
        self, session: BridgedSession, ask: Ask, stream: ClientStream, cancelled: asyncio.Event
    ) -> JSONObject | str | None:
        """Send the server's questions to the client and wait for every answer: the
        ``inputResponses``, a reason the request fails (a client's error), or ``None`` (cancelled or
        no answer in time)."""
        loop = asyncio.get_running_loop()
        futures: dict[IdKey, asyncio.Future[JSONObject]] = {}
        for request in ask.requests:
            key = id_key(request["id"])
            assert key is not None
            futures[key] = self._asks[(session.id, key)] = loop.create_future()
            await stream.event(dumps(request))
        if not futures:
            return {}
        stop: asyncio.Future[Any] = asyncio.ensure_future(cancelled.wait())
        try:
            done, _ = await asyncio.wait(
                {*futures.values(), stop}, timeout=self.ask_timeout, return_when=asyncio.FIRST_COMPLETED
            )
            while stop not in done and not all(f.done() for f in futures.values()):
                pending = {f for f in futures.values() if not f.done()}
                done, _ = await asyncio.wait(
                    {*pending, stop}, timeout=self.ask_timeout, return_when=asyncio.FIRST_COMPLETED
                )
                if not done:
                    return None
            if stop in done or not all(f.done() for f in futures.values()):
                return None
            responses: JSONObject = {}
            for key, future in futures.items():
                answer = future.result()
                if "result" not in answer:
                    error = answer.get("error")
                    text = error.get("message") if isinstance(error, dict) else None
                    return f"the client could not answer the server's {ask.keys[key]!r} request: {text}"
                responses[ask.keys[key]] = answer["result"]
            return responses
        finally:
            stop.cancel()
            for key in futures:
                self._asks.pop((session.id, key), None)

    async def _learn_declarations(self, session: BridgedSession, scope: Scope) -> bool:
        """List the server's tools as ``session`` (stateless, every page up to :data:`_LIST_PAGES`),
        keeping their ``x-mcp-header`` declarations; True when at least one page was listed."""
        cursor: JSON = None
        for page in range(_LIST_PAGES):
            params: JSONObject = {} if cursor is None else {"cursor": cursor}
            request = session.stateless(
                {"id": f"{SESSION_PREFIX}tools.{page}", "method": "tools/list", "params": params}
            )
            call = UpstreamCall(self.inner, self._upstream_scope(scope, request, session.version, None), dumps(request))
            try:
                status = await call.start()
                response = await response_of(call, request["id"], self.max_message_bytes) if status == 200 else None
            finally:
                await call.aclose()
            result = response.get("result") if response is not None else None
            if not isinstance(result, dict):
                return page > 0
            self.core.saw_tools(result)
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str):
                return True
        return True

    # -- the session's GET stream ---------------------------------------------------------------

    async def _listen(self, session: BridgedSession, scope: Scope, receive: Receive, send: Send) -> None:
        if session.listen_request(0) is None:
            await respond(send, 405, b"", None, headers=[(b"allow", b"POST, DELETE")])
            return
        if session.id in self._listening:
            await respond(send, 409, error_body(None, "the session's stream is already open", -32600))
            return
        self._listening.add(session.id)
        wake = self._wake.setdefault(session.id, asyncio.Event())
        gone = asyncio.Event()
        watcher = asyncio.ensure_future(hang_up(receive, gone, wake))
        session.busy += 1
        started = False
        try:
            rounds = 0
            while not gone.is_set() and session.id in self.core.sessions:
                wake.clear()
                rounds += 1
                request = session.listen_request(f"{SESSION_PREFIX}listen.{rounds}")
                if request is None:
                    break
                call = UpstreamCall(
                    self.inner, self._upstream_scope(scope, request, session.version, None), dumps(request)
                )
                waker = call.cancel_on(wake)
                try:
                    status = await call.start()
                    if status != 200 or call.content_type != b"text/event-stream":
                        if wake.is_set() and not gone.is_set():
                            continue  # woken before the upstream answered: listen again, with the new filter
                        if not started:  # the refusal as it came (a whole response: nothing more is sent)
                            raw, longer = await call.read(_REFUSAL_BYTES)
                            await relay_whole(send, call, raw, rest=longer)
                        return
                    if not started:
                        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEAD})
                        started = True
                    ended = await self._relay_listen(call, send)
                finally:
                    waker.cancel()
                    await call.aclose()
                if ended and not wake.is_set():
                    break  # the server ended the stream: so does the client's (it reconnects)
        finally:
            watcher.cancel()
            session.busy -= 1
            session.last_used = time.monotonic()
            self._listening.discard(session.id)
            self._wake.pop(session.id, None)
            if started:
                try:
                    await send({"type": "http.response.body", "body": b""})
                except OSError:
                    pass

    async def _relay_listen(self, call: UpstreamCall, send: Send) -> bool:
        """Relay one listen stream's notifications; True when the stream ended (not woken)."""
        splitter = SSESplitter(self.max_message_bytes)
        async for chunk in call.chunks():
            for block in splitter.feed(chunk):
                event = parse_event(block)
                if event.data is None:
                    if block.lstrip().startswith(b":"):
                        await send({"type": "http.response.body", "body": b":\n\n", "more_body": True})
                    continue
                parsed = message_of(event.data)
                if parsed is None or "method" not in parsed:
                    continue  # the listen request's own end
                out = legacy_notification(parsed)
                if out is not None:
                    data = event.data if out is parsed else dumps(out)
                    await send(
                        {
                            "type": "http.response.body",
                            "body": b"event: message\ndata: " + data + b"\n\n",
                            "more_body": True,
                        }
                    )
            if splitter.overflowed:
                break
        return True

    # -- upstream requests ----------------------------------------------------------------------

    def _upstream_scope(
        self, scope: Scope, message: JSONObject, version: str, declared: dict[str, tuple[str, ...]] | None
    ) -> Scope:
        return subscope(scope, upstream_headers(scope, request_headers(message, version, declared)))


def _bridged(scope: Scope, version: str | None) -> None:
    """Note in ``scope`` that the upstream side speaks ``version`` (the logs and spans read it)."""
    eras = scope.get(UPSTREAM_ERA_KEY)
    if isinstance(eras, list) and version is not None:
        eras.append(version)


def _error(message: JSONObject, text: str) -> JSONObject:
    return {"jsonrpc": "2.0", "id": message.get("id"), "error": {"code": -32603, "message": text}}


def _header_mismatch(response: JSONObject) -> bool:
    """A JSON-RPC ``HeaderMismatch`` error (``-32020``, SEP-2243)."""
    error = response.get("error")
    return isinstance(error, dict) and error.get("code") == _HEADER_MISMATCH


def _legacy_bytes(answer: JSONObject, response: JSONObject, raw: bytes) -> bytes:
    """The bytes of ``answer`` (the legacy response the engine made of the server's ``response``,
    decoded from ``raw``): the server's bytes, every member as it came (numbers as the server spelled
    them: ``1e-07``, ``12.50``; strings as it escaped them), but for the id (the client's) and the
    result members only 2026-07-28 has (``resultType``, ``ttlMs``, ``cacheScope``), which go. An
    answer the engine made itself (an error for a server's question a legacy client cannot take) is
    encoded as it is."""
    if ("result" in answer) != ("result" in response):
        return dumps(answer)
    try:
        members = dict(split_object(raw))
        members["id"] = Raw(dumps(answer.get("id")))
        result = members.get("result")
        if result is not None and isinstance(response.get("result"), dict):
            fields = split_object(result)
            if any(name in fields for name in MODERN_RESULT_MEMBERS):
                kept = {name: text for name, text in fields.items() if name not in MODERN_RESULT_MEMBERS}
                members["result"] = Raw(join_object(kept))
        return join_object(members)
    except DecodeError:
        return dumps(answer)
