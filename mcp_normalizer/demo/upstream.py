"""A small MCP server (Streamable HTTP) that says exactly what it is told.

:class:`ScriptedServer` answers ``initialize``, ``ping``, ``tools/list`` and ``tools/call`` from a list
of :class:`ToolSpec`, byte-exact and without validating anything, so it can put any non-conforming
result on the wire. It speaks both eras:

- legacy (2025-03-26 to 2025-11-25): it mints a session id, accepts 2025-03-26 batches;
- 2026-07-28 (a request whose ``params._meta`` names that version): no session, ``server/discover``,
  ``resultType`` on every result, ``ttlMs``/``cacheScope`` on ``tools/list``, and a 400 with
  ``-32020`` when the ``Mcp-Method`` header disagrees with the body (SEP-2243).

It answers with JSON or SSE (``response_mode``) and streams progress notifications before a result
when the client sent a ``progressToken``. :func:`protean_server` builds the built-in example: the
old Protean contract that strict clients reject.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import anyio
import orjson

from ..types import JSON, JSONObject, Receive, Scope, Send
from ..wire.eras import ERAS, NEWEST, era_of
from ..wire.responses import respond

#: The legacy versions it negotiates in ``initialize``, newest first (2025-11-25 to 2024-11-05).
VERSIONS = tuple(era.version for era in reversed(ERAS) if era.sessions)
#: The stateless version it speaks.
MODERN = NEWEST.version
PROTOCOL_META = "io.modelcontextprotocol/protocolVersion"
_SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"


@dataclass(slots=True)
class ToolCall:
    """What a tool handler gets.

    Attributes:
        name: the tool called.
        arguments: the call's arguments (``{}`` when absent).
        headers: the request headers, lower-case names.
    """

    name: str
    arguments: JSONObject
    headers: Mapping[str, str]
    _progress_token: JSON = None
    _notify: Callable[[JSONObject], Awaitable[None]] | None = None
    _ask: Callable[[JSONObject], Awaitable[JSONObject]] | None = None

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send ``notifications/progress`` on the response stream (SSE mode, token given)."""
        if self._progress_token is None or self._notify is None:
            return
        params: JSONObject = {"progressToken": self._progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self._notify({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})

    async def log(self, data: JSON, level: str = "info") -> None:
        """Send ``notifications/message`` on the response stream (SSE mode)."""
        if self._notify is not None:
            params: JSONObject = {"level": level, "logger": "scripted", "data": data}
            await self._notify({"jsonrpc": "2.0", "method": "notifications/message", "params": params})

    async def ask(self, method: str, params: JSONObject) -> JSONObject:
        """Send the client a request on the response stream (``elicitation/create``,
        ``sampling/createMessage``, ``roots/list``) and wait for its answer, the JSON-RPC response the
        client POSTs (legacy eras, SSE mode only).

        Raises:
            RuntimeError: the call cannot ask (JSON mode, or a 2026-07-28 request).
        """
        if self._ask is None:
            raise RuntimeError("this call cannot send the client a request")
        return await self._ask({"method": method, "params": params})


Handler = Callable[[ToolCall], Awaitable[JSONObject]]


@dataclass(slots=True)
class ToolSpec:
    """A tool as listed (``tool``, sent verbatim in ``tools/list``) and what calling it returns.

    With ``as_task``, a call is answered with a task handle when the client allows it (2025-11-25:
    ``params.task`` on the request; 2026-07-28: the ``io.modelcontextprotocol/tasks`` extension in
    the request's client capabilities); the handler's result is then delivered by ``tasks/result``
    (2025-11-25) or inside the completed task of ``tasks/get`` (2026-07-28).
    """

    tool: JSONObject
    handler: Handler
    as_task: bool = False


def returning(result: JSONObject) -> Handler:
    """A handler that returns ``result`` verbatim."""

    async def handler(call: ToolCall) -> JSONObject:
        return result

    return handler


@dataclass
class ScriptedServer:
    """ASGI app of a legacy MCP server at every path (``/mcp`` by convention).

    Args:
        tools: the tools, or a function of the request headers returning them (tool lists that
            differ per authorization).
        response_mode: ``sse`` (``text/event-stream``, CRLF) or ``json`` (``application/json``).
        page_size: tools per ``tools/list`` page (``None``: one page).
        name: ``serverInfo.name``.
        list_ttl_ms: ``ttlMs`` of 2026-07-28 ``tools/list`` results.
        cache_scope: ``cacheScope`` of 2026-07-28 ``tools/list`` results.
        era_fields: put the members 2026-07-28 requires on its results (``resultType``, and
            ``ttlMs``/``cacheScope`` on ``tools/list`` and ``server/discover``); ``False``: leave
            them out, as a server that skipped them does (what a tool handler returns is sent as is).
        legacy: answer the legacy eras too; ``False``: speak only 2026-07-28, as such a server does
            (``S2026-07-28/basic/transports/streamable-http.mdx``): a request without the era's
            ``_meta`` (``initialize`` among them) gets 400 and ``UnsupportedProtocolVersionError``
            (``-32022``, with the versions it supports), ``GET`` and ``DELETE`` get 405, and a
            ``subscriptions/listen`` request gets its acknowledgement and then stays open, sending
            each notification :meth:`notify` is given.
        list_changed: declare ``tools.listChanged`` (``server/discover`` and ``initialize``): the
            tool list may change, and a client may listen for it.
        resource_subscriptions: declare ``resources.subscribe`` (``server/discover`` and ``initialize``).
        modern: answer 2026-07-28 requests too; ``False``: speak only the legacy eras, as every
            server before 2026-07-28 does: it keeps the sessions it minted (``sessions``; a request
            other than ``initialize`` without one gets 400 and ``-32000`` "No valid session ID
            provided", as the TS SDK 1.x answers it; an id it does not keep gets 404), a request's
            ``_meta`` protocol fields mean nothing to it (``server/discover`` is ``-32601``), a
            ``GET`` opens the session's stream (each notification :meth:`notify` is given goes
            there), and a tool handler may ask the client (:meth:`ToolCall.ask`).
        instructions: the ``instructions`` of its ``initialize`` result (``None``: none).

    Attributes:
        requests: every JSON-RPC message received, with its headers, in arrival order.
        sessions: the session ids a legacy-only server (``modern=False``) keeps; clearing it is a
            restart as its clients see it.
    """

    tools: Sequence[ToolSpec] | Callable[[Mapping[str, str]], Sequence[ToolSpec]]
    response_mode: Literal["sse", "json"] = "sse"
    page_size: int | None = None
    name: str = "legacy-example"
    list_ttl_ms: int = 60_000
    cache_scope: Literal["private", "public"] = "private"
    era_fields: bool = True
    legacy: bool = True
    modern: bool = True
    list_changed: bool = False
    resource_subscriptions: bool = False
    instructions: str | None = None
    tasks: dict[str, JSONObject] = field(default_factory=dict)
    requests: list[tuple[JSONObject, Mapping[str, str]]] = field(default_factory=list)
    listeners: list[asyncio.Queue[JSONObject]] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)
    _waiting: dict[str, asyncio.Future[JSONObject]] = field(default_factory=dict)
    _asking: dict[str, set[str]] = field(default_factory=dict)
    _asked: int = 0

    def _tools(self, headers: Mapping[str, str]) -> Sequence[ToolSpec]:
        return self.tools(headers) if callable(self.tools) else self.tools

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if not self.legacy and scope["method"] != "POST":
            await respond(send, 405, b"", None, [(b"allow", b"POST")])
            return
        if not self.modern and scope["method"] in ("GET", "DELETE"):
            await self._legacy_only(scope["method"], headers, receive, send)
            return
        if scope["method"] == "DELETE":
            await respond(send, 200, b"", None)
            return
        if scope["method"] != "POST":
            await respond(send, 405, b"", None, [(b"allow", b"POST, DELETE")])
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        try:
            decoded = orjson.loads(body)
        except orjson.JSONDecodeError:
            error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
            await respond(send, 400, orjson.dumps(error))
            return
        batch = isinstance(decoded, list)
        messages = decoded if batch else [decoded]
        for message in messages:
            self.requests.append((message, headers))
        calls = [m for m in messages if isinstance(m, dict) and "method" in m and "id" in m]
        modern = not batch and _modern(decoded) and self.modern
        if not self.modern and await self._refused(decoded, messages, headers, send):
            return
        if not modern and not self.legacy:
            request_id = decoded.get("id") if isinstance(decoded, dict) else None
            await respond(send, 400, unsupported_version(request_id, headers.get("mcp-protocol-version")))
            return
        if modern and decoded.get("method") == "subscriptions/listen":
            await self._listen(decoded, receive, send)
            return
        if modern and headers.get("mcp-method", decoded.get("method")) != decoded.get("method"):
            error = {"jsonrpc": "2.0", "id": decoded.get("id"), "error": {"code": -32020, "message": "Header mismatch"}}
            await respond(send, 400, orjson.dumps(error))
            return
        session = headers.get("mcp-session-id") or secrets.token_hex(16)
        if not self.modern:
            self.sessions.add(session)
        extra = [] if modern else [(b"mcp-session-id", session.encode())]
        if not calls:
            await respond(send, 202, b"", None, extra)
            return
        if self.response_mode == "json":
            replies = [await self._dispatch(m, headers, None) for m in calls]
            payload = _encode(replies if batch else replies[0])
            await respond(send, 200, payload, headers=extra)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), *extra],
            }
        )

        async def emit(msg: Any) -> None:
            data = _encode(msg)
            await send(
                {
                    "type": "http.response.body",
                    "body": b"event: message\r\ndata: " + data + b"\r\n\r\n",
                    "more_body": True,
                }
            )

        if batch:
            replies = [await self._dispatch(m, headers, emit) for m in calls]
            await emit(replies)
        else:
            await emit(await self._dispatch(calls[0], headers, emit))
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _legacy_only(self, method: str, headers: Mapping[str, str], receive: Receive, send: Send) -> None:
        """``GET`` (the session's stream) and ``DELETE`` of a legacy-only server."""
        session = headers.get("mcp-session-id")
        if session is None or session not in self.sessions:
            status = 400 if session is None else 404
            await respond(send, status, orjson.dumps(_no_session(None, status)))
            return
        if method == "DELETE":
            self.sessions.discard(session)
            await respond(send, 200, b"", None)
            return
        queue: asyncio.Queue[JSONObject] = asyncio.Queue()
        self.listeners.append(queue)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        gone = asyncio.ensure_future(_disconnect(receive))
        try:
            await send({"type": "http.response.body", "body": b": stream open\n\n", "more_body": True})
            while True:
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({getter, gone}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():  # the client hung up
                    getter.cancel()
                    return
                data = _encode(getter.result())
                await send(
                    {
                        "type": "http.response.body",
                        "body": b"event: message\ndata: " + data + b"\n\n",
                        "more_body": True,
                    }
                )
        finally:
            gone.cancel()
            self.listeners.remove(queue)

    async def _refused(self, decoded: JSON, messages: list[JSON], headers: Mapping[str, str], send: Send) -> bool:
        """A legacy-only server's refusals and the client's answers to its requests: True when
        the POST is answered."""
        answers = [m for m in messages if isinstance(m, dict) and "method" not in m and "id" in m]
        for message in messages:  # a cancelled request's questions get no answer now: it is told so
            if isinstance(message, dict) and message.get("method") == "notifications/cancelled":
                cancelled = str((message.get("params") or {}).get("requestId"))
                for ask_id in self._asking.pop(cancelled, set()):
                    error = {"code": -32800, "message": "request cancelled"}
                    answers.append({"jsonrpc": "2.0", "id": ask_id, "error": error})
        for answer in answers:
            waiting = self._waiting.pop(str(answer.get("id")), None)
            if waiting is not None and not waiting.done():
                waiting.set_result(answer)
        session = headers.get("mcp-session-id")
        opening = any(isinstance(m, dict) and m.get("method") == "initialize" for m in messages)
        if session is not None and session not in self.sessions:
            await respond(send, 404, orjson.dumps(_no_session(decoded, 404)))
            return True
        if session is None and not opening:
            await respond(send, 400, orjson.dumps(_no_session(decoded, 400)))
            return True
        if answers and len(answers) == len(messages):
            await respond(send, 202, b"", None)
            return True
        return False

    async def _ask_client(
        self, emit: Callable[[JSONObject], Awaitable[None]], request_id: JSON, request: JSONObject
    ) -> JSONObject:
        self._asked += 1
        ask_id = f"scripted-ask-{self._asked}"
        future: asyncio.Future[JSONObject] = asyncio.get_running_loop().create_future()
        self._waiting[ask_id] = future
        self._asking.setdefault(str(request_id), set()).add(ask_id)
        try:
            await emit({"jsonrpc": "2.0", "id": ask_id, **request})
            return await future
        finally:
            self._waiting.pop(ask_id, None)
            self._asking.get(str(request_id), set()).discard(ask_id)

    async def notify(self, notification: JSONObject) -> None:
        """Send ``notification`` on every open ``subscriptions/listen`` stream (2026-07-28 only), or
        every session's ``GET`` stream of a legacy-only server."""
        for queue in list(self.listeners):
            queue.put_nowait(notification)

    async def _listen(self, request: JSONObject, receive: Receive, send: Send) -> None:
        params = request.get("params") or {}
        listen_id = request.get("id")
        queue: asyncio.Queue[JSONObject] = asyncio.Queue()
        self.listeners.append(queue)
        # The client closing the stream ends the listen (2026-07-28 cancellation).
        watcher = asyncio.ensure_future(_disconnected(receive))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        ack = {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": params.get("notifications") or {}, "_meta": {_SUBSCRIPTION: listen_id}},
        }
        try:
            while True:
                data = _encode(ack)
                await send(
                    {
                        "type": "http.response.body",
                        "body": b"event: message\ndata: " + data + b"\n\n",
                        "more_body": True,
                    }
                )
                waiting = asyncio.ensure_future(queue.get())
                await asyncio.wait({waiting, watcher}, return_when=asyncio.FIRST_COMPLETED)
                if not waiting.done():
                    waiting.cancel()
                    return
                notification = waiting.result()
                params = dict(notification.get("params") or {})
                params["_meta"] = {**(params.get("_meta") or {}), _SUBSCRIPTION: listen_id}
                ack = {**notification, "params": params}
        finally:
            watcher.cancel()
            if queue in self.listeners:
                self.listeners.remove(queue)

    async def _dispatch(
        self, message: JSONObject, headers: Mapping[str, str], emit: Callable[[JSONObject], Awaitable[None]] | None
    ) -> JSONObject:
        reply = await self._answer(message, headers, emit)
        result = reply.get("result")
        if _modern(message) and self.modern and isinstance(result, dict) and self.era_fields:
            result.setdefault("resultType", "complete")
            if message.get("method") == "tools/list":
                result.update(ttlMs=self.list_ttl_ms, cacheScope=self.cache_scope)
        return reply

    async def _answer(
        self, message: JSONObject, headers: Mapping[str, str], emit: Callable[[JSONObject], Awaitable[None]] | None
    ) -> JSONObject:
        method, params = message.get("method"), message.get("params") or {}
        reply: JSONObject = {"jsonrpc": "2.0", "id": message.get("id")}
        capabilities: JSONObject = {"tools": {"listChanged": self.list_changed}}
        if self.resource_subscriptions:
            capabilities["resources"] = {"subscribe": True}
        if method == "server/discover" and self.modern:
            reply["result"] = {
                "supportedVersions": [MODERN, *VERSIONS[:3]],
                "capabilities": capabilities,
                "serverInfo": {"name": self.name, "version": "1.0.0"},
            }
            if self.era_fields:
                reply["result"].update(ttlMs=0, cacheScope="public")
        elif method == "initialize":
            asked = params.get("protocolVersion")
            reply["result"] = {
                "protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
                "capabilities": capabilities,
                "serverInfo": {"name": self.name, "version": "1.0.0"},
            }
            if self.instructions is not None:
                reply["result"]["instructions"] = self.instructions
        elif method == "ping":
            reply["result"] = {}
        elif method == "tools/list":
            tools = [spec.tool for spec in self._tools(headers)]
            start = int(params.get("cursor") or 0)
            end = len(tools) if self.page_size is None else start + self.page_size
            reply["result"] = {"tools": tools[start:end]}
            if end < len(tools):
                reply["result"]["nextCursor"] = str(end)
        elif method == "tools/call":
            spec = next((s for s in self._tools(headers) if s.tool["name"] == params.get("name")), None)
            if spec is None:
                reply["error"] = {"code": -32602, "message": f"Unknown tool: {params.get('name')}"}
            else:
                meta = params.get("_meta") or {}
                asks = None if emit is None or _modern(message) else partial(self._ask_client, emit, message.get("id"))
                call = ToolCall(
                    spec.tool["name"], params.get("arguments") or {}, headers, meta.get("progressToken"), emit, asks
                )
                result = dict(await spec.handler(call))  # a copy: canned results are shared
                if spec.as_task and (_wants_task(message) or "task" in params):
                    task_id = secrets.token_hex(8)
                    self.tasks[task_id] = result
                    result = _task(task_id, "working", modern=_modern(message))
                reply["result"] = result
        elif method in ("tasks/result", "tasks/get") and params.get("taskId") in self.tasks:
            task_id = params["taskId"]
            if method == "tasks/result":
                related = {"io.modelcontextprotocol/related-task": {"taskId": task_id}}
                reply["result"] = {**self.tasks[task_id], "_meta": related}
            elif _modern(message):
                completed = _task(task_id, "completed", modern=True)
                reply["result"] = {**completed, "resultType": "complete", "result": self.tasks[task_id]}
            else:
                reply["result"] = _task(task_id, "completed", modern=False)["task"]
        else:
            reply["error"] = {"code": -32601, "message": f"Method not found: {method}"}
        return reply


def unsupported_version(request_id: Any, requested: str | None) -> bytes:
    """The body of a 2026-07-28-only server's 400 for a legacy request: ``UnsupportedProtocolVersionError``
    (``-32022``, ``data: {supported, requested}``; ``S2026-07-28/basic/transports/streamable-http.mdx``)."""
    error = {
        "code": -32022,
        "message": "Unsupported protocol version",
        "data": {"supported": [MODERN], "requested": requested},
    }
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": error})


def _encode(value: Any) -> bytes:
    """Compact JSON; the standard library takes over for what orjson refuses (nesting beyond 255)."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


async def _disconnect(receive: Receive) -> None:
    """Return when the client hangs up (its ``http.disconnect``)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _no_session(decoded: JSON, status: int) -> JSONObject:
    """A legacy-only server's refusal of a request outside a session it keeps (TS SDK 1.x words)."""
    rid = decoded.get("id") if isinstance(decoded, dict) else None
    if status == 404:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32001, "message": "Session not found"}}
    text = "Bad Request: No valid session ID provided"
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": text}}


