"""Rule ``text_mirror``: a result with ``structuredContent`` and no text gets one text block.

Fault kind ``missing_text_content`` (DESIGN section 3, rule 4). Clients that read only ``content``
(claude.ai, Claude Desktop, Kiro) show nothing for ``content: []``; the spec asks servers to also
return the serialized JSON in a text block "for backwards compatibility" (``server/tools.mdx``
"Structured Content"). The block carries the compact JSON of ``structuredContent`` when it is at most
``mirror_max_bytes``. Never for MCP Apps tools (``_meta.ui.resourceUri``): their structured data
feeds a UI, not the model (SEP-2200). A result that already has any text block is left alone: the
text may be a deliberate summary.
"""

from __future__ import annotations

from ...types import JSONObject
from .base import ResultContext, Rewrite, Rule, text_blocks


def _mirror(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    if "structuredContent" not in result or result["structuredContent"] is None or text_blocks(result):
        return None
    if ctx.tool is not None and ctx.tool.ui_resource_uri is not None:
        return None
    content = result.get("content")
    if content is not None and not isinstance(content, list):
        return None  # a malformed content (content_blocks off) is not replaced by a mirror
    text = ctx.codec.dumps(result["structuredContent"])
    if len(text) > ctx.settings.mirror_max_bytes:
        return None
    blocks = list(content) if isinstance(content, list) else []
    blocks.append({"type": "text", "text": text.decode()})
    reason = "content has no text block" if isinstance(content, list) else "content is missing"
    return {**result, "content": blocks}, Rewrite(
        "text_mirror", "added text block with serialized structuredContent", (f"/content/{len(blocks) - 1}",), reason
    )


RULE = Rule(
    name="text_mirror",
    kind="missing_text_content",
    summary="Add a text block with the serialized structuredContent when content has no text.",
    on_result=_mirror,
)
