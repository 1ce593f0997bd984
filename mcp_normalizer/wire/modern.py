"""The 2026-07-28 request envelope: the protocol fields of ``params._meta`` and the ``Mcp-*`` headers.

In 2026-07-28 every request carries what a legacy session established once
(``S2026-07-28/basic/index.mdx``, Per-request protocol fields): ``params._meta`` names the protocol
version and the client's capabilities (required) and its ``clientInfo`` (should), and may name the
log level the client wants ``notifications/message`` at. Over Streamable HTTP the request also
mirrors routing fields into headers (SEP-2243, ``S2026-07-28/basic/transports/streamable-http.mdx``,
Custom Headers), which a server that reads the body **must** check against it (``-32020``):

- ``MCP-Protocol-Version``: the version in ``_meta``;
- ``Mcp-Method``: the method;
- ``Mcp-Name``: ``params.name`` of ``tools/call`` and ``prompts/get``, ``params.uri`` of ``resources/read``;
- ``Mcp-Param-{Name}``: each argument whose property schema carries ``"x-mcp-header": "{Name}"``
  (``S2026-07-28/server/tools.mdx``, x-mcp-header), a string as is, an integer in decimal, a boolean
  as ``true``/``false``, omitted when absent or ``null``.

A value that is not safe in a header (non-ASCII, a control character, leading or trailing space, or
text that starts like the encoding's own marker) is sent as ``=?base64?{base64 of its UTF-8}?=``.
Pure functions of the message; no I/O.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping

from ..types import JSON, JSONObject
from .jsonrpc import CLIENT_INFO_META, PROTOCOL_VERSION_META

__all__ = [
    "CLIENT_CAPABILITIES_META",
    "CLIENT_INFO_META",
    "LOG_LEVEL_META",
    "NAME_PARAMS",
    "PROTOCOL_VERSION_META",
    "SERVER_INFO_META",
    "SUBSCRIPTION_ID_META",
    "header_params",
    "header_value",
    "request_headers",
]

#: ``params._meta`` key of the client's capabilities (required on every 2026-07-28 request).
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
#: ``params._meta`` key of the level the client wants log notifications at (absent: none are sent).
LOG_LEVEL_META = "io.modelcontextprotocol/logLevel"
#: ``params._meta`` key naming the ``subscriptions/listen`` request a notification belongs to.
SUBSCRIPTION_ID_META = "io.modelcontextprotocol/subscriptionId"
#: A result's ``_meta`` key naming the server (``Implementation``).
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
#: The methods whose request names a target in ``Mcp-Name``, and the parameter it mirrors.
NAME_PARAMS: Mapping[str, str] = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_MARKER = "=?base64?"
#: The largest integer ``x-mcp-header`` may carry (``S2026-07-28/server/tools.mdx``: within ±(2^53-1)).
_SAFE_INTEGER = 2**53 - 1


def header_value(text: str) -> str:
    """``text`` as an ``Mcp-Name``/``Mcp-Param-*`` value: as is when it is safe (printable ASCII, no
    leading or trailing space, not starting with the marker), else ``=?base64?...?=``."""
    safe = text.isascii() and text.isprintable() and text == text.strip() and not text.startswith(_MARKER)
    return text if safe else _MARKER + base64.b64encode(text.encode()).decode() + "?="


def header_params(input_schema: JSON) -> dict[str, tuple[str, ...]]:
    """The ``x-mcp-header`` declarations of a tool's ``inputSchema``: header name (as declared) to the
    path of property names that reaches it. Only properties reachable through a chain of
    ``properties`` are read (the specification excludes ``items``, combinators and ``$ref``); a
    name that is not a string is skipped (a client drops such a tool; the server's checks are its own)."""
    found: dict[str, tuple[str, ...]] = {}
    stack: list[tuple[JSON, tuple[str, ...]]] = [(input_schema, ())]
    while stack:
        schema, path = stack.pop()
        if not isinstance(schema, dict):
            continue
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            continue
        for key, sub in properties.items():
            if not isinstance(sub, dict):
                continue
            name = sub.get("x-mcp-header")
            if isinstance(name, str) and name:
                found[name] = (*path, key)
            if len(path) < 32:
                stack.append((sub, (*path, key)))
    return found


def _argument(arguments: JSON, path: tuple[str, ...]) -> JSON:
    value = arguments
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _param_value(value: JSON) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and abs(value) <= _SAFE_INTEGER:
        return str(value)
    if isinstance(value, str):
        return header_value(value)
    return None


def request_headers(
    message: JSONObject, version: str, declared: Mapping[str, tuple[str, ...]] | None = None
) -> list[tuple[bytes, bytes]]:
    """The ``Mcp-*`` headers of one 2026-07-28 request or notification ``message``.

    Args:
        message: the JSON-RPC message (its ``method`` and ``params`` are read).
        version: the protocol version in its ``_meta``.
        declared: for a ``tools/call``, the tool's ``x-mcp-header`` declarations
            (:func:`header_params`); ``None``: none known.

    Returns:
        Raw header pairs, lower-case names: ``mcp-protocol-version``, ``mcp-method``, and where they
        apply ``mcp-name`` and ``mcp-param-*``.
    """
    method = message.get("method")
    out = [(b"mcp-protocol-version", version.encode())]
    if not isinstance(method, str):
        return out
    out.append((b"mcp-method", header_value(method).encode()))
    params = message.get("params")
    if not isinstance(params, dict):
        return out
    named = NAME_PARAMS.get(method)
    if named is not None and isinstance(params.get(named), str):
        out.append((b"mcp-name", header_value(params[named]).encode()))
    if method == "tools/call" and declared:
        arguments = params.get("arguments")
        for name, path in declared.items():
            value = _param_value(_argument(arguments, path))
            if value is not None:
                out.append((b"mcp-param-" + name.lower().encode("ascii", "replace"), value.encode()))
    return out
