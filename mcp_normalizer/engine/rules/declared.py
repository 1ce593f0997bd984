"""Repairs an operator declares per tool, for what no rule can repair on its own.

- ``drop_output_schema``: ``[tools."X"] drop_output_schema = true`` advertises tool X without its
  ``outputSchema`` (kept in the tool's ``_meta["dev.mcp-normalizer/original-output-schema"]``): for a
  tool that never returns the ``structuredContent`` it declares (``missing_structured_content``:
  Claude Code's ``Bash`` served by ``claude mcp serve``), so its results need no validation.
- ``relax``: ``[tools."X"] relax = ["/raw/object"]`` advertises those places as unconstrained
  (keeping their ``title``/``description``): for values the server outgrew (``enum_mismatch``: a
  ``const`` the upstream API changed). Results then conform as they are.
"""

from __future__ import annotations

from ...types import JSON, JSONObject
from .base import META_PREFIX, Rewrite, Rule, ToolContext, meta_of
from .schemas import widen_at

ORIGINAL_OUTPUT_SCHEMA_KEY = META_PREFIX + "original-output-schema"
_KEEP = ("title", "description")


def _drop(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    if not ctx.drop_output_schema or "outputSchema" not in tool:
        return None
    kept = {**meta_of(tool), ORIGINAL_OUTPUT_SCHEMA_KEY: tool["outputSchema"]}
    out = {k: v for k, v in tool.items() if k != "outputSchema"}
    out["_meta"] = kept
    return out, Rewrite(
        "drop_output_schema", "advertised the tool without its outputSchema", ("/outputSchema",), ctx.declared_by
    )


def unconstrained(node: JSON) -> JSON:
    """The schema ``relax`` puts at a place: nothing but its ``title`` and ``description``."""
    if not isinstance(node, dict):
        return {}
    return {k: v for k, v in node.items() if k in _KEEP}


def _relax(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    schema = tool.get("outputSchema")
    if not ctx.relax or not isinstance(schema, dict):
        return None
    new, pointers = schema, []
    for pattern in sorted(ctx.relax, key=lambda p: len(p.segments), reverse=True):
        new, count = widen_at(new, pattern.segments, unconstrained)
        if count:
            pointers.append(pattern.text)
    if new is schema:
        return None
    kept = {**meta_of(tool), ORIGINAL_OUTPUT_SCHEMA_KEY: schema}  # what the places said: kept
    return {**tool, "outputSchema": new, "_meta": kept}, Rewrite(
        "relax", "advertised declared places as unconstrained", tuple(pointers), ctx.declared_by
    )


DROP_OUTPUT_SCHEMA = Rule(
    "drop_output_schema",
    "missing_structured_content",
    "Declared per tool: advertise it without its outputSchema (kept in the tool's _meta).",
    on_tool=_drop,
)
RELAX = Rule(
    "relax",
    "enum_mismatch",
    "Declared per tool: advertise the given places as unconstrained (title/description kept).",
    on_tool=_relax,
)
