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

And for a host whose model gets a result's non-text blocks and the JSON of its
``structuredContent`` but none of its text blocks (``drops_text_beside_structured`` in
``hosts.toml``: Claude Code 2.1.332), what the proxy put in text would never reach it beside a
``structuredContent``. For such a host, when the result (not an MCP Apps tool's) has a
``structuredContent``:

- each text block the proxy made of a block (its ``_meta`` holds the original block: an SVG's
  source, an image it cannot decode, a block ``media_data`` could not keep) becomes an embedded
  text resource (``{"type": "resource", "resource": {"uri", "mimeType": "text/plain", "text"}}``,
  the block's ``_meta`` and ``annotations`` kept), which the host shows as
  ``[Resource from SERVER at URI] TEXT``; its URI is ``urn:dev.mcp-normalizer:content/N``, N the
  block's place in ``content``;
- when the proxy replaced values of ``structuredContent`` so that the host's validator accepts it
  (a ``null`` dropped, a member pruned, a value coerced: ``_meta["dev.mcp-normalizer/original-values"]``),
  one more such resource, ``urn:dev.mcp-normalizer:original-values``, names the server's values by
  JSON pointer, within ``mirror_max_bytes``: the model reads what the server sent, the validator gets
  the conforming ``structuredContent``;
- for a host that also reads ``structuredContent`` into IEEE doubles (``parses_numbers_as_doubles``:
  Claude Code shows ``12345678901234567890`` as ``12345678901234567000``), one more,
  ``urn:dev.mcp-normalizer:exact-numbers``, names each number of it no double holds exactly, as the
  server spelled it, by JSON pointer.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation

from ...errors import DecodeError
from ...types import JSON, JSONObject
from ...wire.jsoncodec import Codec, Raw
from ...wire.pointer import PointerPattern
from .base import ORIGINAL_VALUES_KEY, ResultContext, Rewrite, Rule, text_blocks
from .host_content import ORIGINAL_BLOCK_KEY

#: The URIs of the embedded resources this rule adds (RFC 8141 form, the proxy's own namespace).
URN = "urn:dev.mcp-normalizer:"
ORIGINAL_VALUES_URI = URN + "original-values"
EXACT_NUMBERS_URI = URN + "exact-numbers"
#: Most numbers named in one result (a result of many such numbers is named in part, in order).
MAX_NUMBERS = 100


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


def _resource(text: str, uri: str, block: JSONObject | None = None) -> JSONObject:
    """An embedded text resource holding ``text`` at ``uri`` (``block``'s ``annotations`` and
    ``_meta`` kept when it replaces that block)."""
    new: JSONObject = {"type": "resource", "resource": {"uri": uri, "mimeType": "text/plain", "text": text}}
    if block is not None:
        for member in ("annotations", "_meta"):
            if member in block:
                new[member] = block[member]
    return new


def _carried(structured: JSON, pointer: str, was: JSON, ctx: ResultContext) -> bool:
    """Whether the value ``structuredContent`` holds at ``pointer`` (RFC 6901) says what ``was``
    said: one of them is a string holding the JSON of the other (a double-encoded value decoded,
    ``"12"`` coerced to ``12``, ``12.5`` to ``"12.5"``)."""
    if was is None or isinstance(was, dict | list):
        return False
    try:
        node: JSON = structured
        for step in PointerPattern.parse(pointer).segments:
            if isinstance(node, dict) and step in node:
                node = node[step]
            elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
                node = node[int(step)]
            else:
                return False
        if isinstance(was, str):
            return bool(ctx.codec.loads(was) == node)
        return isinstance(node, str) and ctx.codec.dumps(was).decode() == node
    except (DecodeError, ValueError):
        return False


def _inexact(value: JSON, ctx: ResultContext, at: str = "") -> Iterator[tuple[str, str]]:
    """``(pointer, spelling)`` of each number in ``value`` that an IEEE double does not give back:
    whose shortest round-trip spelling as a double (JavaScript's and Python's) is another number
    (an integer past 2**53, a decimal with more digits than a double keeps; ``0.1`` and ``1e-7`` are
    given back). The spelling is the codec's (the server's)."""
    if isinstance(value, dict):
        for name, member in value.items():
            yield from _inexact(member, ctx, f"{at}/{name.replace('~', '~0').replace('/', '~1')}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _inexact(item, ctx, f"{at}/{index}")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        spelling = ctx.codec.dumps(value).decode()
        try:
            exact = Decimal(spelling)
            held = Decimal(repr(float(exact))) if exact.is_finite() else exact  # what a double prints back
        except (InvalidOperation, OverflowError, ValueError):
            return
        if held != exact:
            yield at, spelling


def _beside(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    """For a host that drops text blocks beside ``structuredContent``: the proxy's own text as
    embedded resources, and the server's replaced values named in one (module docstring)."""
    content = result.get("content")
    if result.get("structuredContent") is None or not isinstance(content, list):
        return None
    if ctx.tool is not None and ctx.tool.ui_resource_uri is not None:
        return None
    blocks = list(content)
    touched: list[str] = []
    for index, block in enumerate(content):
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            continue
        meta = block.get("_meta")
        if isinstance(meta, dict) and ORIGINAL_BLOCK_KEY in meta:
            blocks[index] = _resource(block["text"], f"{URN}content/{index}", block)
            touched.append(f"/content/{index}")
    meta = result.get("_meta")
    originals = meta.get(ORIGINAL_VALUES_KEY) if isinstance(meta, dict) else None
    if isinstance(originals, dict):
        originals = {
            at: was for at, was in originals.items() if not _carried(result["structuredContent"], at, was, ctx)
        }
    if isinstance(originals, dict) and originals:
        named = ctx.codec.dumps(originals).decode()
        if len(named) <= ctx.settings.mirror_max_bytes:
            text = "structuredContent as the server sent it, where the proxy replaced values (JSON pointer: value): "
            blocks.append(_resource(text + named, ORIGINAL_VALUES_URI))
            touched.append(f"/content/{len(blocks) - 1}")
    if ctx.client.parses_numbers_as_doubles and not isinstance(result["structuredContent"], Raw):
        numbers = list(itertools.islice(_inexact(result["structuredContent"], ctx), MAX_NUMBERS))
        named = "{" + ",".join(f"{json.dumps(at, ensure_ascii=False)}:{spelling}" for at, spelling in numbers) + "}"
        if numbers and len(named) <= ctx.settings.mirror_max_bytes:
            text = "numbers of structuredContent as the server wrote them, exactly (JSON pointer: number): "
            blocks.append(_resource(text + named, EXACT_NUMBERS_URI))
            touched.append(f"/content/{len(blocks) - 1}")
    if not touched:
        return None
    reason = (
        f"{ctx.client.title} shows its model the non-text blocks and the JSON of structuredContent, not the"
        " text blocks (hosts.toml: drops_text_beside_structured)"
    )
    return {**result, "content": blocks}, Rewrite(
        "text_mirror", "made the proxy's text an embedded resource beside structuredContent", tuple(touched), reason
    )


def _mirror(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    beside = _beside(result, ctx) if ctx.client.drops_text_beside_structured else None
    if beside is None:
        return _mirrored(result, ctx)
    mirrored = _mirrored(beside[0], ctx)  # (then the rule as for every client, on the blocks as they are now)
    if mirrored is None:
        return beside
    first, then = beside[1], mirrored[1]
    return mirrored[0], Rewrite(
        "text_mirror",
        f"{first.action}; {then.action}",
        (*first.pointers, *then.pointers),
        f"{first.reason}; {then.reason}",
    )


def _mirrored(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
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
