"""Rule ``host_content``: content blocks a host cannot take, made into text it can, for it alone.

Fault kind ``host_content``: blocks the spec allows that a host refuses (:mod:`~.host_profiles`).
The repair runs only for a client whose ``clientInfo`` names such a host; every other client gets
the blocks as the server sent them.

- ``image/svg+xml`` for the Claude hosts (the Anthropic API takes JPEG, PNG, GIF and WebP only):
  the image becomes a text block holding the SVG source (the base64 ``data`` decoded; an SVG is
  text). An image whose data is not base64 of UTF-8 is left as it is.
- ``resource_link`` for Codex before 0.171.0 (Codex Desktop 0.150), ChatGPT (rmcp ``=3.1.3`` fails
  the whole call on one) and Kiro (it discards the result, kirodotdev/Kiro#8960): the link
  becomes a text block naming it, ``<name>: <uri>`` (and its MIME type).

Each new text block keeps the original block whole under its ``_meta["dev.mcp-normalizer/original-block"]``
and the original's ``annotations``, so nothing is lost.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable

from ...types import JSON, JSONObject
from .base import META_PREFIX, ResultContext, Rewrite, Rule, meta_of
from .clients import ClientProfile
from .host_profiles import IMAGE_SVG, RESOURCE_LINK

ORIGINAL_BLOCK_KEY = META_PREFIX + "original-block"


def _svg_text(block: JSONObject) -> str | None:
    """The SVG source of an ``image/svg+xml`` image block, ``None`` when it is no such block."""
    mime = block.get("mimeType")
    if block.get("type") != "image" or not isinstance(mime, str):
        return None
    if mime.partition(";")[0].strip().lower() != "image/svg+xml" or not isinstance(block.get("data"), str):
        return None
    try:
        return base64.b64decode(block["data"], validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None


def _link_text(block: JSONObject) -> str | None:
    """The text naming a ``resource_link`` block, ``None`` when it is no such block."""
    if block.get("type") != "resource_link" or not isinstance(block.get("uri"), str):
        return None
    name = block.get("title") or block.get("name")
    text = f"{name}: {block['uri']}" if isinstance(name, str) and name else block["uri"]
    mime = block.get("mimeType")
    return f"{text} ({mime})" if isinstance(mime, str) and mime else text


def _as_text(block: JSONObject, text: str) -> JSONObject:
    meta = meta_of(block)
    meta[ORIGINAL_BLOCK_KEY] = block
    new: JSONObject = {"type": "text", "text": text}
    if "annotations" in block:
        new["annotations"] = block["annotations"]
    new["_meta"] = meta
    return new


Fix = Callable[[JSONObject], "str | None"]


def _fixes(client: ClientProfile) -> list[tuple[str, Fix]]:
    fixes: list[tuple[str, Fix]] = []
    if client.host_needs(IMAGE_SVG):
        fixes.append(("an SVG image as its source text", _svg_text))
    if client.host_needs(RESOURCE_LINK):
        fixes.append(("a resource_link as text naming it", _link_text))
    return fixes


def _repair(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    host = ctx.client.host
    content = result.get("content")
    if host is None or not isinstance(content, list):
        return None
    fixes = _fixes(ctx.client)
    if not fixes:
        return None
    blocks: list[JSON] = list(content)
    touched: list[str] = []
    reasons: list[str] = []
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        for reason, fix in fixes:
            text = fix(block)
            if isinstance(text, str):
                blocks[index] = _as_text(block, text)
                touched.append(f"/content/{index}")
                reasons.append(reason)
                break
    if not touched:
        return None
    sources = ", ".join(host.faults[fault] for fault in sorted(ctx.client.host_faults & {IMAGE_SVG, RESOURCE_LINK}))
    why = f"{'; '.join(sorted(set(reasons)))}, for {host.title} ({sources})"
    return {**result, "content": blocks}, Rewrite(
        "host_content", "made text of what the host cannot take", tuple(touched), why
    )


RULE = Rule(
    "host_content",
    "host_content",
    "for a host that refuses a content block the spec allows (an SVG image for Claude, a resource_link for "
    "Codex before 0.171.0, ChatGPT and Kiro), that block becomes text it takes, the original kept in the block's _meta",
    on_result=_repair,
)
