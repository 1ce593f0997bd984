"""The modern front's I/O: 2026-07-28 clients of a legacy-only upstream, over Streamable HTTP.

:class:`ModernFront` is an ASGI app between the normalizer middleware and the era bridge (then the
forwarder): the rules see the client's 2026-07-28 traffic as they see any, and the legacy requests
the front makes go upstream through every bound the forwarder has. What it translates is decided by
:mod:`mcp_normalizer.engine.modern_front` (sans-IO); this module reads and writes. It acts only with
the operator's consent (``[proxy] serve_modern_hosts``) and only on a POST without a session whose
one request names a stateless version in ``_meta``; everything else passes through untouched.

- While the upstream's era is not known (``upstream_era = "auto"``), a 2026-07-28 request goes
  upstream as it came. A success is relayed as it came. A refusal
  (:func:`~mcp_normalizer.engine.modern_front.is_refusal`) of ``server/discover`` shows a
  legacy-only server; a refusal of another request is followed by a ``server/discover`` probe of
  the front's own, whose refusal shows the same (and whose success, a 2026-07-28 server, lets the
  refusal through as it came). Learned once, kept.
- Served (the upstream is legacy-only): ``server/discover`` is answered from the client's session's
  ``InitializeResult``; ``subscriptions/listen`` is the session's ``GET`` stream; a retry naming a
  ``requestState`` resumes the parked upstream call; any other request goes over the session, its
  answer back as JSON when the upstream answered JSON, else as an SSE stream (the request's
  notifications as they come, the response last). The client's hang-up cancels the upstream
  request (``notifications/cancelled``, as the legacy era cancels). A 2026-07-28 notification is
  accepted (202): the era defines none over HTTP.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from ..engine.era_bridge import credential_of
from ..engine.modern_front import (
    INITIALIZED,
    Ask,
    Envelope,
    Final,
    FrontCore,
    FrontSession,
    Parked,
    Relay,
    ToClient,
    ToListeners,
    ToUpstream,
    acknowledged,
    client_key,
    discover_result,
    envelope_of,
    initialize_request,
    is_refusal,
    legacy_request,
    listen_filter,
    listen_notification,
)
from ..errors import ClientDisconnect
from ..types import JSON, ASGIApp, JSONObject, RawHeaders, Receive, Scope, Send
from ..wire.body import buffer_body, replay
from ..wire.eras import NEWEST_LEGACY
from ..wire.jsoncodec import dumps
from ..wire.jsonrpc import header, response_to
from ..wire.modern import request_headers
from ..wire.responses import error_body, respond
from ..wire.sse import SSESplitter, parse_event
from .subrequest import (
    ClientStream,
    UpstreamCall,
    hang_up,
    message_of,
    relay_whole,
    response_of,
    subscope,
    upstream_headers,
)

__all__ = ["ModernFront"]

logger = logging.getLogger("mcp_normalizer.front")

#: The most bytes of an upstream refusal (or a ``server/discover`` probe's answer) read.
_REFUSAL_BYTES = 64 * 1024
#: Times one request's stream is resumed (``Last-Event-ID``) before the front gives up on it.
_MAX_RESUMES = 16
#: The longest ``retry`` waited before a resumption, in milliseconds.
_MAX_RETRY_MS = 5000
#: Notifications a listener's queue holds before more for it are dropped (its stream is slow).
_LISTENER_QUEUE = 256


@dataclass(slots=True)
class _Waiting:
    """The I/O side of a parked request: its still-open upstream call, the session it runs in, and
    the timer that abandons it."""

    call: UpstreamCall
    session: FrontSession
    timer: asyncio.Task[None] | None = None


class ModernFront:
    """ASGI app: 2026-07-28 clients of a legacy-only upstream (see the module docstring).

    Args:
        inner: the app that reaches the upstream (the era bridge, then the forwarder).
        core: the sessions, the parked questions and what was learned
            (:class:`~mcp_normalizer.engine.modern_front.FrontCore`).
        max_body_bytes: the largest request body read (a larger one passes to ``inner``).
        max_message_bytes: the largest upstream message translated.
    """

    def __init__(
        self,
        inner: ASGIApp,
        core: FrontCore,
        *,
        max_body_bytes: int = 16 * 1024 * 1024,
        max_message_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        self.inner = inner
        self.core = core
        self.max_body_bytes = max_body_bytes
        self.max_message_bytes = max_message_bytes
        self._opening: dict[str, asyncio.Lock] = {}
        self._listeners: dict[str, set[asyncio.Queue[JSONObject | None]]] = {}
        self._readers: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers: RawHeaders = scope.get("headers", [])
        if (
            scope["type"] != "http"
            or not self.core.active
            or scope["method"] != "POST"
            or header(headers, b"mcp-session-id") is not None
        ):
            await self.inner(scope, receive, send)
            return
        try:
            body, complete, over = await buffer_body(receive, self.max_body_bytes)
        except ClientDisconnect:
            return
        message = message_of(body) if complete and not over else None
        envelope = envelope_of(message)
        if message is None or envelope is None or not isinstance(message.get("method"), str):
            await self.inner(scope, replay(body, complete, receive), send)
            return
        if "id" not in message:
            if self.core.serving:
                await respond(send, 202, b"", None)  # 2026-07-28 defines no client notification over HTTP
            else:
                await self.inner(scope, replay(body, complete, receive), send)
            return
        if not self.core.serving:
            if not await self._learn(scope, send, body, message, envelope):
                return
        await self._serve(scope, receive, send, message, envelope)

    # -- learning the upstream's era ----------------------------------------------------------------

    async def _learn(self, scope: Scope, send: Send, body: bytes, message: JSONObject, envelope: Envelope) -> bool:
        """Send the request as it came; True when the upstream refused it as a legacy-only server
        does (then the front serves it), False when its answer went to the client."""
        call = UpstreamCall(self.inner, subscope(scope, scope["headers"]), body)
        try:
            status = await call.start()
            if status == 200 and call.streaming and message.get("method") != "server/discover":
                await relay_whole(send, call, b"", rest=True)
                return False
            raw, longer = await call.read(_REFUSAL_BYTES)
            answer = None if longer else _answer(call, raw, message.get("id"))
            if longer or not status or not is_refusal(status, answer, str(message.get("method"))):
                result = answer.get("result") if status == 200 and isinstance(answer, dict) else None
                if isinstance(result, dict) and (message.get("method") == "server/discover" or "resultType" in result):
                    self.core.learned("2026-07-28")  # (only a 2026-07-28 server answers either)
                await relay_whole(send, call, raw, rest=longer)
                return False
        finally:
            await call.aclose()
        if message.get("method") != "server/discover" and not await self._refuses_discover(scope, envelope):
            await relay_whole(send, call, raw)
            return False
        if self.core.upstream_era is None:
            logger.info(
                "the upstream refused a 2026-07-28 request as a legacy-only server does: 2026-07-28 clients are served"
            )
        self.core.learned("legacy")
        return True

    async def _refuses_discover(self, scope: Scope, envelope: Envelope) -> bool:
        """Probe ``server/discover`` with the client's envelope: True when refused as a legacy-only
        server refuses it (a success teaches the front the upstream speaks 2026-07-28)."""
        meta: JSONObject = {
            "io.modelcontextprotocol/protocolVersion": envelope.version,
            "io.modelcontextprotocol/clientCapabilities": envelope.capabilities,
        }
        if envelope.client_info is not None:
            meta["io.modelcontextprotocol/clientInfo"] = envelope.client_info
        probe: JSONObject = {
            "jsonrpc": "2.0",
            "id": "mcpn-front.probe",
            "method": "server/discover",
            "params": {"_meta": meta},
        }
        headers = upstream_headers(scope, [*request_headers(probe, envelope.version)])
        call = UpstreamCall(self.inner, subscope(scope, headers), dumps(probe))
        try:
            status = await call.start()
            raw, longer = await call.read(_REFUSAL_BYTES)
        finally:
            await call.aclose()
        answer = None if longer else _answer(call, raw, probe["id"])
        if status == 200 and isinstance(answer, dict) and "result" in answer:
            self.core.learned("2026-07-28")
            return False
        return bool(status) and not longer and is_refusal(status, answer)

    # -- serving ------------------------------------------------------------------------------------

    async def _serve(self, scope: Scope, receive: Receive, send: Send, message: JSONObject, envelope: Envelope) -> None:
        credential = credential_of(header(scope["headers"], b"authorization"))
        key = client_key(credential, envelope)
        params = message.get("params")
        state = params.get("requestState") if isinstance(params, dict) else None
        if state is not None:
            await self._resume(scope, receive, send, message, key, state)
            return
        session = await self._session(scope, send, key, envelope, message)
        if session is None:
            return
        method = message.get("method")
        if method == "server/discover":
            await respond(
                send,
                200,
                dumps({"jsonrpc": "2.0", "id": message.get("id"), "result": discover_result(session.initialized)}),
            )
            return
        if method == "subscriptions/listen":
            await self._listen(scope, receive, send, session, message)
            return
        await self._carry(scope, receive, send, session, message, envelope, key)

    async def _session(
        self,
        scope: Scope,
        send: Send,
        key: str,
        envelope: Envelope,
        message: JSONObject,
        *,
        stale: FrontSession | None = None,
    ) -> FrontSession | None:
        """The client key's session, opened when there is none or it is ``stale`` (the upstream no
        longer knows it; requests that found so at once open one new session between them);
        ``None`` when the upstream refused to open one (its answer went to the client)."""
        for ended in self.core.expire(time.monotonic()):  # idle too long: ended upstream, opened anew
            self._end(scope, ended)
        lock = self._opening.setdefault(key, asyncio.Lock())
        async with lock:
            session = self.core.session(key, time.monotonic())
            if session is not None and session is not stale:
                return session
            if session is not None:
                self.core.drop(session)
            opened = await self._open(scope, send, key, envelope, message)
        if not lock.locked():
            self._opening.pop(key, None)
        return opened

    async def _open(
        self, scope: Scope, send: Send, key: str, envelope: Envelope, message: JSONObject
    ) -> FrontSession | None:
        request = initialize_request(envelope, "mcpn-front.initialize")
        call = UpstreamCall(self.inner, subscope(scope, upstream_headers(scope, [])), dumps(request))
        try:
            status = await call.start()
            if status == 200:
                response = await response_of(call, request["id"], self.max_message_bytes)
                raw = b""
            else:
                response = None
                raw, _ = await call.read(_REFUSAL_BYTES)
        finally:
            await call.aclose()
        result = response.get("result") if response is not None else None
        if not isinstance(result, dict):
            if status and status != 200:
                await relay_whole(send, call, raw)  # (401 with WWW-Authenticate: the client's OAuth)
            else:
                error = response.get("error") if response is not None else None
                text = error.get("message") if isinstance(error, dict) else "no InitializeResult"
                await respond(
                    send,
                    502,
                    error_body(message.get("id"), f"the legacy upstream did not open a session: {text}", -32603),
                )
            return None
        version = result.get("protocolVersion")
        session = FrontSession(
            key,
            call.header(b"mcp-session-id"),
            version if isinstance(version, str) else NEWEST_LEGACY.version,
            result,
        )
        await self._post(scope, session, INITIALIZED)
        for ended in self.core.add(session, time.monotonic()):
            self._end(scope, ended)
        logger.debug("opened a legacy session for a 2026-07-28 client (key %s, version %s)", key[:12], session.version)
        return session

    def _end(self, scope: Scope, session: FrontSession) -> None:
        """End a session upstream (``DELETE``) and its listeners, in the background."""
        reader = self._readers.pop(session.key, None)
        if reader is not None:
            reader.cancel()
            for queue in self._listeners.get(session.key, ()):
                queue.put_nowait(None)  # their subscriptions end with the session (the clients listen again)
        if session.session_id is None:
            return

        async def delete() -> None:
            headers = [*upstream_headers(scope, []), (b"mcp-session-id", session.session_id.encode())]  # type: ignore[union-attr]
            call = UpstreamCall(self.inner, subscope(scope, headers, "DELETE"), b"")
            try:
                await call.start()
            finally:
                await call.aclose()

        self._spawn(delete())

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _post(self, scope: Scope, session: FrontSession, message: JSONObject) -> int:
        """POST ``message`` (a notification or a response) to the session; the status."""
        call = UpstreamCall(self.inner, subscope(scope, self._session_headers(scope, session)), dumps(message))
        try:
            status = await call.start()
            await call.read(_REFUSAL_BYTES)
            return status
        finally:
            await call.aclose()

    def _session_headers(self, scope: Scope, session: FrontSession) -> RawHeaders:
        extra = [(b"mcp-protocol-version", session.version.encode())]
        if session.session_id is not None:
            extra.append((b"mcp-session-id", session.session_id.encode()))
        return upstream_headers(scope, extra)

    async def _carry(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        session: FrontSession,
        message: JSONObject,
        envelope: Envelope,
        key: str,
    ) -> None:
        for attempt in range(2):
            level = session.set_level(envelope)
            if level is not None:
                await self._request(scope, session, level)
            upstream_id = session.mint_id()
            call = UpstreamCall(
                self.inner,
                subscope(scope, self._session_headers(scope, session)),
                dumps(legacy_request(message, upstream_id)),
            )
            status = await call.start()
            if status == 404 and attempt == 0:
                await call.aclose()
                logger.info("the upstream no longer knows a 2026-07-28 client's session: opened again")
                fresh = await self._session(scope, send, key, envelope, message, stale=session)
                if fresh is None:
                    return
                session = fresh
                continue
            break
        relay = Relay.start(message, upstream_id, envelope)
        stream = ClientStream(send)
        if status != 200:
            raw, longer = await call.read(self.max_message_bytes)
            answer = None if longer else message_of(raw)
            await call.aclose()
            if status in (401, 403) or status >= 500 or answer is None or not ("result" in answer or "error" in answer):
                await relay_whole(send, call, raw)  # as it came (credentials: the client's OAuth; the server's trouble)
            else:
                await respond(send, status, dumps(relay.final(answer)))
            return
        if not call.streaming:
            raw, longer = await call.read(self.max_message_bytes)
            await call.aclose()
            answer = None if longer else message_of(raw)
            if answer is None or not ("result" in answer or "error" in answer):
                await respond(
                    send,
                    502,
                    error_body(message.get("id"), "the legacy upstream's answer is no JSON-RPC response", -32603),
                )
                return
            await stream.finish(relay.final(answer))
            return
        await self._drain(scope, receive, session, relay, call, stream, key)

    async def _request(self, scope: Scope, session: FrontSession, request: JSONObject) -> None:
        """Send one request of the front's own in the session and wait for its answer (ignored)."""
        call = UpstreamCall(self.inner, subscope(scope, self._session_headers(scope, session)), dumps(request))
        try:
            if await call.start() == 200:
                await response_of(call, request.get("id"), _REFUSAL_BYTES)
        finally:
            await call.aclose()

    async def _drain(
        self,
        scope: Scope,
        receive: Receive,
        session: FrontSession,
        relay: Relay,
        call: UpstreamCall,
        stream: ClientStream,
        key: str,
    ) -> None:
        """Relay the upstream stream of ``relay`` to the client's request until its response, a
        question (the call is parked) or the client's hang-up (the upstream request is cancelled)."""
        gone = asyncio.Event()
        watcher = asyncio.ensure_future(hang_up(receive, gone))
        upstream = [call]  # the call now read (a resumed stream replaces it)
        reading = asyncio.ensure_future(self._relay_stream(scope, session, relay, upstream, stream))
        session.busy += 1
        parked = False
        try:
            await asyncio.wait({watcher, reading}, return_when=asyncio.FIRST_COMPLETED)
            if not reading.done():  # the client hung up: 2026-07-28's cancellation, in the legacy words
                reading.cancel()
                await asyncio.gather(reading, return_exceptions=True)
                cancelled = {"requestId": relay.upstream_id, "reason": "the 2026-07-28 client closed its stream"}
                await self._post(
                    scope, session, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancelled}
                )
                return
            outcome = reading.result()
            if isinstance(outcome, dict):  # questions: park the call for the retry
                waiting = _Waiting(upstream[0], session)
                token, dropped = self.core.park(relay, waiting, key, time.monotonic())
                parked = True
                for old in dropped:
                    self._spawn(self._abandon(scope, old))
                waiting.timer = self._spawn(self._deadline(scope, token))
                await stream.finish(relay.input_required(outcome, token))
        finally:
            watcher.cancel()
            session.busy -= 1
            session.last_used = time.monotonic()
            if not parked:
                await upstream[0].aclose()

    async def _relay_stream(
        self, scope: Scope, session: FrontSession, relay: Relay, upstream: list[UpstreamCall], stream: ClientStream
    ) -> dict[str, JSONObject] | None:
        """Read the upstream stream: ``None`` once the client's request is answered, or the
        questions that end it (``inputRequests``). A stream that ends after an event id and before
        the response is resumed with ``GET`` and ``Last-Event-ID`` (2025-11-25 SSE polling,
        SEP-1699), after the ``retry`` it named (at most :data:`_MAX_RETRY_MS`), at most
        :data:`_MAX_RESUMES` times."""
        for _ in range(_MAX_RESUMES + 1):
            call = upstream[0]
            async for message in call.messages(self.max_message_bytes):
                effect = relay.on_message(message)
                if isinstance(effect, ToClient):
                    await stream.event(effect.message)
                elif isinstance(effect, ToUpstream):
                    await self._post(scope, session, effect.message)
                elif isinstance(effect, ToListeners):
                    self._broadcast(session.key, effect.message)
                elif isinstance(effect, Ask):
                    return {effect.key: effect.request}
                elif isinstance(effect, Final):
                    await stream.finish(effect.message)
                    return None
            if call.last_event_id is None:
                break
            await asyncio.sleep(min(call.retry_ms or 0, _MAX_RETRY_MS) / 1000)
            headers = [
                (k, v) for k, v in self._session_headers(scope, session) if k not in (b"content-type", b"accept")
            ]
            headers += [(b"accept", b"text/event-stream"), (b"last-event-id", call.last_event_id)]
            resumed = UpstreamCall(self.inner, subscope(scope, headers, "GET"), b"")
            upstream[0] = resumed
            await call.aclose()
            if await resumed.start() != 200 or not resumed.streaming:
                break
        await stream.finish(
            {
                "jsonrpc": "2.0",
                "id": relay.client_id,
                "error": {"code": -32603, "message": "the legacy upstream's stream ended before its response"},
            }
        )
        return None

    async def _resume(
        self, scope: Scope, receive: Receive, send: Send, message: JSONObject, key: str, state: JSON
    ) -> None:
        parked = self.core.claim(state, key, time.monotonic())
        if parked is None:
            text = "requestState names no question waiting for an answer (unknown, answered, or abandoned)"
            await respond(send, 200, error_body(message.get("id"), text, -32602))
            return
        waiting: _Waiting = parked.handle
        if waiting.timer is not None:
            waiting.timer.cancel()
        relay, call, session = parked.relay, waiting.call, waiting.session
        for answer in relay.resume(message):
            status = await self._post(scope, session, answer)
            if status >= 400:
                await call.aclose()
                text = f"the legacy upstream refused the client's answer (HTTP {status})"
                await respond(send, 200, error_body(message.get("id"), text, -32603))
                return
        await self._drain(scope, receive, session, relay, call, ClientStream(send), key)

    async def _deadline(self, scope: Scope, token: str) -> None:
        """Abandon the parked request ``token`` once its time is up (unless claimed first). The wait
        is measured again after each sleep: a loop's timer may fire before the monotonic clock
        reaches its deadline (libuv's cached loop time, under uvloop)."""
        while True:
            waiting = self.core.parked.get(token)
            if waiting is None:
                return
            left = waiting.deadline - time.monotonic()
            if left <= 0:
                break
            await asyncio.sleep(left + 0.001)
        parked = self.core.overdue(token, time.monotonic())
        if parked is not None:
            logger.info(
                "a 2026-07-28 client did not retry within %ss: the upstream request is abandoned",
                self.core.input_timeout,
            )
            await self._abandon(scope, parked)

    async def _abandon(self, scope: Scope, parked: Parked) -> None:
        """Give up a parked request: cancel it upstream (the legacy way) and close its stream."""
        waiting: _Waiting = parked.handle
        if waiting.timer is not None and waiting.timer is not asyncio.current_task():
            waiting.timer.cancel()
        cancelled = {"requestId": parked.relay.upstream_id, "reason": "the client gave no answer in time"}
        try:
            await self._post(
                scope, waiting.session, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancelled}
            )
        finally:
            await waiting.call.aclose()

    # -- subscriptions/listen -----------------------------------------------------------------------

    def _broadcast(self, key: str, message: JSONObject) -> None:
        for queue in self._listeners.get(key, ()):
            if queue.qsize() < _LISTENER_QUEUE:
                queue.put_nowait(message)

    async def _listen(
        self, scope: Scope, receive: Receive, send: Send, session: FrontSession, message: JSONObject
    ) -> None:
        listen_id = message.get("id")
        params = message.get("params")
        accepted = listen_filter(
            params.get("notifications") if isinstance(params, dict) else None, session.capabilities
        )
        uris = accepted.get("resourceSubscriptions")
        for uri in uris if isinstance(uris, list) else []:
            subscribe = {
                "jsonrpc": "2.0",
                "id": session.mint_id("sub"),
                "method": "resources/subscribe",
                "params": {"uri": uri},
            }
            await self._request(scope, session, subscribe)
        queue: asyncio.Queue[JSONObject | None] = asyncio.Queue()
        listeners = self._listeners.setdefault(session.key, set())
        listeners.add(queue)
        if session.key not in self._readers:
            self._readers[session.key] = asyncio.ensure_future(self._read_stream(scope, session))
        gone = asyncio.Event()
        watcher = asyncio.ensure_future(hang_up(receive, gone))
        session.busy += 1
        stream = ClientStream(send)
        try:
            await stream.event(acknowledged(listen_id, accepted))
            while True:
                getter = asyncio.ensure_future(queue.get())
                stop = asyncio.ensure_future(gone.wait())
                await asyncio.wait({getter, stop}, return_when=asyncio.FIRST_COMPLETED)
                stop.cancel()
                if not getter.done():
                    getter.cancel()
                    return
                notification = getter.result()
                if notification is None:  # the session's stream ended: so does the subscription
                    result = {"resultType": "complete", "_meta": {"io.modelcontextprotocol/subscriptionId": listen_id}}
                    await stream.event({"jsonrpc": "2.0", "id": listen_id, "result": result})
                    return
                out = listen_notification(notification, listen_id, accepted)
                if out is not None:
                    await stream.event(out)
        except OSError:
            return
        finally:
            watcher.cancel()
            session.busy -= 1
            session.last_used = time.monotonic()
            listeners.discard(queue)
            if not listeners:
                self._listeners.pop(session.key, None)
                reader = self._readers.pop(session.key, None)
                if reader is not None:
                    reader.cancel()
            try:
                await send({"type": "http.response.body", "body": b""})
            except OSError:
                pass

    async def _read_stream(self, scope: Scope, session: FrontSession) -> None:
        """The session's ``GET`` stream, its notifications to the listeners. A server that has no
        stream (405) leaves the listeners with the notifications of request streams; a stream that
        ends ends the listeners' subscriptions."""
        headers = [(k, v) for k, v in self._session_headers(scope, session) if k not in (b"content-type", b"accept")]
        headers.append((b"accept", b"text/event-stream"))
        call = UpstreamCall(self.inner, subscope(scope, headers, "GET"), b"")
        opened = False
        try:
            if await call.start() != 200 or not call.streaming:
                return
            opened = True
            async for upstream in call.messages(self.max_message_bytes):
                if "method" not in upstream:
                    continue
                if "id" in upstream:  # a request on the session's stream: ping answered, anything else refused
                    reply: JSONObject = {"jsonrpc": "2.0", "id": upstream["id"]}
                    if upstream.get("method") == "ping":
                        reply["result"] = {}
                    else:
                        reply["error"] = {"code": -32601, "message": "a 2026-07-28 client takes no request here"}
                    await self._post(scope, session, reply)
                    continue
                self._broadcast(session.key, upstream)
        finally:
            await call.aclose()
            if opened and self._readers.get(session.key) is asyncio.current_task():
                self._readers.pop(session.key, None)
                for queue in self._listeners.get(session.key, ()):
                    queue.put_nowait(None)


def _answer(call: UpstreamCall, raw: bytes, request_id: JSON) -> JSONObject | None:
    """The JSON-RPC message of a whole answer: the body's, or the response in an SSE body."""
    if call.streaming:
        return response_to_stream(raw, request_id)
    return message_of(raw)


def response_to_stream(raw: bytes, request_id: JSON) -> JSONObject | None:
    """The response to ``request_id`` among the events of a whole SSE body."""
    splitter = SSESplitter(len(raw) + 1)
    for block in [*splitter.feed(raw), *splitter.feed(b"\n\n")]:
        event = parse_event(block)
        found = response_to(event.data, request_id)
        if found is not None:
            return found
    return None
