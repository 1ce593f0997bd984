"""Faults the proxy deliberately leaves alone, found for the server's authors (pure, no I/O).

Two kinds of fault make no client reject anything, so the proxy does not rewrite them by default,
yet their authors can fix them at the source:

- ``double_encoded_json``: a FastMCP wrap-result tool (``x-fastmcp-wrap-result``) whose
  ``{"result": ...}`` is a string holding a JSON object or array: the tool returned
  ``json.dumps(...)``. It conforms to the string schema, but every consumer must decode twice and
  the model pays for the escapes. Other strings that hold JSON (a file's content) are data, not a
  fault. (A ``structuredContent`` that is itself such a string is not an advisory: rule
  ``object_result`` decodes it.)
- ``summary_only_content``: ``content`` has text, but not the serialized ``structuredContent``: less
  of it, and some value of ``structuredContent`` is written nowhere in it. Content-only clients
  (claude.ai, Claude Desktop) never see that data. (A text longer than the JSON is taken for a
  deliberate rendering; a text that holds every value loses nothing.) The spec asks for the
  serialized JSON (a SHOULD); SEP-2200 would allow a summary, so the proxy's ``text_mirror`` only
  fills a ``content`` that has no text at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.catalog import ToolEntry
from ..engine.rules.base import text_blocks
from ..errors import DecodeError
from ..types import JSON, JSONObject
from ..wire.jsoncodec import dumps, loads


@dataclass(frozen=True, slots=True)
class Advisory:
    """A fault no rule repairs by default.

    Attributes:
        name: ``double_encoded_json`` or ``summary_only_content`` (also the fault kind's key).
        pointers: where, as JSON pointers into the result.
        reason: what is wrong (no payload value).
        repair: what the proxy does about it (nothing, and why).
    """

    name: str
    pointers: tuple[str, ...]
    reason: str
    repair: str


def advisories(result: JSONObject, entry: ToolEntry | None) -> list[Advisory]:
    """The advisories of one ``CallToolResult`` (``[]`` for error results and results without
    ``structuredContent``)."""
    if result.get("isError") is True or "structuredContent" not in result:
        return []
    structured = result["structuredContent"]
    found: list[Advisory] = []
    schema = entry.output_schema if entry is not None else None
    wraps = isinstance(schema, dict) and schema.get("x-fastmcp-wrap-result") is True
    inner = structured.get("result") if isinstance(structured, dict) else None
    if wraps and isinstance(inner, str) and _holds_json(inner):
        found.append(
            Advisory(
                "double_encoded_json",
                ("/structuredContent/result",),
                "the tool returns a string holding JSON, which FastMCP wraps as {result: <string>}",
                "none: it conforms as it is; return the object itself (the tool's return type) so that it is"
                " structured",
            )
        )
    texts = text_blocks(result)
    ui_tool = entry is not None and entry.ui_resource_uri is not None
    if (
        texts
        and structured not in (None, {})
        and not ui_tool
        and not any(_decodes_to(b["text"], structured) for b in texts)
    ):
        written, serialized = sum(len(block["text"]) for block in texts), len(dumps(structured))
        # A text longer than the data is a deliberate rendering, and one that holds every value
        # (a file's content, next to {"content": ...}) loses nothing: neither is a summary.
        if written < serialized and not _all_values_in(structured, [block["text"] for block in texts]):
            found.append(
                Advisory(
                    "summary_only_content",
                    ("/content",),
                    f"content's text ({written} characters) is shorter than the serialized structuredContent"
                    f" ({serialized}) and leaves values out: content-only clients cannot see all the data",
                    "none by default: text_mirror fills only a content without text (SEP-2200 lets content"
                    " summarize); add a text block with the JSON for content-only clients",
                )
            )
    return found


def _all_values_in(value: JSON, texts: list[str]) -> bool:
    """Whether every scalar in ``value`` (at most 1,000 of them) is written in one of ``texts``."""
    stack, seen = [value], 0
    while stack and seen < 1000:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif node is not None:
            seen += 1
            token = node if isinstance(node, str) else dumps(node).decode()
            if not any(token in text for text in texts):
                return False
    return True


def _holds_json(text: str) -> bool:
    stripped = text.strip()
    if len(stripped) < 2 or stripped[0] not in "{[":
        return False
    try:
        return isinstance(loads(stripped), dict | list)
    except DecodeError:
        return False


def _decodes_to(text: str, value: JSON) -> bool:
    try:
        return bool(loads(text) == value)
    except DecodeError:
        return False
