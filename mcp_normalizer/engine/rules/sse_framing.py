"""Rule ``sse_framing``: an SSE event that holds a whole JSON-RPC message but no blank line yet.

Fault kind ``sse_framing`` (``cases/faults.md``, "Kinds from the 2026 reports"): servers that
write the last event of a stream without its terminating blank line while keeping the stream open,
or write events with no blank line between them. An SSE parser dispatches an event only at its
blank line (WHATWG HTML section 9.2.6), so the client never sees the message: the Vercel AI SDK's
``createMCPClient`` hangs on ``initialize``. With this rule ``on`` the transformer sends such an
event as soon as a line end completes a data that is one whole JSON value naming ``jsonrpc``,
framed ``event: message`` (when it names no type), its lines as they came, and the blank line; a
blank line that then follows is the one it lacked and is dropped. Bytes that are not a JSON-RPC
message still pass as they came, and a well-framed stream is never touched (its blank line comes
in the same read as its data, or the event is complete only with it).

The repair is in the stream, not in a message: the rule has no hook; the transformer and
:class:`~mcp_normalizer.wire.sse.SSESplitter` do the work.
"""

from __future__ import annotations

from .base import Rewrite, Rule

REWRITE = Rewrite(
    "sse_framing",
    "sent an event before its blank line",
    (),
    "the event's data is a whole JSON-RPC message and the blank line that dispatches it has not come",
)

RULE = Rule(
    name="sse_framing",
    kind="sse_framing",
    summary="An SSE event holding a whole JSON-RPC message goes out at once, framed event: message, "
    "without waiting for a blank line that may never come.",
)
