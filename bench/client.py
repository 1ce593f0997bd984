"""A small, fast HTTP/1.1 client over asyncio streams, and an MCP session on top of it.

One :class:`Connection` is one keep-alive TCP connection that carries one request at a time. It
reads ``content-length`` and ``chunked`` bodies, and hands chunked bodies out as they arrive (SSE).
:class:`Session` is a legacy (2025-11-25) MCP session on its own connection: ``initialize``,
``notifications/initialized``, ``tools/list``, then ``tools/call`` with the session's headers.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson

PROTOCOL_VERSION = "2025-11-25"
_READ_LIMIT = 1 << 20


class ProtocolError(Exception):
    """The server's response is not HTTP/1.1 as this client understands it."""


@dataclass(slots=True)
class Response:
    """A response head, and its body once read.

    Attributes:
        status: the HTTP status code.
        headers: header values by lower-case name (the last one wins).
        body: the whole body (empty until read; streamed bodies are not kept).
    """

    status: int
    headers: dict[bytes, bytes]
    body: bytes = b""

    @property
    def content_type(self) -> str:
        """The media type, lower case, without parameters."""
        return self.headers.get(b"content-type", b"").split(b";")[0].strip().lower().decode("latin-1")


class Connection:
    """One keep-alive HTTP/1.1 connection to ``host:port``."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        """Open the TCP connection (closing a previous one)."""
        await self.close()
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port, limit=_READ_LIMIT)

    async def close(self) -> None:
        """Close the connection if open."""
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass

    async def start(self, head: bytes, body: bytes) -> Response:
        """Send one request (``head`` ends with the blank line) and read the response head."""
        if self._writer is None or self._reader is None:
            raise ProtocolError("not connected")
        self._writer.write(head + body)
        try:
            raw = await self._reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            raise ProtocolError("connection closed before the response head") from exc
        lines = raw[:-4].split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise ProtocolError(f"bad status line {lines[0]!r}")
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        return Response(int(parts[1]), headers)

    async def chunks(self, response: Response) -> AsyncIterator[bytes]:
        """The body of ``response`` as it arrives (``chunked``: one piece per chunk)."""
        reader = self._reader
        if reader is None:
            raise ProtocolError("not connected")
        try:
            if response.headers.get(b"transfer-encoding", b"").lower() == b"chunked":
                while True:
                    line = await reader.readuntil(b"\r\n")
                    size = int(line.split(b";")[0], 16)
                    if size == 0:
                        while await reader.readuntil(b"\r\n") != b"\r\n":
                            pass  # trailers
                        return
                    data = await reader.readexactly(size + 2)
                    yield data[:-2]
            elif b"content-length" in response.headers:
                length = int(response.headers[b"content-length"])
                if length:
                    yield await reader.readexactly(length)
            elif response.status not in (204, 304) and response.status >= 200:
                yield await reader.read()  # delimited by close
                await self.close()
        except asyncio.IncompleteReadError as exc:
            raise ProtocolError("connection closed in the middle of the body") from exc
        except ValueError as exc:
            raise ProtocolError(f"bad chunk: {exc}") from exc

    async def read_body(self, response: Response) -> Response:
        """Read the whole body into ``response.body``; returns ``response``."""
        response.body = b"".join([chunk async for chunk in self.chunks(response)])
        return response


def request_head(host: str, port: int, path: str, headers: dict[str, str], length: int, method: str = "POST") -> bytes:
    """An HTTP/1.1 request head with ``content-length`` (``headers`` are sent as given)."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def sse_messages(buffer: bytearray) -> list[bytes]:
    """Remove the complete SSE events from ``buffer``; return the ``data`` of each (lines joined)."""
    out: list[bytes] = []
    while True:
        end, sep = _event_end(buffer)
        if end < 0:
            return out
        block = bytes(buffer[:end])
        del buffer[: end + sep]
        data = [
            line[5:].removeprefix(b" ")
            for line in block.replace(b"\r\n", b"\n").split(b"\n")
            if line.startswith(b"data:")
        ]
        if data:
            out.append(b"\n".join(data))


def _event_end(buffer: bytearray) -> tuple[int, int]:
    crlf = buffer.find(b"\r\n\r\n")
    lf = buffer.find(b"\n\n")
    if crlf >= 0 and (lf < 0 or crlf <= lf):
        return crlf, 4
    return lf, 2


@dataclass
class Session:
    """A legacy MCP session over its own connection.

    Attributes:
        host, port, path: the MCP endpoint.
        session_id: the ``Mcp-Session-Id`` the server gave (after :meth:`open`).
        tools: the names ``tools/list`` returned.
    """

    host: str
    port: int
    path: str = "/mcp"
    session_id: str = ""
    tools: list[str] = field(default_factory=list)
    connection: Connection = field(init=False)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.connection = Connection(self.host, self.port)
        self._headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

    async def open(self) -> None:
        """Connect, ``initialize``, send ``notifications/initialized`` and list the tools."""
        await self.connection.connect()
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        }
        response = await self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        if response.status != 200 or b"mcp-session-id" not in response.headers:
            raise ProtocolError(f"initialize answered HTTP {response.status} without a session")
        self.session_id = response.headers[b"mcp-session-id"].decode("latin-1")
        self._headers["MCP-Protocol-Version"] = PROTOCOL_VERSION
        self._headers["Mcp-Session-Id"] = self.session_id
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = await self.post({"jsonrpc": "2.0", "id": next(self._ids), "method": "tools/list", "params": {}})
        self.tools = [tool["name"] for tool in last_message(listed)["result"]["tools"]]

    async def reconnect(self) -> None:
        """A fresh connection for the same session (after a broken one)."""
        await self.connection.connect()

    async def close(self) -> None:
        """End the session (``DELETE``, best effort) and close the connection."""
        try:
            head = request_head(self.host, self.port, self.path, self._headers, 0, method="DELETE")
            response = await self.connection.start(head, b"")
            await self.connection.read_body(response)
        except (OSError, ProtocolError):
            pass
        await self.connection.close()

    def set_header(self, name: str, value: str) -> None:
        """Send ``name: value`` with every later request of the session."""
        self._headers[name] = value

    def next_id(self) -> int:
        """A request id not used before in this session."""
        return next(self._ids)

    async def start(self, message: dict[str, Any]) -> Response:
        """Send one JSON-RPC message; return the response head (read the body from ``connection``)."""
        body = orjson.dumps(message)
        return await self.connection.start(
            request_head(self.host, self.port, self.path, self._headers, len(body)), body
        )

    async def post(self, message: dict[str, Any]) -> Response:
        """Send one JSON-RPC message and read the whole response."""
        return await self.connection.read_body(await self.start(message))


def call_message(
    request_id: int, tool: str, arguments: dict[str, Any], progress_token: str | None = None
) -> dict[str, Any]:
    """A ``tools/call`` request (with ``_meta.progressToken`` when given)."""
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if progress_token is not None:
        params["_meta"] = {"progressToken": progress_token}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def last_message(response: Response) -> Any:
    """The JSON-RPC message of a JSON response, or the last SSE event's."""
    if response.content_type == "text/event-stream":
        return orjson.loads(sse_messages(bytearray(response.body))[-1])
    return orjson.loads(response.body)
