"""Rule ``degrade``: degrade, don't fail (off unless the operator opts in; a lossy change, logged as one).

Users of several SDKs and hosts ask for it (jlowin/fastmcp#2654: drop ``outputSchema`` for Claude
Desktop; modelcontextprotocol/python-sdk#2626): a result whose ``structuredContent`` no lossless rule
can make conform is refused by every strict client, and the model then reads nothing. Opted into
per client (``[normalizer] degrade_clients``: ``clientInfo`` names or host profiles), per tool
(``[tools."X"] degrade``) or globally (``[normalizer] degrade``), for that tool and client:

- ``tools/list``: the tool is advertised without its ``outputSchema`` (kept whole in the tool's
  ``_meta["dev.mcp-normalizer/original-output-schema"]``), so the client validates nothing;
- ``tools/call``: every result reaches the client without ``structuredContent`` (kept whole in the
  result's ``_meta["dev.mcp-normalizer/original-structured-content"]``); when no text block of
  ``content`` already carries the same JSON value, a text block with its JSON is added, so its
  information still reaches a model that reads ``content`` only.

A success stays a success (``isError`` untouched). Each change is logged ``lossy: true``: the client
no longer gets the value where the spec puts it. Without an opt-in the rule does nothing.
"""

from __future__ import annotations

from ...errors import DecodeError
from ...types import JSON, JSONObject
from ...wire.jsoncodec import Raw
from .base import (
    ORIGINAL_STRUCTURED_KEY,
    ResultContext,
    Rewrite,
    Rule,
    ToolContext,
    meta_of,
    text_blocks,
    with_meta,
)
from .declared import ORIGINAL_OUTPUT_SCHEMA_KEY


def _drop_schema(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    """The tool without its ``outputSchema`` (kept in its ``_meta``), when degrade mode is on for it."""
    if not ctx.degrade or "outputSchema" not in tool:
        return None
    meta = meta_of(tool)
    meta[ORIGINAL_OUTPUT_SCHEMA_KEY] = tool["outputSchema"]
    out = {k: v for k, v in tool.items() if k != "outputSchema"}
    out["_meta"] = meta
    return out, Rewrite(
        "degrade",
        "advertised the tool without its outputSchema (kept in _meta)",
        ("/outputSchema",),
        ctx.degrade,
        lossy=True,
    )


def carried(result: JSONObject, value: JSON, ctx: ResultContext) -> bool:
    """Whether a text block of ``result`` already holds ``value`` as its JSON (the same value,
    whatever the spacing or member order): then the model reading ``content`` reads it already."""
    for block in text_blocks(result):
        text = block["text"].strip()
        if not text or text[0] not in '[{"-0123456789tfn':
            continue
        try:
            if ctx.codec.loads(text) == value:
                return True
        except DecodeError:
            continue
    return False


def _drop_structured(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    """The result without ``structuredContent`` (kept in its ``_meta``; its JSON added to ``content``
    when no text block carries it), when degrade mode is on for the tool and client."""
    if not ctx.degrade or "structuredContent" not in result:
        return None
    raw = result["structuredContent"]
    out: JSONObject = {k: v for k, v in result.items() if k != "structuredContent"}
    out, _ = with_meta(out, ORIGINAL_STRUCTURED_KEY, raw)
    pointers = ["/structuredContent"]
    content = result.get("content")
    if raw is not None and (content is None or isinstance(content, list)):
        try:
            value = ctx.codec.loads(raw) if isinstance(raw, Raw) else raw  # (left undecoded: no rule read it)
        except DecodeError:
            value = raw
        if not carried(result, value, ctx):
            blocks = list(content) if isinstance(content, list) else []
            blocks.append({"type": "text", "text": ctx.codec.dumps(raw).decode()})
            out["content"] = blocks
            pointers.append(f"/content/{len(blocks) - 1}")
    return out, Rewrite(
        "degrade",
        "moved structuredContent to _meta, its JSON in content (degrade mode)",
        tuple(pointers),
        ctx.degrade,
        lossy=True,
    )


RULE = Rule(
    "degrade",
    "degrade (opt-in, lossy)",
    "Opted in per client, per tool or globally: the tool advertised without its outputSchema, its results "
    "without structuredContent (both kept in _meta, the value's JSON added to content); logged lossy.",
    on_tool=_drop_schema,
    on_result=_drop_structured,
)
