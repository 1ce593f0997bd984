"""A real 2026-07-28-only server: the Python ``mcp`` 2.3.0 SDK's own ``MCPServer`` behind a filter
that refuses every legacy request, as a server that dropped the handshake era does.

The SDK's ``streamable_http_app`` serves both eras on one endpoint: a request whose
``MCP-Protocol-Version`` header names a modern revision goes to its modern entry
(``mcp/server/_streamable_http_modern.py``: one POST, one answer, no session), anything else to its
legacy transport. :class:`ModernOnly` keeps only the first: a POST with no or a legacy
``MCP-Protocol-Version`` gets 400 and ``UnsupportedProtocolVersionError`` (``-32022``, ``data:
{supported, requested}``; ``S2026-07-28/basic/transports/streamable-http.mdx``), a ``GET`` or a
``DELETE`` gets 405. :func:`modern_server` builds the tools (field data, progress, an MRTR
elicitation through the SDK's ``Resolve``/``Elicit`` markers, a slow tool) and the record of what
the server saw.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Any

import anyio
import pydantic
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve

from mcp_normalizer.demo.upstream import unsupported_version
from mcp_normalizer.types import ASGIApp, Receive, Scope, Send

from .support import replay_body

#: The one version the server speaks.
MODERN = "2026-07-28"
#: The legacy versions a handshake client may send (refused).
LEGACY = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
#: What the ``measure`` tool returns: decimals, a big integer, unicode, nulls at depth.
MEASURE = {
    "price": 12.5,
    "tolerance": 1e-7,
    "serial": 123456789012345678901234567890,
    "site": "Z\u00fcrich \u2713 \U0001f680",
    "readings": [{"at": None, "value": -0.0}, {"at": "2026-07-28T09:00:00Z", "value": 2.5e-3}],
    "owner": None,
}


@dataclass
class Seen:
    """What the server saw.

    Attributes:
        requests: each POST that reached the SDK: ``(method, MCP-Protocol-Version header, params._meta)``.
        refused: each request refused as legacy: ``(HTTP method, JSON-RPC method or None, header)``.
        events: what the tools saw, in order (``("slow", "started")``, ``("slow", "cancelled")``,
            ``("book", "accept", city)``, ...).
        param_headers: the ``Mcp-Param-*`` headers of each ``tools/call`` that reached the SDK.
    """

    requests: list[tuple[str, str | None, dict[str, Any]]] = field(default_factory=list)
    refused: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    events: list[tuple[Any, ...]] = field(default_factory=list)
    param_headers: list[dict[str, str]] = field(default_factory=list)

    def methods(self) -> list[str]:
        """The JSON-RPC methods that reached the SDK, in order."""
        return [method for method, _, _ in self.requests]


class Booking(pydantic.BaseModel):
    """What the ``book`` tool asks the user for."""

    seats: int
    note: str = ""


def ask_booking(city: str) -> Elicit[Booking]:
    """The ``book`` tool's resolver: ask the user how many seats (an ``elicitation/create`` form)."""
    return Elicit(f"How many seats in {city}?", Booking)


def modern_server(seen: Seen) -> MCPServer:
    """The tools: ``measure`` (field data), ``count`` (progress), ``book`` (elicitation through
    ``Resolve``; at 2026-07-28 the SDK answers ``input_required`` and resumes on the retry),
    ``forecast`` (an ``x-mcp-header`` argument), ``retool`` (notifies that the tool list changed),
    ``slow`` (waits until cancelled; records it)."""
    server = MCPServer("modern-only-sdk", version="2.3.0", instructions="Speaks only 2026-07-28.")

    @server.tool()
    def measure(label: str) -> dict[str, Any]:
        """Field data: decimals, a big integer, unicode and nulls."""
        return {**MEASURE, "label": label}

    @server.tool()
    async def count(steps: int, ctx: Context) -> str:
        """Count to ``steps``, reporting progress after each (and logging at ``info``)."""
        await ctx.info(f"counting to {steps}")
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
        return f"counted {steps}"

    @server.tool()
    async def book(city: str, booking: Annotated[ElicitationResult[Booking], Resolve(ask_booking)]) -> dict[str, Any]:
        """Book seats in ``city``: asks the user how many (declining books none)."""
        if isinstance(booking, AcceptedElicitation):
            seen.events.append(("book", "accept", city, booking.data.seats))
            return {"city": city, "seats": booking.data.seats, "note": booking.data.note, "status": "booked"}
        seen.events.append(("book", booking.action, city))
        return {"city": city, "seats": 0, "note": None, "status": booking.action}

    @server.tool()
    def forecast(region: Annotated[str, pydantic.Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        """The weather in ``region``; the region is mirrored in an ``Mcp-Param-Region`` header
        (``x-mcp-header``, SEP-2243), which the SDK checks against the body."""
        return f"12.5 \u00b0C in {region}"

    @server.tool()
    async def retool(ctx: Context) -> str:
        """Say the tool list changed (the SDK's own ``subscriptions/listen`` streams carry it)."""
        await ctx.notify_tools_changed()
        return "the tool list changed"

    @server.tool()
    async def slow(ctx: Context) -> str:
        """Report progress once, then wait until the request is cancelled."""
        seen.events.append(("slow", "started"))
        try:
            await ctx.report_progress(1, 2, "started")
            await anyio.sleep(120)
        except anyio.get_cancelled_exc_class():
            seen.events.append(("slow", "cancelled"))
            raise
        seen.events.append(("slow", "finished"))
        return "finished"

    return server


class ModernOnly:
    """ASGI app: ``inner`` (an SDK app serving both eras) with its legacy era refused (see the module
    docstring); every request it lets through is recorded in ``seen``."""

    def __init__(self, inner: ASGIApp, seen: Seen) -> None:
        self.inner = inner
        self.seen = seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        version = headers.get("mcp-protocol-version")
        if scope["method"] != "POST":
            self.seen.refused.append((scope["method"], None, version))
            await _respond(send, 405, b"", [(b"allow", b"POST")])
            return
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += bytes(message.get("body", b""))
            if not message.get("more_body"):
                break
        try:
            decoded = json.loads(body)
        except ValueError:
            decoded = None
        method = decoded.get("method") if isinstance(decoded, dict) else None
        if version is None or version in LEGACY:
            self.seen.refused.append(("POST", method, version))
            request_id = decoded.get("id") if isinstance(decoded, dict) else None
            body400 = unsupported_version(request_id, version)
            await _respond(send, 400, body400, [(b"content-type", b"application/json")])
            return
        params = decoded.get("params") if isinstance(decoded, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        self.seen.requests.append((str(method), version, dict(meta) if isinstance(meta, dict) else {}))
        if method == "tools/call":
            self.seen.param_headers.append({k: v for k, v in headers.items() if k.startswith("mcp-param-")})
        await self.inner(scope, replay_body(body, receive), send)


async def _respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def modern_app(seen: Seen) -> ASGIApp:
    """The whole upstream: the SDK's Streamable HTTP app (SSE answers, so progress streams) behind
    :class:`ModernOnly`; its endpoint is ``/mcp``."""
    inner: ASGIApp = modern_server(seen).streamable_http_app()
    return ModernOnly(inner, seen)
