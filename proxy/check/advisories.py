"""Faults the proxy deliberately leaves alone, found for the server's authors (pure, no I/O).

Two kinds of fault make no client reject anything, so the proxy does not rewrite them by default,
yet their authors can fix them at the source:

- ``double_encoded_json``: a string inside ``structuredContent`` that holds a JSON object or array
  (``{"result": "{\\"score\\": 100}"}``): it conforms to a string schema, but every consumer must
  decode twice and the model pays for the escapes. (A ``structuredContent`` that is itself such a
  string is not an advisory: rule ``object_result`` decodes it.)
- ``summary_only_content``: ``content`` has text, but not the serialized ``structuredContent``, and
  less of it: content-only clients (claude.ai, Claude Desktop) never see all the data (a text
  longer than the JSON is taken for a deliberate rendering). The spec asks for the
  serialized JSON (a SHOULD); SEP-2200 would allow a summary, so the proxy's ``text_mirror`` only
  fills a ``content`` that has no text at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..catalog import ToolEntry
from ..errors import DecodeError
from ..jsoncodec import dumps, loads
from ..pointer import format_pointer
from ..rules.base import text_blocks
from ..types import JSON, JSONObject

_MAX_STRINGS = 10_000  # strings examined per result


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
    if isinstance(structured, dict | list):
        encoded = [path for path, value in _strings(structured) if _holds_json(value)]
        if encoded:
            found.append(
                Advisory(
                    "double_encoded_json",
                    tuple("/structuredContent" + format_pointer(path) for path in encoded[:20]),
                    "a string holds a JSON object or array (encoded twice)",
                    "none: it conforms as it is; return the object itself (and declare it in outputSchema)",
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
        if written < serialized:  # a text richer than the data is a deliberate rendering, not a loss
            found.append(
                Advisory(
                    "summary_only_content",
                    ("/content",),
                    f"content's text ({written} characters) is shorter than the serialized structuredContent"
                    f" ({serialized}) and is not it: content-only clients cannot see all the data",
                    "none by default: text_mirror fills only a content without text (SEP-2200 lets content"
                    " summarize); add a text block with the JSON for content-only clients",
                )
            )
    return found


def _strings(value: JSON) -> list[tuple[tuple[str | int, ...], str]]:
    """Every string nested in ``value`` with its path (iterative, at most ``_MAX_STRINGS``)."""
    out: list[tuple[tuple[str | int, ...], str]] = []
    stack: list[tuple[tuple[str | int, ...], JSON]] = [((), value)]
    while stack and len(out) < _MAX_STRINGS:
        path, node = stack.pop()
        if isinstance(node, str):
            out.append((path, node))
        elif isinstance(node, dict):
            stack.extend(((*path, key), child) for key, child in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend(((*path, index), child) for index, child in reversed(list(enumerate(node))))
    return out


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
