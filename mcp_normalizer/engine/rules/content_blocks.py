"""Rule ``content_blocks``: a result always has a ``content`` list of spec content blocks.

Fault kinds ``missing_content_field`` and ``invalid_content_block``. ``content`` is required in every
era; every block must be one of ``text``, ``image``, ``audio``, ``resource_link``, ``resource``, and a
text block needs a string ``text`` (clients' result schemas reject the whole result otherwise).

- the pre-2024-11-05 ``{toolResult: {...}}`` shape becomes the result it wraps (the TS SDK keeps a
  compatibility schema for exactly this);
- a missing ``content`` becomes ``[]`` (the text mirror may then fill it from ``structuredContent``);
- a block of type ``error`` becomes a text block and the result ``isError: true`` (the server said so);
- a block of another unknown type that carries a string ``text`` becomes a text block, its original
  type kept in the block's ``_meta["dev.mcp-normalizer/original-type"]``; one without a ``text``
  (``{type: "json", json: {...}}``, ElliotPadfield/unpaywall-mcp#4) becomes a text block holding
  the JSON of its payload (its one other member's value, else those members), the type kept alike;
- a text block whose ``text`` is missing or not a string gets ``""`` or the JSON of the value; a bare
  string in ``content`` becomes a text block.
"""

from __future__ import annotations

from ...types import JSON, JSONObject
from ...wire.jsoncodec import Codec
from .base import META_PREFIX, ResultContext, Rewrite, Rule, meta_of, with_meta

KNOWN_TYPES = frozenset({"text", "image", "audio", "resource_link", "resource"})
ORIGINAL_TYPE_KEY = META_PREFIX + "original-type"
TOOL_RESULT_CONFLICTS_KEY = META_PREFIX + "tool-result-conflicts"


def _text_of(value: JSON, codec: Codec) -> str:
    return value if isinstance(value, str) else codec.dumps(value).decode()


def _block(block: JSON, codec: Codec) -> tuple[JSON, bool, str | None]:
    """The repaired block, whether it reported an error, and what was wrong (``None``: nothing)."""
    if isinstance(block, str):
        return {"type": "text", "text": block}, False, "bare string"
    if not isinstance(block, dict):
        return {"type": "text", "text": _text_of(block, codec)}, False, "not an object"
    kind = block.get("type")
    known = isinstance(kind, str) and kind in KNOWN_TYPES
    if kind == "error":
        text = block.get("text", block.get("message", ""))
        return {**block, "type": "text", "text": _text_of(text, codec)}, True, "type 'error'"
    if not known and isinstance(block.get("text"), str):
        meta = meta_of(block)
        meta.setdefault(ORIGINAL_TYPE_KEY, kind)  # a proxy in front of this one already recorded it
        return {**block, "type": "text", "_meta": meta}, False, f"unknown type {kind!r}"
    if not known:
        payload = {k: v for k, v in block.items() if k not in ("type", "_meta", "annotations")}
        value = next(iter(payload.values())) if len(payload) == 1 else payload
        meta = meta_of(block)
        meta.setdefault(ORIGINAL_TYPE_KEY, kind)
        fixed = {k: v for k, v in block.items() if k in ("annotations",)}
        return {"type": "text", "text": _text_of(value, codec), **fixed, "_meta": meta}, False, f"unknown type {kind!r}"
    if kind == "text" and not isinstance(block.get("text"), str):
        text = block.get("text")
        return {**block, "text": "" if text is None else _text_of(text, codec)}, False, "text is not a string"
    return block, False, None


def _unwrap(outer: JSONObject, legacy: JSONObject) -> JSONObject:
    """The result a legacy ``{toolResult}`` wraps, merged with the members beside it.

    The outer members win; both ``_meta`` objects are merged (outer entries win); an inner member
    the outer one overrides is kept in ``_meta["dev.mcp-normalizer/tool-result-conflicts"]``.
    """
    out: JSONObject = {**legacy, **outer}
    if "_meta" in legacy or "_meta" in outer:
        out["_meta"] = {**meta_of(legacy), **meta_of(outer)}
    conflicts = {k: v for k, v in legacy.items() if k != "_meta" and k in outer and outer[k] != v}
    return with_meta(out, TOOL_RESULT_CONFLICTS_KEY, conflicts)[0] if conflicts else out


def _repair(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    out, touched, reasons = result, [], []
    if "content" not in out and "toolResult" in out:
        legacy = out["toolResult"]
        rest = {k: v for k, v in out.items() if k != "toolResult"}
        if isinstance(legacy, dict) and isinstance(legacy.get("content"), list):
            out = _unwrap(rest, legacy)
        else:
            out = {**rest, "content": [{"type": "text", "text": _text_of(legacy, ctx.codec)}]}
        touched.append("/toolResult")
        reasons.append("legacy toolResult shape")
    content = out.get("content")
    if "content" not in out:
        out = {**out, "content": []}
        touched.append("/content")
        reasons.append("content is missing")
    elif isinstance(content, list):
        blocks, flagged = [], False
        for index, block in enumerate(content):
            fixed, error, why = _block(block, ctx.codec)
            blocks.append(fixed)
            flagged = flagged or error
            if why is not None:
                touched.append(f"/content/{index}")
                reasons.append(why)
        if touched and any(a is not b for a, b in zip(blocks, content, strict=True)):
            out = {**out, "content": blocks}
        if flagged and out.get("isError") is not True:
            out = {**out, "isError": True}
            touched.append("/isError")
    elif content is not None:  # a string or object where the list should be (null is null_members')
        out = {**out, "content": [_block(content, ctx.codec)[0]]}
        touched.append("/content")
        reasons.append("content is not a list")
    if not touched:
        return None
    return out, Rewrite("content_blocks", "repaired content", tuple(touched), "; ".join(reasons))


RULE = Rule(
    "content_blocks",
    "invalid_content_block",
    "Legacy toolResult unwrapped; missing content -> []; 'error' blocks -> text + isError; unknown types -> text.",
    on_result=_repair,
)
