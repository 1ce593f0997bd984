"""Rule ``text_mirror``: a result with ``structuredContent`` and no text gets one text block.

Fault kind ``missing_text_content`` (DESIGN section 3, rule 4). Clients that read only ``content``
(claude.ai, Claude Desktop, Kiro) show nothing for ``content: []``; the spec asks servers to also
return the serialized JSON in a text block "for backwards compatibility" (``server/tools.mdx``
"Structured Content"). The block carries the compact JSON of ``structuredContent`` when it is at most
``mirror_max_bytes``. Never for MCP Apps tools (``_meta.ui.resourceUri``): their structured data
feeds a UI, not the model (SEP-2200). A result that already has any text block is left alone: the
text may be a deliberate summary.

Except for a host whose model reads only ``content`` (``reads = "content"`` in
``mcp_normalizer/hosts.toml``: Gemini CLI; issue 40): there the data of ``structuredContent`` that
the text does not carry would never reach the model, so the block is also added when the text
*says less*: no text block holds the compact JSON of ``structuredContent`` (as the proxy's codec
spells it) nor its pretty JSON (``json.dumps(indent=2)``, the SDKs' habit), and some scalar leaf of
``structuredContent`` (a string as it is, other scalars as JSON spells them; empty strings not
counted) appears in none of the text blocks. "Invoice created." beside
``{"invoice": "INV-7", "total": 12.5}`` says less; a text that names every value says as much, in
whatever words. The test is one walk of a value at most ``mirror_max_bytes`` long; the block goes
after the server's text, which stays. Every other client keeps the rule as it was.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from ...types import JSON, JSONObject
from ...wire.jsoncodec import Codec
from .base import ResultContext, Rewrite, Rule, text_blocks


def _leaves(value: JSON) -> Iterator[JSON]:
    """The scalar leaves of a JSON value, depth first."""
    if isinstance(value, dict):
        for member in value.values():
            yield from _leaves(member)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def says_less(texts: list[str], structured: JSON, compact: str, codec: Codec) -> bool:
    """True when the ``texts`` (a result's text blocks) carry less than ``structured`` (its
    ``structuredContent``, ``compact`` its compact JSON): no text holds the compact or the pretty
    JSON, and some scalar leaf (a non-empty string as it is, any other scalar as ``codec`` spells
    it) is in none of them."""
    if any(compact in text for text in texts):
        return False
    try:
        pretty = json.dumps(structured, indent=2, ensure_ascii=False)
    except (TypeError, ValueError):  # a value the stdlib cannot write (the codec's own number type)
        pretty = None
    if pretty is not None and any(pretty in text for text in texts):
        return False
    joined = "\n".join(texts)
    for leaf in _leaves(structured):
        spelling = leaf if isinstance(leaf, str) else codec.dumps(leaf).decode()
        if spelling and spelling not in joined:
            return True
    return False


def _mirror(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    if "structuredContent" not in result or result["structuredContent"] is None:
        return None
    texts = text_blocks(result)
    if texts and not ctx.client.content_only:
        return None
    if ctx.tool is not None and ctx.tool.ui_resource_uri is not None:
        return None
    content = result.get("content")
    if content is not None and not isinstance(content, list):
        return None  # a malformed content (content_blocks off) is not replaced by a mirror
    text = ctx.codec.dumps(result["structuredContent"])
    if len(text) > ctx.settings.mirror_max_bytes:
        return None
    structured = result["structuredContent"]
    if texts and not says_less([block["text"] for block in texts], structured, text.decode(), ctx.codec):
        return None
    blocks = list(content) if isinstance(content, list) else []
    blocks.append({"type": "text", "text": text.decode()})
    reason = "content has no text block" if isinstance(content, list) else "content is missing"
    if texts:
        reason = "the text says less than structuredContent and the host's model reads only content"
    return {**result, "content": blocks}, Rewrite(
        "text_mirror", "added text block with serialized structuredContent", (f"/content/{len(blocks) - 1}",), reason
    )


RULE = Rule(
    name="text_mirror",
    kind="missing_text_content",
    summary="Add a text block with the serialized structuredContent when content has no text.",
    on_result=_mirror,
)
