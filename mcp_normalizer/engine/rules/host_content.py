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

- a PNG, JPEG, GIF or WebP image whose bytes hold no header giving its size (a cut file: the
  8-byte PNG signature alone, ``Cocoanetics/SwiftMCP#176``) for Claude Code and Codex, which show
  their model only that it could not be processed: the image becomes a text block naming it, with
  its data as a ``data:`` URI (RFC 2397) when the base64 is at most ``mirror_max_bytes``, so the
  model reads the image's source; bytes that are no base64 are left to ``media_data``.

Each new text block keeps the original block whole under its ``_meta["dev.mcp-normalizer/original-block"]``
and the original's ``annotations``, so nothing is lost.

- an image whose ``mimeType`` is not what its bytes are (``image/webp`` holding a PNG), for every
  host (``[every_family]``; the Anthropic API answers 400 for the whole turn,
  anthropics/claude-code#11975): the block stays an image, its ``mimeType`` the type its bytes'
  signature names (PNG, JPEG, GIF, WebP; only the first bytes are decoded), the declared one kept
  in the block's ``_meta["dev.mcp-normalizer/original-mime-type"]``. Bytes of no known signature
  are left as they are.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable

from ...errors import DecodeError
from ...types import JSON, JSONObject
from .base import META_PREFIX, ResultContext, Rewrite, Rule, meta_of
from .clients import ClientProfile
from .host_profiles import IMAGE_MIME, IMAGE_SVG, IMAGE_UNDECODABLE, RESOURCE_LINK, TEXT_PARSED_AS_STRUCTURED

ORIGINAL_BLOCK_KEY = META_PREFIX + "original-block"
#: ``_meta`` key of an image block keeping the ``mimeType`` the server declared.
ORIGINAL_MIME_KEY = META_PREFIX + "original-mime-type"
#: Signatures of the image types the Anthropic API takes: (media type, (offset, bytes) all there).
_SIGNATURES = (
    ("image/png", ((0, b"\x89PNG\r\n\x1a\n"),)),
    ("image/jpeg", ((0, b"\xff\xd8\xff"),)),
    ("image/gif", ((0, b"GIF87a"),)),
    ("image/gif", ((0, b"GIF89a"),)),
    ("image/webp", ((0, b"RIFF"), (8, b"WEBP"))),
)


def sniffed_type(data: str) -> str | None:
    """The media type the first bytes of ``data`` (base64) say an image is, ``None`` when they
    match no signature of :data:`_SIGNATURES` or are no base64."""
    text = "".join(data[:64].split())
    try:
        head = base64.b64decode(text[: len(text) // 4 * 4], validate=True)
    except (binascii.Error, ValueError):
        return None
    for media, parts in _SIGNATURES:
        if all(head[at : at + len(part)] == part for at, part in parts):
            return media
    return None


def _retyped(block: JSONObject) -> JSONObject | None:
    """``block`` with the ``mimeType`` its bytes say, ``None`` when it is no image or says the same."""
    media, data = block.get("mimeType"), block.get("data")
    if block.get("type") != "image" or not isinstance(media, str) or not isinstance(data, str):
        return None
    found = sniffed_type(data)
    if found is None or found == media.partition(";")[0].strip().lower():
        return None
    meta = meta_of(block)
    meta.setdefault(ORIGINAL_MIME_KEY, media)
    return {**block, "mimeType": found, "_meta": meta}


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


def image_size(raw: bytes) -> tuple[int, int] | None:
    """Width and height as the header of a PNG (its first chunk, IHDR), GIF (the logical screen
    descriptor), JPEG (the first SOFn segment, reached segment by segment) or WebP (a VP8, VP8L or
    VP8X chunk) gives them; ``None`` when ``raw`` holds no such header or a side is 0."""
    found: tuple[int, int] | None = None
    if raw.startswith(b"\x89PNG\r\n\x1a\n"):
        if raw[12:16] == b"IHDR" and len(raw) >= 24:
            found = int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")
    elif raw.startswith((b"GIF87a", b"GIF89a")):
        if len(raw) >= 10:
            found = int.from_bytes(raw[6:8], "little"), int.from_bytes(raw[8:10], "little")
    elif raw.startswith(b"RIFF") and raw[8:12] == b"WEBP":
        found = _webp_size(raw)
    elif raw.startswith(b"\xff\xd8"):
        found = _jpeg_size(raw)
    return found if found is not None and min(found) > 0 else None


def _webp_size(raw: bytes) -> tuple[int, int] | None:
    chunk = raw[12:16]
    if chunk == b"VP8 " and len(raw) >= 30 and raw[23:26] == b"\x9d\x01\x2a":  # RFC 6386 9.1
        return int.from_bytes(raw[26:28], "little") & 0x3FFF, int.from_bytes(raw[28:30], "little") & 0x3FFF
    if chunk == b"VP8L" and len(raw) >= 25 and raw[20] == 0x2F:  # RFC 9649 3.2
        bits = int.from_bytes(raw[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(raw) >= 30:
        return int.from_bytes(raw[24:27], "little") + 1, int.from_bytes(raw[27:30], "little") + 1
    return None


def _jpeg_size(raw: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 4 <= len(raw) and raw[at] == 0xFF:
        marker = raw[at + 1]
        if marker == 0xFF:  # a fill byte before the marker
            at += 1
            continue
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # SOFn (ITU T.81 B.2.2)
            if at + 9 > len(raw):
                return None
            return int.from_bytes(raw[at + 7 : at + 9], "big"), int.from_bytes(raw[at + 5 : at + 7], "big")
        at += 2 + int.from_bytes(raw[at + 2 : at + 4], "big")
    return None


#: The image types :func:`image_size` reads (the raster types the Anthropic API and Codex take).
_RASTER = frozenset({"image/png", "image/jpeg", "image/jpg", "image/gif", "image/webp"})


def _undecodable_text(block: JSONObject, host: str, limit: int) -> str | None:
    """The text naming an image block ``host`` cannot decode (a raster type whose bytes give no
    size), with its data as a ``data:`` URI when the base64 is at most ``limit`` characters;
    ``None`` for any other block."""
    data, media = block.get("data"), block.get("mimeType")
    if block.get("type") != "image" or not isinstance(data, str):
        return None
    compact = "".join(data.split())
    try:
        raw = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        return None
    declared = media.partition(";")[0].strip().lower() if isinstance(media, str) else ""
    sniffed = sniffed_type(compact)
    if (declared not in _RASTER and sniffed is None) or image_size(raw) is not None:
        return None
    mime = sniffed or declared
    head = f"[an {mime} image of {len(raw)} bytes that {host} cannot decode (no header giving its size)"
    if len(compact) > limit:
        return head + "; its data is kept in this block's _meta]"
    return f"{head}; its data: data:{mime};base64,{compact}]"


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


def _fixes(client: ClientProfile, limit: int) -> list[tuple[str, str, Fix]]:
    fixes: list[tuple[str, str, Fix]] = []
    if client.host_needs(IMAGE_UNDECODABLE):
        title = client.title

        def undecodable(block: JSONObject) -> str | None:
            return _undecodable_text(block, title, limit)

        fixes.append((IMAGE_UNDECODABLE, "an image whose bytes give no size as text naming it", undecodable))
    if client.host_needs(IMAGE_SVG):
        fixes.append((IMAGE_SVG, "an SVG image as its source text", _svg_text))
    if client.host_needs(RESOURCE_LINK):
        fixes.append((RESOURCE_LINK, "a resource_link as text naming it", _link_text))
    return fixes


def _structured_for_parser(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    """For a host that parses a result's first text block into a missing ``structuredContent``
    (Gemini CLI) and takes only an object there: a known tool that declares no ``outputSchema`` gets
    ``structuredContent: {"result": <the parsed value>}`` when that value is no object; ``content``
    stays as it came (what the host reads)."""
    host = ctx.client.host
    tool = ctx.tool
    if host is None or tool is None or tool.has_output_schema:
        return None
    present = result.get("structuredContent")
    if present not in (None, False, "") and not (type(present) in (int, float) and present == 0):
        return None  # (an object, an array, a string: the host takes it as it is, or refuses it as sent)
    content = result.get("content")
    first = content[0] if isinstance(content, list) and content else None
    if not isinstance(first, dict) or first.get("type") != "text" or not isinstance(first.get("text"), str):
        return None
    try:
        value = ctx.codec.loads(first["text"])
    except DecodeError:
        return None  # no JSON: the host parses nothing
    if isinstance(value, dict):
        return None
    why = (
        f"{host.title} makes the first text block its structuredContent when there is none and takes only an"
        f" object there ({host.faults[TEXT_PARSED_AS_STRUCTURED]})"
    )
    action = "supplied structuredContent for a host that parses the text into one"
    return {**result, "structuredContent": {"result": value}}, Rewrite(
        "host_content", action, ("/structuredContent",), why
    )


def _repair(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    blocks = _blocks(result, ctx)
    if not ctx.client.host_needs(TEXT_PARSED_AS_STRUCTURED):
        return blocks
    supplied = _structured_for_parser(blocks[0] if blocks is not None else result, ctx)
    if supplied is None or blocks is None:
        return supplied or blocks
    first, second = blocks[1], supplied[1]
    action, reason = f"{first.action}; {second.action}", f"{first.reason}; {second.reason}"
    return supplied[0], Rewrite("host_content", action, first.pointers + second.pointers, reason)


def _blocks(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    host = ctx.client.host
    content = result.get("content")
    if host is None or not isinstance(content, list):
        return None
    fixes = _fixes(ctx.client, ctx.settings.mirror_max_bytes)
    retype = ctx.client.host_needs(IMAGE_MIME)
    if not fixes and not retype:
        return None
    blocks: list[JSON] = list(content)
    touched: list[str] = []
    reasons: list[str] = []
    fired: set[str] = set()
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        for key, reason, fix in fixes:
            text = fix(block)
            if isinstance(text, str):
                blocks[index] = _as_text(block, text)
                touched.append(f"/content/{index}")
                reasons.append(reason)
                fired.add(key)
                break
        else:
            new = _retyped(block) if retype else None
            if new is not None:
                blocks[index] = new
                touched.append(f"/content/{index}/mimeType")
                reasons.append("an image's mimeType as its bytes say")
                fired.add(IMAGE_MIME)
    if not touched:
        return None
    sources = ", ".join(host.faults[fault] for fault in sorted(fired))
    why = f"{'; '.join(sorted(set(reasons)))}, for {host.title} ({sources})"
    action = "made text of what the host cannot take" if fired != {IMAGE_MIME} else "typed an image as its bytes are"
    return {**result, "content": blocks}, Rewrite("host_content", action, tuple(touched), why)


RULE = Rule(
    "host_content",
    "host_content",
    "for a host that refuses a content block the spec allows (an SVG image for Claude, a resource_link for "
    "Codex before 0.171.0, ChatGPT and Kiro, an image whose bytes give no size for Claude Code and Codex),"
    " that block becomes text it takes, the original kept in the block's _meta;"
    " for every host, an image's mimeType the type its bytes are, the declared one kept in the block's _meta",
    on_result=_repair,
)
