"""Request rewriting, sans-IO: the one change the proxy makes to what a client sends.

Rule ``tool_names`` (:mod:`mcp_normalizer.rules.tool_names`) advertises tools whose names clients refuse
under new names; a ``tools/call`` for a new name must reach the upstream under the name the
upstream knows. :func:`rename_calls` rewrites a POST body's ``tools/call`` requests by the scope's
name map (:attr:`mcp_normalizer.scopes.ScopeState.names`), changing only the ``params.name`` member's text:
every other byte of the body is copied as it came. The middleware calls it before the inner app
(or the forwarder) reads the body, in both modes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from .errors import DecodeError
from .jsoncodec import Raw, dumps, join_array, join_object, loads, split_object
from .jsonrpc import TOOLS_CALL, IdKey, PendingRequest, id_key, read_batch
from .rules import Rewrite

#: The log record of a renamed call (no name in it: names are the server's text).
REWRITE = Rewrite(
    "tool_names", "sent the call upstream under the tool's original name", ("/params/name",), "renamed in tools/list"
)


def rename_calls(
    body: bytes, pending: Mapping[IdKey, PendingRequest], names: Mapping[str, str]
) -> tuple[bytes, dict[IdKey, PendingRequest], list[IdKey]] | None:
    """``body`` with each ``tools/call`` for an advertised name sent under its original name.

    Args:
        body: the POST body (one request or a 2025-03-26 batch), already read by
            :func:`mcp_normalizer.jsonrpc.inspect_request` into ``pending``.
        pending: its requests by id key.
        names: the scope's map, advertised name -> the upstream's name.

    Returns:
        The new body, the requests with their ``tool`` set to the upstream's name (what the result
        rules look up), and the id keys of the renamed calls; ``None`` when no call is renamed (or
        the body cannot be rewritten byte for byte: it then goes as it came).
    """
    if not names or not any(r.method == TOOLS_CALL and r.tool in names for r in pending.values()):
        return None
    try:
        items = read_batch(body)
        messages = items if items is not None else [Raw(body)]
        renamed: list[IdKey] = []
        out: list[Raw] = []
        for message in messages:
            new = _renamed(message, pending, names, renamed)
            out.append(Raw(new) if new is not None else message)
        if not renamed:
            return None
        text = join_array(out) if items is not None else bytes(out[0])
    except DecodeError:
        return None
    updated = dict(pending)
    for key in renamed:
        request = updated[key]
        updated[key] = dataclasses.replace(request, tool=names[request.tool or ""])
    return text, updated, renamed


def _renamed(
    message: Raw, pending: Mapping[IdKey, PendingRequest], names: Mapping[str, str], renamed: list[IdKey]
) -> bytes | None:
    if memoryview(message)[:1].tobytes() != b"{":
        return None
    members = split_object(message)
    key_text = members.get("id")
    if key_text is None or "params" not in members:
        return None
    key = id_key(loads(key_text))
    request = pending.get(key) if key is not None else None
    tool = request.tool if request is not None and request.method == TOOLS_CALL else None
    if key is None or tool is None or tool not in names:
        return None
    params = split_object(members["params"])
    params["name"] = Raw(dumps(names[tool]))
    renamed.append(key)
    return join_object({**members, "params": Raw(join_object(params))})