def _wants_task(message: JSONObject) -> bool:
    """A 2026-07-28 request whose client capabilities include the tasks extension."""
    meta = (message.get("params") or {}).get("_meta") or {}
    capabilities = meta.get("io.modelcontextprotocol/clientCapabilities") or {}
    return _modern(message) and "io.modelcontextprotocol/tasks" in (capabilities.get("extensions") or {})


def _task(task_id: str, status: str, *, modern: bool) -> JSONObject:
    """A task handle: 2026-07-28 ``CreateTaskResult`` (flat) or 2025-11-25 (under ``task``)."""
    stamp = "2026-11-29T12:00:00Z"
    if modern:
        return {
            "resultType": "task",
            "taskId": task_id,
            "status": status,
            "createdAt": stamp,
            "lastUpdatedAt": stamp,
            "ttlMs": 60_000,
            "pollIntervalMs": 100,
        }
    return {
        "task": {
            "taskId": task_id,
            "status": status,
            "createdAt": stamp,
            "lastUpdatedAt": stamp,
            "ttl": 60_000,
            "pollInterval": 100,
        }
    }


def _modern(message: object) -> bool:
    """True for a 2026-07-28 request (its ``params._meta`` names a modern protocol version)."""
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(PROTOCOL_META) if isinstance(meta, dict) else None
    return isinstance(version, str) and era_of(version).stateless


