"""The proxy's own ``tools/list``: when a call names a tool the proxy has not seen in its scope, the
scope's tool list is fetched through the inner app, as the client would ask for it (the same
authorization and session headers, every page), while the call runs.

Each page's response goes through a :class:`~mcp_normalizer.engine.transform.ResponseTransformer` like a
client's ``tools/list`` (JSON or SSE, the same limits and rules, renamed tools remembered), so the
scope learns exactly what a listing client would have taught it; the rewritten bytes go nowhere and
no rewrite is logged (no client sees this list). One fetch runs per scope at a time; exchanges that
need it while it runs wait for it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import anyio

from ..engine.audit import AuditLog
from ..engine.capture import Capture
from ..engine.catalog import ToolSet
from ..engine.exchange import Exchange
from ..engine.normalize import Normalizer, Record
from ..engine.transform import ResponseTransformer
from ..errors import ResponseRefused
from ..types import HANG_UP, JSON, OWN_FETCH, ASGIApp, JSONObject, Message, RawHeaders, Scope
from ..wire.eras import era_of
from ..wire.jsoncodec import dumps
from ..wire.jsonrpc import TOOLS_LIST, IdKey, PendingRequest, RequestInfo, mint_id
from .relay import TransformingSend

logger = logging.getLogger(__name__)

#: Request headers copied onto the proxy's own ``tools/list`` requests.
_FETCH_HEADERS = frozenset(
    {b"host", b"authorization", b"cookie", b"mcp-session-id", b"mcp-protocol-version", b"origin", b"user-agent"}
)
#: Pages fetched at most (a server whose cursors never end does not keep a fetch running).
MAX_PAGES = 100


class _Unheard(AuditLog):
    """The audit log of a fetched page: nothing is logged (no client sees the page)."""

    def emit(self, record: Record, *, method: str, jsonrpc_id: JSON, **fields: object) -> None:
        return None


@dataclass(slots=True)
class _Fetch:
    """A ``tools/list`` fetch in flight for one scope; later exchanges wait for it."""

    done: anyio.Event = field(default_factory=anyio.Event)
    learned: list[ToolSet] = field(default_factory=list)


class ToolsFetcher:
    """Fetches a scope's ``tools/list`` through ``app`` for the exchanges that need it.

    Args:
        app: the inner ASGI app (the MCP server, or the proxy's forwarder).
        normalizer: the rule engine the pages go through.
        timeout: seconds a whole fetch may take (then the waiting responses go on without it).
        max_bytes: a page larger than this (a JSON body, an SSE event) is not read.
        capture: where the fetched pages are recorded, if anywhere.
    """

    def __init__(
        self,
        app: ASGIApp,
        normalizer: Normalizer,
        *,
        timeout: float,
        max_bytes: int,
        capture: Capture | None = None,
    ) -> None:
        self.app = app
        self.normalizer = normalizer
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.capture = capture
        self._audit = _Unheard("fetch")
        self._inflight: dict[str, _Fetch] = {}

    async def fetch_for(
        self,
        scope: Scope,
        info: RequestInfo,
        exchange: Exchange,
        unknown: set[str],
        fetched: anyio.Event,
        *,
        read_keys: bool = False,
    ) -> None:
        """Learn the tools of ``exchange``'s scope (``unknown`` are the ones it waits for), then set
        ``fetched``. Never raises: a failed or timed-out fetch is logged, and the waiting response
        goes on with what is known. ``read_keys``: the exchange needs those tools' property names
        read (a Claude host's argument map), which a list made for another client may not have."""
        catalog = exchange.state.catalog

        def known(tool: str) -> bool:
            entry = exchange.tool(tool)
            return catalog.known_absent(tool) if entry is None else (entry.keys_read or not read_keys)

        try:
            running = self._inflight.get(exchange.scope)
            if running is not None:
                await running.done.wait()
                exchange.learned += running.learned
                if not read_keys or all(map(known, unknown)):
                    return
            if all(map(known, unknown)):
                return  # a fetch that ended after this exchange looked has learned them
            fetch = self._inflight[exchange.scope] = _Fetch()
            try:
                with anyio.move_on_after(self.timeout) as timer:
                    if await self._pages(scope, info, exchange, fetch):  # the whole list came:
                        exchange.state.mark_absent(t for t in unknown if exchange.tool(t) is None)
                if timer.cancelled_caught:
                    logger.warning("tools/list fetch timed out after %ss (scope %s)", self.timeout, exchange.scope)
            except Exception:
                logger.warning("tools/list fetch failed (scope %s)", exchange.scope, exc_info=True)
            finally:
                fetch.done.set()
                del self._inflight[exchange.scope]
        finally:
            exchange.fetching -= unknown
            fetched.set()

    async def _pages(self, scope: Scope, info: RequestInfo, exchange: Exchange, fetch: _Fetch) -> bool:
        """Fetch every page; True when every page arrived (what the list lacks is then known absent)."""
        call_meta = next((p.meta for p in info.pending.values() if p.meta), {})
        protocol_meta = {k: v for k, v in call_meta.items() if k.startswith("io.modelcontextprotocol/")}
        modern = era_of(exchange.era).stateless
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            params: JSONObject = {}
            if modern:
                params["_meta"] = protocol_meta
            if cursor is not None:
                params["cursor"] = cursor
            request_id = mint_id("tools-list")  # no client can write it: never a client's id
            key: IdKey = ("s", request_id)
            page = Exchange(
                {key: PendingRequest(TOOLS_LIST, cursor=cursor)},
                exchange.era,
                exchange.scope,
                exchange.state,
                exchange.public,
                sole=key,
                client=exchange.client,
                private=exchange.private,
                own_stream=True,
            )
            body = dumps({"jsonrpc": "2.0", "id": request_id, "method": TOOLS_LIST, "params": params})
            if not await self._request(scope, body, page, modern):
                return False
            exchange.learned += page.learned
            fetch.learned += page.learned
            next_cursor = page.listed.get("nextCursor") if page.listed is not None else None
            if not isinstance(next_cursor, str) or not next_cursor:
                return True
            cursor = next_cursor
        return False

    async def _request(self, scope: Scope, body: bytes, page: Exchange, modern: bool) -> bool:
        """POST one ``tools/list`` request to the inner app and run its response through a
        transformer for ``page``; True when the page was learned.

        Reading stops as soon as the response is there: an SSE stream that stays open after it
        (or never ends) does not hold the caller up.
        """
        headers: RawHeaders = [(k, v) for k, v in scope["headers"] if k in _FETCH_HEADERS]
        headers += [
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
            (b"content-length", str(len(body)).encode()),
        ]
        if modern:
            headers.append((b"mcp-method", TOOLS_LIST.encode()))
        sub_scope = {**scope, "method": "POST", "headers": headers}
        sub_scope.pop(HANG_UP, None)  # (the client's connection ending is not this request's end)
        sub_scope[OWN_FETCH] = True
        transformer = ResponseTransformer(
            page,
            self.normalizer,
            self._audit,
            max_json_bytes=self.max_bytes,
            max_event_bytes=self.max_bytes,
            capture=self.capture,
        )
        answered = anyio.Event()
        delivered = False

        async def discard(message: Message) -> None:
            return None

        relay = TransformingSend(discard, transformer, None)

        async def receive() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await answered.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            await relay(message)
            if page.listed is not None:
                answered.set()

        async with anyio.create_task_group() as tg:

            async def run() -> None:
                try:
                    await self.app(sub_scope, receive, send)
                except ResponseRefused as exc:  # a reply to another request: the page is not learned
                    logger.warning("tools/list fetch: %s", exc)
                finally:
                    answered.set()

            tg.start_soon(run)
            await answered.wait()
            tg.cancel_scope.cancel()  # the answer is in: stop the inner app (it sees the client leave)
        transformer.close()
        if transformer.status != 200:
            logger.warning("tools/list fetch answered HTTP %s", transformer.status)
        return page.listed is not None
