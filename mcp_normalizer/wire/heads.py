"""The size of a request head as it was sent, for the head-size bound (RFC 6585 section 5, 431).

uvicorn's h11 bound (``h11_max_incomplete_event_size``) and the guards of :mod:`mcp_normalizer.hop.server` only
apply while a head is still arriving: a head that comes in one read is parsed whole, whatever its
size. :class:`~mcp_normalizer.hop.front.FrontDoor` measures every head the server accepted with
:func:`head_size` against ``[proxy] max_header_bytes``, in every way the proxy runs.
"""

from __future__ import annotations

from ..types import Scope


def head_size(scope: Scope) -> int:
    """Bytes of the request head as sent: request line, ``name: value\\r\\n`` lines, the blank line."""
    line = len(scope["method"]) + len(scope.get("raw_path") or scope["path"].encode()) + 12
    query = scope.get("query_string") or b""
    return line + (len(query) + 1 if query else 0) + sum(len(k) + len(v) + 4 for k, v in scope["headers"]) + 2
