"""Rule ``media_data``: image and audio blocks whose ``data`` is not base64.

Fault kind ``invalid_media_data`` (``cases/faults.md``, "Kinds from the 2026 reports";
nota/gyazo-mcp-server#129): ``data`` sent as a ``data:<mime>;base64,<payload>`` URI, or as
something that is not base64 at all. ``ImageContent.data`` and ``AudioContent.data`` are base64
(MCP schema.ts); the TS SDK's result schema checks it with ``atob`` and rejects the whole result
(``-32602 Invalid Base64 string``).

- a data URI loses its prefix: ``data`` becomes the payload, and ``mimeType`` is taken from the
  URI when the block has none or a generic one (``application/octet-stream``); the prefix is kept
  in the block's ``_meta["dev.mcp-normalizer/data-uri-prefix"]``;
- data that is still not base64 (WHATWG forgiving-base64: what ``atob`` accepts) becomes a text
  block saying so, the whole original block kept in its ``_meta["dev.mcp-normalizer/original-block"]``.

Nothing is decoded or lost: base64 is checked with one regular expression.
"""

from __future__ import annotations

import re

from ...types import JSONObject
from .base import META_PREFIX, Rule, each_block, meta_of

PREFIX_KEY = META_PREFIX + "data-uri-prefix"
ORIGINAL_BLOCK_KEY = META_PREFIX + "original-block"
_DATA_URI = re.compile(r"data:([^;,]*)((?:;[^;,]*)*);base64,", re.IGNORECASE)
_WHITESPACE = re.compile(r"[\t\n\f\r ]+")
_BASE64 = re.compile(r"[A-Za-z0-9+/]*")
_GENERIC = frozenset({"", "application/octet-stream", "binary/octet-stream"})


def is_base64(data: str) -> bool:
    """True when ``atob`` accepts ``data`` (WHATWG HTML "forgiving-base64 decode")."""
    text = _WHITESPACE.sub("", data) if _WHITESPACE.search(data) else data
    if len(text) % 4 == 0:
        text = text[:-2] if text.endswith("==") else text[:-1] if text.endswith("=") else text
    return len(text) % 4 != 1 and _BASE64.fullmatch(text) is not None


def _block(block: JSONObject) -> tuple[JSONObject, str] | None:
    if block.get("type") not in ("image", "audio"):
        return None
    data = block.get("data")
    if not isinstance(data, str):
        return None
    out: JSONObject = block
    why = ""
    match = _DATA_URI.match(data)
    if match is not None:
        meta = meta_of(block)
        meta.setdefault(PREFIX_KEY, match.group(0))
        out = {**block, "data": data[match.end() :], "_meta": meta}
        mime = match.group(1).strip().lower()
        given = block.get("mimeType")
        if mime and (not isinstance(given, str) or given.strip().lower() in _GENERIC):
            out["mimeType"] = mime
        why = "data is a data: URI"
    if is_base64(str(out["data"])):
        return (out, why) if why else None
    meta = meta_of(block)
    meta[ORIGINAL_BLOCK_KEY] = block
    text = f"[{block['type']} content of {len(data)} characters that is not base64: kept in _meta]"
    return {"type": "text", "text": text, "_meta": meta}, "data is not base64"


RULE = Rule(
    name="media_data",
    kind="invalid_media_data",
    summary="Image/audio data sent as a data: URI loses its prefix (mimeType from it when missing); data "
    "that is not base64 becomes a text block, the block kept in _meta.",
    on_result=each_block("media_data", "repaired media data", _block, "/data"),
)
