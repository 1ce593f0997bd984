"""Rule ``host_schemas``: input schemas a host cannot send on, made equivalent ones it can, for it alone.

Fault kind ``host_content`` (a host refuses what the spec allows; :mod:`~.host_profiles`). The
repair runs only for a client whose ``clientInfo`` names such a host.

- ``type`` beside ``anyOf`` for Gemini CLI (the Gemini API: "type and anyOf cannot be both
  populated", google-gemini/gemini-cli#4121): the node's ``type`` goes into each ``anyOf`` arm that
  has none, which accepts exactly the same values (``type`` and ``anyOf`` both had to hold; now each
  arm carries both). An arm with a ``type`` of its own keeps it. Nodes are rewritten children first,
  anywhere in the ``inputSchema``.

What the repair replaced is kept in the tool's ``_meta["dev.mcp-normalizer/original-keywords"]``
(pointer into the tool -> the node as listed).
"""

from __future__ import annotations

from ..pointer import Path, format_pointer
from ..types import JSON, JSONObject
from .base import ORIGINAL_KEYWORDS_KEY, Rewrite, Rule, ToolContext, with_original_values
from .host_profiles import TYPE_BESIDE_ANYOF
from .schemas import map_schema


def _spread_type(node: JSONObject, path: Path, kept: dict[str, JSON]) -> JSON:
    arms = node.get("anyOf")
    if "type" not in node or not isinstance(arms, list) or not arms:
        return node
    kind = node["type"]
    new_arms: list[JSON] = []
    for arm in arms:
        if isinstance(arm, dict) and "type" not in arm:
            new_arms.append({"type": kind, **arm})
        elif arm is True:
            new_arms.append({"type": kind})
        else:
            new_arms.append(arm)
    kept[format_pointer(("inputSchema", *path))] = node
    return {**{k: v for k, v in node.items() if k != "type"}, "anyOf": new_arms}


def _repair(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    host = ctx.client.host
    schema = tool.get("inputSchema")
    if host is None or not ctx.client.host_needs(TYPE_BESIDE_ANYOF) or not isinstance(schema, dict):
        return None
    kept: dict[str, JSON] = {}
    new, touched = map_schema(schema, lambda node, path: _spread_type(node, path, kept))
    if new is schema:
        return None
    out = with_original_values({**tool, "inputSchema": new}, kept, ORIGINAL_KEYWORDS_KEY)
    reason = f"type moved into the anyOf arms, for {host.title} ({host.faults[TYPE_BESIDE_ANYOF]})"
    return out, Rewrite(
        "host_schemas", "made an equivalent schema the host takes", tuple(f"/inputSchema{p}" for p in touched), reason
    )


RULE = Rule(
    "host_schemas",
    "host_content",
    "for a host that refuses a schema the spec allows (type beside anyOf for Gemini CLI), an equivalent schema"
    " (the type moved into each anyOf arm), the original kept in the tool's _meta",
    on_tool=_repair,
)
