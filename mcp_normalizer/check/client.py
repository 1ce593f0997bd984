"""A minimal MCP client over Streamable HTTP for ``check``: raw JSON-RPC responses, nothing validated.

A strict client would throw away exactly what ``check`` must see, so this one only speaks the
transport. It negotiates the newest era the server speaks, as a dual-era client does (MCP
2026-07-28 ``basic/versioning.mdx``): a modern ``server/discover`` first (per-request ``_meta``
and ``MCP-Protocol-Version``/``Mcp-Method`` headers, SEP-2243); when the server does not answer it
as a 2026-07-28 server, the legacy ``initialize`` handshake (2025-11-25 offered, the server's choice
kept, its ``Mcp-Session-Id`` sent on every later request). Responses may come as JSON or as an SSE
stream; notifications and server requests on the stream are skipped.

Every answer is read within a byte bound (``max_message_bytes``) as it streams in, never whole
first: a JSON body or an SSE event past it raises :class:`TooLarge` once the bound is crossed, the
rest unread. :meth:`McpClient.list_tools` hands each page on as it comes (nothing is held after
it) and stops at a bound of its own on the whole listing (bytes, pages), saying why (:class:`Cut`).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType

import anyio
import httpx

from ..config import ProxyConfig, redact_url
from ..errors import CheckError, DecodeError
from ..types import JSON, JSONObject
from ..wire.eras import NEWEST, NEWEST_LEGACY, era_of
from ..wire.jsoncodec import dumps, loads
from ..wire.jsonrpc import CLIENT_INFO_META, PROTOCOL_VERSION_META
from ..wire.modern import header_value
from ..wire.sse import SSESplitter, parse_event

#: The stateless version asked for with ``server/discover``.
MODERN_ERA = NEWEST.version
#: The legacy version offered in ``initialize``.
LEGACY_ERA = NEWEST_LEGACY.version
#: The most ``tools/list`` pages read (a pager whose cursors never end is stopped there).
MAX_PAGES = 1000
#: The default bound of one answer (a ``tools/list`` page, a ``tools/call`` result): the proxy's own
#: ``max_message_bytes`` default.
MAX_MESSAGE_BYTES = ProxyConfig().max_message_bytes
#: The default bound of the whole listing, all pages together.
MAX_LISTING_BYTES = 2 * MAX_MESSAGE_BYTES
_CLIENT_INFO = {"name": "mcp-normalizer-check", "version": "1"}
_VISIBLE_ASCII = re.compile(r"[\x21-\x7e]+")


class TooLarge(CheckError):
    """An answer above the byte bound: reading stopped once ``read`` bytes had come (the rest unread).
    A ``tools/list`` page or a ``tools/call`` result past it is a finding; any other answer (the
    handshake) an error, as a :class:`~mcp_normalizer.errors.CheckError`.

    Attributes:
        method: the request it answers.
        read: the bytes read when the bound was crossed.
        limit: the bound.
    """

    def __init__(self, method: str, read: int, limit: int) -> None:
        super().__init__(f"{method}: the answer is larger than {limit} bytes (cut after {read})")
        self.method, self.read, self.limit = method, read, limit


@dataclass(frozen=True, slots=True)
class Cut:
    """Why :meth:`McpClient.list_tools` stopped before the last page.

    Attributes:
        bound: ``cursor`` (a ``nextCursor`` seen before: the server's fault), ``message`` (a page
            above ``max_message_bytes``), ``listing`` (the pages together above ``listing_bytes``)
            or ``pages`` (more than ``max_pages`` pages).
        text: what was cut, for the report.
    """

    bound: str
    text: str


class McpClient:
    """One connection to one MCP server.

    Args:
        url: the server's MCP endpoint (``http``/``https``; checked by the caller).
        headers: extra request headers (``Authorization``...), sent on every request; names and
            values must be valid header text (checked by the caller).
        timeout: seconds each request may take in all, from sending it to its complete answer.
        client_name: the ``clientInfo.name`` it gives (``initialize``; on 2026-07-28 every request's
            ``_meta``): a host's, to audit what that host gets (``check --host``).
        max_message_bytes: the most bytes of one answer it reads (a JSON body, or one SSE event):
            past it the request raises :class:`TooLarge`.

    Use as ``async with McpClient(url) as client: await client.connect(); ...``. Every method raises
    :class:`~mcp_normalizer.errors.CheckError` when the server cannot be reached, takes longer than
    ``timeout``, or does not answer with JSON-RPC.
    """

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        client_name: str = "mcp-normalizer-check",
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        client_version: str | None = None,
    ) -> None:
        self.url = url
        self.max_message_bytes = max_message_bytes
        #: When the run must end (:func:`anyio.current_time` clock; the caller sets it): ending the
        #: session (``DELETE``) takes no longer than what is left of it, or a second.
        self.ends_at = math.inf
        self.client_info: JSONObject = {**_CLIENT_INFO, "name": client_name}
        if client_version is not None:
            self.client_info["version"] = client_version
        self.label = redact_url(url)
        self.headers = dict(headers or {})
        self.timeout = timeout
        self.era: str | None = None
        self.session: str | None = None
        self.supported: list[str] = []  # what server/discover listed
        self._ids = itertools.count(1)
        self._http = httpx.AsyncClient(timeout=timeout, follow_redirects=False)

    async def __aenter__(self) -> McpClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.session is not None:
            left = self.ends_at - anyio.current_time()  # the run's deadline, a second's grace to end the session
            with anyio.move_on_after(min(self.timeout, max(left, 1.0))):
                try:
                    await self._http.delete(self.url, headers=self._headers("DELETE"))
                except httpx.HTTPError:
                    pass  # ending the session is a courtesy
        await self._http.aclose()

    async def connect(self, offer: str = "auto") -> str:
        """Negotiate the era; returns the protocol version in use.

        Args:
            offer: ``auto`` (2026-07-28 when the server speaks it, else the legacy handshake),
                ``legacy`` (the handshake offering 2025-11-25), or a legacy version to offer.
        """
        if offer == "auto":
            self.era = MODERN_ERA
            _, discovered, _ = await self._post("server/discover", {})
            result = discovered.get("result") if discovered is not None else None
            supported = result.get("supportedVersions") if isinstance(result, dict) else None
            if isinstance(supported, list) and MODERN_ERA in supported:
                self.supported = [v for v in supported if isinstance(v, str)]
                return MODERN_ERA
            self.era = None  # not a 2026-07-28 server (HTTP 400/404/405, or a legacy JSON-RPC error)
        version = LEGACY_ERA if offer in ("auto", "legacy") else offer
        params: JSONObject = {"protocolVersion": version, "capabilities": {}, "clientInfo": self.client_info}
        answer = await self.request("initialize", params)
        result = answer.get("result")
        if not isinstance(result, dict):
            raise CheckError(f"initialize failed: {_error_text(answer)}")
        chosen = result.get("protocolVersion")
        if chosen is not None and not (isinstance(chosen, str) and _VISIBLE_ASCII.fullmatch(chosen)):
            raise CheckError("the server chose a protocolVersion that cannot be sent back in a header")
        self.era = chosen if isinstance(chosen, str) else LEGACY_ERA
        await self._post("notifications/initialized", None)
        return self.era

    async def list_tools(
        self,
        page: Callable[[JSONObject], None],
        *,
        listing_bytes: int = MAX_LISTING_BYTES,
        max_pages: int = MAX_PAGES,
    ) -> Cut | None:
        """Read every ``tools/list`` result page, in order, handing each to ``page`` as it comes
        (none is kept here); return what stopped the paging early, if anything: a ``nextCursor``
        seen before (the server would be asked the same page forever), a page above
        ``max_message_bytes``, the pages together above ``listing_bytes``, more than ``max_pages``.

        Raises:
            CheckError: as :meth:`request`; a page that is not a result.
        """
        params: JSONObject = {}
        seen: set[str] = set()
        total = 0
        for number in itertools.count(1):
            if number > max_pages:
                return Cut("pages", f"more than {max_pages} pages: paging stopped there")
            try:
                status, answer, size = await self._post("tools/list", params)
            except TooLarge as exc:
                return Cut(
                    "message",
                    f"page {number} of tools/list is larger than --max-message-bytes ({exc.limit} bytes): cut after"
                    f" {exc.read} bytes read; it and any later page were not audited",
                )
            if answer is None:
                raise CheckError(f"tools/list: HTTP {status} without a JSON-RPC response")
            result = answer.get("result")
            if not isinstance(result, dict):
                raise CheckError(f"tools/list failed: {_error_text(answer)}")
            total += size
            if total > listing_bytes:
                return Cut(
                    "listing",
                    f"the tools/list pages together are larger than --max-listing-bytes ({listing_bytes} bytes):"
                    f" page {number} ({size} bytes) and any later page were not audited",
                )
            page(result)
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                return None
            if cursor in seen:
                return Cut("cursor", f"page {number} repeats an earlier nextCursor: paging stopped there")
            seen.add(cursor)
            params = {"cursor": cursor}
        raise AssertionError("unreachable")  # pragma: no cover

    async def call_tool(self, name: str, arguments: JSONObject) -> JSONObject:
        """The JSON-RPC response to ``tools/call`` (``result`` or ``error``)."""
        return await self.request("tools/call", {"name": name, "arguments": arguments})

    async def request(self, method: str, params: JSONObject) -> JSONObject:
        """Send a request; return the JSON-RPC response message (with ``result`` or ``error``).

        Raises:
            TooLarge: the answer is above ``max_message_bytes``.
            CheckError: as the class says.
        """
        status, answer, _ = await self._post(method, params)
        if answer is None:
            raise CheckError(f"{method}: HTTP {status} without a JSON-RPC response")
        return answer

    def _headers(self, method: str) -> dict[str, str]:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        if self.era is not None:
            headers["mcp-protocol-version"] = self.era
        if era_of(self.era).stateless:
            headers["mcp-method"] = method
        if self.session is not None:
            headers["mcp-session-id"] = self.session
        return {**headers, **self.headers}

    async def _post(self, method: str, params: JSONObject | None) -> tuple[int, JSONObject | None, int]:
        """POST one request (``params`` ``None``: a notification); the HTTP status, the response and
        its size in bytes (its JSON body, or its SSE event).

        Raises:
            TooLarge: the answer is above ``max_message_bytes``.
            CheckError: as the class says.
        """
        message: JSONObject = {"jsonrpc": "2.0", "method": method}
        request_id: JSON = None
        if params is not None:
            request_id = next(self._ids)
            message["id"] = request_id
            params = dict(params)
            if self.era is not None and era_of(self.era).stateless:
                meta = params.get("_meta")
                params["_meta"] = {
                    **(meta if isinstance(meta, dict) else {}),
                    PROTOCOL_VERSION_META: self.era,
                    CLIENT_INFO_META: self.client_info,
                }
            message["params"] = params
        headers = self._headers(method)
        if era_of(self.era).stateless and method == "tools/call" and params is not None:
            headers["mcp-name"] = header_value(str(params["name"]))
        try:
            body = dumps(message)
        except DecodeError:
            raise CheckError(f"{method}: the request cannot be written as JSON (a lone surrogate?)") from None
        try:
            with anyio.fail_after(self.timeout):
                async with self._http.stream("POST", self.url, content=body, headers=headers) as response:
                    if method == "initialize" and "mcp-session-id" in response.headers:
                        session = response.headers["mcp-session-id"]
                        if not _VISIBLE_ASCII.fullmatch(session):
                            raise CheckError("the server's Mcp-Session-Id is not visible ASCII (0x21-0x7E)")
                        self.session = session
                    if request_id is None:
                        read = 0
                        async for chunk in response.aiter_bytes():  # read (to reuse the connection), not kept
                            read += len(chunk)
                            if read > self.max_message_bytes:
                                break
                        return response.status_code, None, 0
                    answer, size = await _answer(response, method, request_id, self.max_message_bytes)
                    return response.status_code, answer, size
        except TimeoutError:
            raise CheckError(f"{method}: no complete answer from {self.label} within {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise CheckError(f"cannot talk to {self.label}: {str(exc) or type(exc).__name__}") from None


async def _answer(response: httpx.Response, method: str, request_id: JSON, limit: int) -> tuple[JSONObject | None, int]:
    """The response to ``request_id`` in a JSON body or an SSE stream (``None`` if there is none),
    and its size in bytes; read as it streams in, at most ``limit`` bytes of a body or of one event.

    Raises:
        TooLarge: the body, or an SSE event not finished yet, crossed ``limit``.
        CheckError: a JSON body that is not JSON this client can read (invalid, or nested too deep).
    """
    media_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type == "text/event-stream":
        splitter = SSESplitter(max_pending=limit)
        async for chunk in response.aiter_bytes():
            for block in splitter.feed(chunk):
                if len(block) > limit:
                    raise TooLarge(method, len(block), limit)
                data = parse_event(block).data
                try:
                    found = _response_in(loads(data), request_id) if data else None
                except DecodeError:
                    continue  # not a JSON-RPC event
                if found is not None:
                    return found, len(block)
            if splitter.overflowed:
                raise TooLarge(method, len(splitter.flush()), limit)
        return None, 0
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            raise TooLarge(method, len(body), limit)
    if not body.strip():
        return None, 0
    try:
        decoded = loads(body)
    except DecodeError as exc:
        raise CheckError(f"{method}: HTTP {response.status_code}, a body that is not readable JSON: {exc}") from None
    return _response_in(decoded, request_id), len(body)


def _response_in(decoded: JSON, request_id: JSON) -> JSONObject | None:
    """The response (``result`` or ``error``) to ``request_id`` in a decoded message or batch."""
    for message in decoded if isinstance(decoded, list) else [decoded]:
        if (
            isinstance(message, dict)
            and ("result" in message or "error" in message)
            and message.get("id") == request_id
        ):
            return message
    return None


def _error_text(answer: JSONObject) -> str:
    error = answer.get("error")
    if isinstance(error, dict):
        return f"{error.get('code')} {error.get('message')!r}"
    return "no result"
