"""A minimal MCP client over Streamable HTTP for ``check``: raw JSON-RPC responses, nothing validated.

A strict client would throw away exactly what ``check`` must see, so this one only speaks the
transport. It negotiates the newest era the server speaks, as a dual-era client does (MCP
2026-07-28 ``basic/versioning.mdx``): a modern ``server/discover`` first (per-request ``_meta``
and ``MCP-Protocol-Version``/``Mcp-Method`` headers, SEP-2243); when the server does not answer it
as a 2026-07-28 server, the legacy ``initialize`` handshake (2025-11-25 offered, the server's choice
kept, its ``Mcp-Session-Id`` sent on every later request). Responses may come as JSON or as an SSE
stream; notifications and server requests on the stream are skipped.
"""

from __future__ import annotations

import base64
import itertools
import re
from collections.abc import Mapping
from types import TracebackType

import anyio
import httpx

from ..config import redact_url
from ..errors import CheckError, DecodeError
from ..types import JSON, JSONObject
from ..wire.jsoncodec import dumps, loads
from ..wire.jsonrpc import CLIENT_INFO_META, MODERN_ERA, PROTOCOL_VERSION_META, response_to
from ..wire.sse import SSESplitter, parse_event

#: The legacy version offered in ``initialize``.
LEGACY_ERA = "2025-11-25"
_MAX_PAGES = 1000
_CLIENT_INFO = {"name": "mcp-normalizer-check", "version": "1"}
_VISIBLE_ASCII = re.compile(r"[\x21-\x7e]+")


def header_value(text: str) -> str:
    """``text`` as an ``Mcp-Name``/``Mcp-Param-*`` value: as is when it is safe, else the
    ``=?base64?...?=`` form (MCP 2026-07-28 ``basic/transports/streamable-http.mdx``, Custom Headers)."""
    safe = text.isascii() and text.isprintable() and text == text.strip() and not text.startswith("=?base64?")
    return text if safe else "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


class McpClient:
    """One connection to one MCP server.

    Args:
        url: the server's MCP endpoint (``http``/``https``; checked by the caller).
        headers: extra request headers (``Authorization``...), sent on every request; names and
            values must be valid header text (checked by the caller).
        timeout: seconds each request may take in all, from sending it to its complete answer.
        client_name: the ``clientInfo.name`` it gives (``initialize``; on 2026-07-28 every request's
            ``_meta``): a host's, to audit what that host gets (``check --host``).

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
    ) -> None:
        self.url = url
        self.client_info: JSONObject = {**_CLIENT_INFO, "name": client_name}
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
            with anyio.move_on_after(self.timeout):
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
            _, discovered = await self._post("server/discover", {})
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

    async def list_tools(self) -> tuple[list[JSONObject], str | None]:
        """Every ``tools/list`` result page, in order, and what stopped the paging early, if anything
        (a ``nextCursor`` seen before: the server would be asked the same page forever)."""
        pages: list[JSONObject] = []
        params: JSONObject = {}
        seen: set[str] = set()
        for _ in range(_MAX_PAGES):
            answer = await self.request("tools/list", params)
            result = answer.get("result")
            if not isinstance(result, dict):
                raise CheckError(f"tools/list failed: {_error_text(answer)}")
            pages.append(result)
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                return pages, None
            if cursor in seen:
                return pages, f"page {len(pages)} repeats an earlier nextCursor: paging stopped there"
            seen.add(cursor)
            params = {"cursor": cursor}
        return pages, f"more than {_MAX_PAGES} pages: paging stopped there"

    async def call_tool(self, name: str, arguments: JSONObject) -> JSONObject:
        """The JSON-RPC response to ``tools/call`` (``result`` or ``error``)."""
        return await self.request("tools/call", {"name": name, "arguments": arguments})

    async def request(self, method: str, params: JSONObject) -> JSONObject:
        """Send a request; return the JSON-RPC response message (with ``result`` or ``error``)."""
        status, answer = await self._post(method, params)
        if answer is None:
            raise CheckError(f"{method}: HTTP {status} without a JSON-RPC response")
        return answer

    def _headers(self, method: str) -> dict[str, str]:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        if self.era is not None:
            headers["mcp-protocol-version"] = self.era
        if self.era == MODERN_ERA:
            headers["mcp-method"] = method
        if self.session is not None:
            headers["mcp-session-id"] = self.session
        return {**headers, **self.headers}

    async def _post(self, method: str, params: JSONObject | None) -> tuple[int, JSONObject | None]:
        """POST one request (``params`` ``None``: a notification); the HTTP status and the response."""
        message: JSONObject = {"jsonrpc": "2.0", "method": method}
        request_id: JSON = None
        if params is not None:
            request_id = next(self._ids)
            message["id"] = request_id
            params = dict(params)
            if self.era == MODERN_ERA:
                meta = params.get("_meta")
                params["_meta"] = {
                    **(meta if isinstance(meta, dict) else {}),
                    PROTOCOL_VERSION_META: MODERN_ERA,
                    CLIENT_INFO_META: self.client_info,
                }
            message["params"] = params
        headers = self._headers(method)
        if self.era == MODERN_ERA and method == "tools/call" and params is not None:
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
                        await response.aread()
                        return response.status_code, None
                    return response.status_code, await _answer(response, method, request_id)
        except TimeoutError:
            raise CheckError(f"{method}: no complete answer from {self.label} within {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise CheckError(f"cannot talk to {self.label}: {str(exc) or type(exc).__name__}") from None


async def _answer(response: httpx.Response, method: str, request_id: JSON) -> JSONObject | None:
    """The response to ``request_id`` in a JSON body or an SSE stream (``None`` if there is none).

    Raises:
        CheckError: a JSON body that is not JSON this client can read (invalid, or nested too deep).
    """
    media_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type == "text/event-stream":
        splitter = SSESplitter()
        async for chunk in response.aiter_bytes():
            for block in splitter.feed(chunk):
                found = response_to(parse_event(block).data, request_id)
                if found is not None:
                    return found
        return None
    body = await response.aread()
    if body.strip():
        try:
            loads(body)
        except DecodeError as exc:
            raise CheckError(
                f"{method}: HTTP {response.status_code}, a body that is not readable JSON: {exc}"
            ) from None
    return response_to(body, request_id)


def _error_text(answer: JSONObject) -> str:
    error = answer.get("error")
    if isinstance(error, dict):
        return f"{error.get('code')} {error.get('message')!r}"
    return "no result"