# -- the built-in example: the old Protean contract ------------------------------------------------

_EMPTY_INPUT: JSONObject = {"type": "object", "properties": {}}
FORBIDDEN: JSONObject = {
    "type": "https://protean.example/problems/forbidden",
    "title": "Forbidden",
    "status": 403,
    "detail": "token lacks scope 'scopes:read'",
    "code": "SCOPE_DENIED",
}
GATE_FAILED: JSONObject = {
    "type": "https://protean.example/problems/gate-failed",
    "title": "Deployment gate failed",
    "status": 409,
    "detail": "gate 'change-freeze' is closed until Monday",
    "code": "GATE_FAILED",
    "gate": "change-freeze",
}
RUNTIMES: JSONObject = {
    "runtimes": [
        {"name": "python3.12", "scope": "team-a"},
        {"name": "python3.11", "scope": None},
        {"name": "node22", "scope": None},
    ]
}


async def _deploy(call: ToolCall) -> JSONObject:
    for step, message in enumerate(("build", "upload", "gate check"), start=1):
        await call.progress(step, 3, message)
        await anyio.sleep(0.2)
    return {"content": [], "structuredContent": GATE_FAILED, "isError": True}


def protean_tools() -> list[ToolSpec]:
    """The four tools of the legacy Protean example and their non-conforming results."""
    return [
        ToolSpec(
            {
                "name": "protean.scope_list",
                "description": "List the caller's scopes (gated: needs scopes:read).",
                "inputSchema": _EMPTY_INPUT,
                "outputSchema": {
                    "type": "object",
                    "properties": {"scopes": {"type": "array", "items": {"type": "string"}}},
                    "required": ["scopes"],
                },
            },
            # The old contract: the problem travels only in structuredContent.
            returning({"content": [], "structuredContent": FORBIDDEN, "isError": True}),
        ),
        ToolSpec(
            {
                "name": "protean.list_runtimes",
                "description": "List deployable runtimes and the scope each is restricted to.",
                "inputSchema": _EMPTY_INPUT,
                "outputSchema": {
                    "type": "object",
                    "properties": {
                        "runtimes": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {"name": {"type": "string"}, "scope": {"type": "string"}},
                                "required": ["name", "scope"],
                            },
                        }
                    },
                    "required": ["runtimes"],
                },
            },
            returning(
                {
                    "content": [{"type": "text", "text": orjson.dumps(RUNTIMES).decode()}],
                    "structuredContent": RUNTIMES,
                }
            ),
        ),
        ToolSpec(
            {
                "name": "protean.deploy",
                "description": "Deploy a service; streams progress, then runs the release gates.",
                "inputSchema": {"type": "object", "properties": {"service": {"type": "string"}}},
                "outputSchema": {
                    "type": "object",
                    "properties": {"deploymentId": {"type": "string"}, "url": {"type": "string"}},
                    "required": ["deploymentId"],
                },
            },
            _deploy,
        ),
        ToolSpec(
            {
                "name": "protean.whoami",
                "description": "Who the token belongs to (text only).",
                "inputSchema": _EMPTY_INPUT,
            },
            returning({"content": [{"type": "text", "text": "svc-deployer@team-a"}], "structuredContent": {}}),
        ),
    ]


def protean_server(response_mode: Literal["sse", "json"] = "sse") -> ScriptedServer:
    """The built-in example upstream: a legacy Protean server that follows the old contract."""
    return ScriptedServer(protean_tools(), response_mode=response_mode, name="protean-legacy")


async def _disconnected(receive: Receive) -> None:
    """Return when the client of a request hangs up (its ``http.disconnect``)."""
    while (await receive())["type"] != "http.disconnect":
        pass
