"""Exceptions raised by mcp-normalizer.

The tree::

    NormalizerError
    ├── ConfigError            invalid settings, config file or rule; the CLI exits 2
    ├── DecodeError            bytes that are not the JSON they should be; the message passes through
    ├── ClientDisconnect       the client left before its request body was complete; nothing is forwarded
    ├── CheckError             ``mcp-normalizer check`` cannot talk to the server or read its input; exit 2
    ├── ResponseRefused        (also an ``OSError``) the rest of a response was refused: raised from ``send``
    └── UpstreamError          the upstream could not be used for a request
        ├── UpstreamUnavailable  connect or transport failure (HTTP 502)
        └── UpstreamTimeout      connect, first-byte or idle timeout (HTTP 504)

Rules never raise on purpose: a rule that raises is a bug, and the transformer then forwards the
original message unchanged and logs the fault (fail open, DESIGN section 3).
"""

from __future__ import annotations


class NormalizerError(Exception):
    """Base class of every error mcp-normalizer raises."""


class ConfigError(NormalizerError):
    """Settings, the config file or a rule declaration is invalid; the message names the problem."""


class DecodeError(NormalizerError):
    """A body or SSE event that should hold JSON does not; it is forwarded untouched."""


class ClientDisconnect(NormalizerError):
    """The client disconnected before sending its whole request body; the request is dropped."""


class CheckError(NormalizerError):
    """``check`` could not connect, got no JSON-RPC answer, or could not read its input."""


class ResponseRefused(NormalizerError, OSError):
    """The proxy refused the rest of a response (the upstream answered a POST with a reply to
    another request) and answered the client itself; raised from the ``send`` the inner app was
    given, as an ASGI server raises an ``OSError`` from ``send`` on a closed connection, so the app
    stops and the forwarder closes the upstream connection."""


class UpstreamError(NormalizerError):
    """The upstream MCP server could not answer a request."""

    status_code = 502


class UpstreamUnavailable(UpstreamError):
    """Connecting to or talking with the upstream failed (answered with HTTP 502)."""

    status_code = 502


class UpstreamTimeout(UpstreamError):
    """The upstream did not connect, answer or keep streaming in time (answered with HTTP 504)."""

    status_code = 504
