"""A success result of a tool with an ``outputSchema`` but no ``structuredContent``.

Every SDK client rejects it ("Tool X has an output schema but did not return structured content").
These rules try, in order, to make it conforming without inventing data:

- ``promote_text_json`` (``missing_structured_content``, ``wrapped_result``): the text holds the
  JSON (a single text block that parses; a text block the proxy made of another block is not the
  server's text and is not counted): it becomes ``structuredContent`` if it conforms to the
  advertised schema, directly or wrapped as ``{result: ...}`` for wrap-result schemas (FastMCP's
  ``x-fastmcp-wrap-result``, or the proxy's own), or the whole text as ``{result: <text>}`` when that
  is what the schema wants. The text stays.
- ``vacuous_structured_content`` (``spurious_output_schema``): the schema accepts ``{}`` (it requires
  nothing, typically one generated for a media or text tool): ``structuredContent: {}`` is added,
  which says "no structured data" and conforms.
- ``error_flag`` (``error_not_flagged``): the only text is plainly an error message (it starts with
  an error word or status such as ``error:``, ``invalid_argument:``, ``404 Not Found``): the server
  reported an error as a success; it becomes ``isError: true``, text unchanged.

The first two add a ``structuredContent``, which a host that shows its model ``structuredContent``
in place of ``content`` and validates none of it (``keeps_structured``: Codex, ``hosts.toml``) does
not need, and whose model would then read it instead of the content: Codex 0.171.0 shows ``{}`` or
``{"result": "<the text>"}`` and drops an image beside it (issue 40, ``spurious_output_schema``). For
such a host they leave the result as the server sent it.
"""

from __future__ import annotations

import re
from http import HTTPStatus

from ...errors import DecodeError
from ...types import JSON, JSONObject
from ..schema import SchemaUnusable
from .base import META_PREFIX, ResultContext, Rewrite, Rule, text_blocks

#: Where ``host_content`` and ``media_data`` keep the block a text block was made of.
ORIGINAL_BLOCK_KEY = META_PREFIX + "original-block"

#: ``404 Not Found``, ``503 Service Unavailable``: a 4xx/5xx status with its reason phrase (RFC 9110).
_HTTP_ERRORS = "|".join(
    rf"{status.value}\s+" + r"\s+".join(map(re.escape, status.phrase.split())) for status in HTTPStatus if status >= 400
)
_ERROR_TEXT = re.compile(
    r"^\s*(?:error|err|exception|fail(?:ed|ure)?|fatal|invalid[_ ]argument|not[_ ]found|permission[_ ]denied|"
    r"unauthenticated|unauthorized|forbidden|failed[_ ]precondition|internal(?:[_ ]error)?|unavailable|"
    r"deadline[_ ]exceeded|resource[_ ]exhausted|already[_ ]exists|aborted|out[_ ]of[_ ]range|unimplemented|"
    rf"{_HTTP_ERRORS})\s*[:\-\u2014]"
    # a count is a tally, not an error: "Failed: 0, passed: 12"
    r"(?!\s*\d+\s*(?:[,;.]|$))",
    re.IGNORECASE,
)


def _missing(result: JSONObject, ctx: ResultContext) -> bool:
    """A success result of a known tool with a usable outputSchema and no structuredContent."""
    tool = ctx.tool
    return (
        tool is not None
        and tool.compiled is not None
        and result.get("isError") is not True
        and "structuredContent" not in result
    )


def _made_by_proxy(block: JSONObject) -> bool:
    """A text block the proxy made of another block (``host_content``, ``media_data``: the original
    kept in its ``_meta``): it is no text of the server's to promote."""
    meta = block.get("_meta")
    return isinstance(meta, dict) and ORIGINAL_BLOCK_KEY in meta


def _supplies(result: JSONObject, ctx: ResultContext) -> bool:
    """:func:`_missing`, for a client that needs a ``structuredContent`` supplied: not a host whose
    model reads ``structuredContent`` in place of ``content`` and that validates none of it
    (:attr:`~.clients.ClientProfile.keeps_structured`), where one added only hides the content."""
    return _missing(result, ctx) and not ctx.client.keeps_structured


def _valid(ctx: ResultContext, value: JSON) -> bool:
    assert ctx.tool is not None and ctx.tool.compiled is not None
    try:
        return ctx.tool.compiled.is_valid(value)
    except SchemaUnusable:
        return False


def _promote(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    if not _supplies(result, ctx):
        return None
    texts = [block for block in text_blocks(result) if not _made_by_proxy(block)]
    if len(texts) != 1:
        return None
    text = texts[0]["text"]
    candidates: list[JSON] = []
    try:
        parsed = ctx.codec.loads(text)
    except DecodeError:
        parsed = None
    else:
        candidates += [parsed, {"result": parsed}]
    candidates.append({"result": text})
    for candidate in candidates:
        if _valid(ctx, candidate):
            how = "the text's JSON" if candidate is parsed else "the text, wrapped as {result: ...}"
            return {**result, "structuredContent": candidate}, Rewrite(
                "promote_text_json",
                "promoted the text to structuredContent",
                ("/structuredContent",),
                f"structuredContent missing; {how} conforms to outputSchema",
            )
    return None


def _vacuous(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    if not _supplies(result, ctx) or not _valid(ctx, {}):
        return None
    return {**result, "structuredContent": {}}, Rewrite(
        "vacuous_structured_content",
        "added structuredContent: {}",
        ("/structuredContent",),
        "structuredContent missing; the outputSchema requires nothing",
    )


def _error_flag(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    if not _missing(result, ctx):
        return None
    texts = text_blocks(result)
    if len(texts) != 1 or not _ERROR_TEXT.match(texts[0]["text"]):
        return None
    return {**result, "isError": True}, Rewrite(
        "error_flag",
        "flagged the result as an error",
        ("/isError",),
        "success without structuredContent whose only text is an error message",
    )


PROMOTE_TEXT_JSON = Rule(
    "promote_text_json",
    "missing_structured_content",
    "Missing structuredContent: the single text block's JSON (or {result: text}) if it conforms.",
    on_result=_promote,
)
VACUOUS_STRUCTURED_CONTENT = Rule(
    "vacuous_structured_content",
    "spurious_output_schema",
    "Missing structuredContent and an outputSchema that requires nothing: add structuredContent: {}.",
    on_result=_vacuous,
)
ERROR_FLAG = Rule(
    "error_flag",
    "error_not_flagged",
    "Missing structuredContent and the only text is an error message: isError: true.",
    on_result=_error_flag,
)
