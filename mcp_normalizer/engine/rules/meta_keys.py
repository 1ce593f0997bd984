"""Rule ``meta_keys``: every ``_meta`` is an object whose keys follow the key grammar.

Fault kind ``meta_key_invalid`` (DESIGN section 3, rule 5). ``_meta`` keys are an optional reverse-DNS
prefix and a name that starts and ends alphanumeric (MCP 2025-06-18+ ``basic/index.mdx`` "_meta");
clients that check (tower-mcp) reject the whole ``tools/list`` for FastMCP's ``_fastmcp``. Entries
with invalid keys move, unchanged, into one object under ``dev.mcp-normalizer/invalid-meta`` (keys
inside it are free); a ``_meta`` that is not an object is kept there whole. Never dropped, never
coerced. Applies to tools, to results and to their content blocks.
"""

from __future__ import annotations

from ...types import JSON, JSONObject
from ...wire.pointer import format_pointer
from .base import INVALID_META_KEY, ResultContext, Rewrite, Rule, ToolContext, is_meta_key, meta_of, set_aside

__all__ = ["INVALID_META_KEY", "RULE"]


def _fixed(meta: JSON) -> JSON:
    """``meta`` made grammatical, or ``meta`` itself when it already is."""
    if not isinstance(meta, dict):
        return meta_of({"_meta": meta})
    bad = {key: value for key, value in meta.items() if not is_meta_key(key)}
    if not bad:
        return meta
    good = {key: value for key, value in meta.items() if key not in bad}
    set_aside(good, INVALID_META_KEY)
    previous = good.get(INVALID_META_KEY)
    good[INVALID_META_KEY] = {**(previous if isinstance(previous, dict) else {}), **bad}
    return good


def _fix_object(holder: JSONObject, path: tuple[str | int, ...], touched: list[str]) -> JSONObject:
    if "_meta" not in holder or holder["_meta"] is None:
        return holder  # absent; null is null_members' business
    fixed = _fixed(holder["_meta"])
    if fixed is holder["_meta"]:
        return holder
    touched.append(format_pointer((*path, "_meta")))
    return {**holder, "_meta": fixed}


def _on_tool(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    touched: list[str] = []
    out = _fix_object(tool, (), touched)
    if out is tool:
        return None
    return out, Rewrite("meta_keys", "moved invalid _meta entries", tuple(touched), "key breaks the _meta grammar")


def _on_result(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    touched: list[str] = []
    out = _fix_object(result, (), touched)
    content = out.get("content")
    if isinstance(content, list):
        blocks = [_fix_object(b, ("content", i), touched) if isinstance(b, dict) else b for i, b in enumerate(content)]
        if any(a is not b for a, b in zip(blocks, content, strict=True)):
            out = {**out, "content": blocks}
    if not touched:
        return None
    return out, Rewrite("meta_keys", "moved invalid _meta entries", tuple(touched), "key breaks the _meta grammar")


RULE = Rule(
    "meta_keys",
    "meta_key_invalid",
    "Move _meta entries whose keys break the grammar (and non-object _meta) under dev.mcp-normalizer/invalid-meta.",
    on_tool=_on_tool,
    on_result=_on_result,
)
