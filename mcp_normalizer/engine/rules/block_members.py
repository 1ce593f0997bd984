"""Content block members clients reject: ``tools/call`` repairs of one block at a time
(``cases/faults.md``, "Kinds from the late-2026 reports").

- ``resource_link_name`` (``resource_link_incomplete``): a ``resource_link`` block needs a string
  ``uri`` and a string ``name`` (MCP 2025-06-18+ schema.ts ``ResourceLink`` extends ``Resource``).
  A missing or non-string ``name`` becomes the last segment of the URI's path, percent-decoded
  (``file:///r/Q3%20report.pdf`` -> ``Q3 report.pdf``), else the URI itself. A block without a
  string ``uri`` cannot be a link: it becomes a text block saying so. Either way the original
  block is kept in the block's ``_meta["dev.mcp-normalizer/original-block"]``.
- ``annotations`` (``annotations_invalid``): a block's ``annotations`` (schema.ts ``Annotations``)
  holds ``audience``, a list of ``Role`` (``"user"``, ``"assistant"``), ``priority``, a number from
  0 to 1, and ``lastModified``, an ISO 8601 string. Roles outside ``Role`` (``"system"``) are
  dropped, a lone role string becomes a one-role list, and an ``audience`` with no role left goes;
  a ``priority`` or ``lastModified`` of the wrong type or range goes. The original annotations are
  kept in the block's ``_meta["dev.mcp-normalizer/original-annotations"]``.

All three SDK clients reject the whole result on either fault (Zod, pydantic); Codex fails the call.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from ...types import JSON, JSONObject
from .base import META_PREFIX, Rule, each_block, meta_of
from .media_data import ORIGINAL_BLOCK_KEY

ORIGINAL_ANNOTATIONS_KEY = META_PREFIX + "original-annotations"
ROLES = ("user", "assistant")


def name_of(uri: str) -> str:
    """A resource's name from its URI: the last non-empty segment of a hierarchical path,
    percent-decoded, else the URI (an opaque ``urn:isbn:...`` names itself best)."""
    try:
        path = urlsplit(uri).path
    except ValueError:  # an invalid IPv6 host ("http://[x/"): no path to read
        return uri
    if "/" not in path:
        return uri
    segment = next((s for s in reversed(path.split("/")) if s), "")
    return unquote(segment) or uri


def _link(block: JSONObject) -> tuple[JSONObject, str] | None:
    if block.get("type") != "resource_link":
        return None
    if isinstance(block.get("name"), str) and isinstance(block.get("uri"), str):
        return None
    meta = meta_of(block)
    meta.setdefault(ORIGINAL_BLOCK_KEY, block)  # a proxy in front of this one already kept it
    uri = block.get("uri")
    if not isinstance(uri, str):
        text = "[resource_link without a uri: kept in _meta]"
        return {"type": "text", "text": text, "_meta": meta}, "resource_link has no string uri"
    why = "resource_link has no name" if "name" not in block else "resource_link name is not a string"
    return {**block, "name": name_of(uri), "_meta": meta}, why


def _valid_priority(value: JSON) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1


def _annotations(block: JSONObject) -> tuple[JSONObject, str] | None:
    given = block.get("annotations")
    if not isinstance(given, dict):
        return None  # null is null_members'; another non-object is not a place this rule can mend
    out = dict(given)
    reasons = []
    audience = given.get("audience", [])
    roles = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
    kept = [role for role in roles if isinstance(role, str) and role in ROLES]
    if "audience" in given and (not isinstance(audience, list) or len(kept) != len(audience)):
        reasons.append("audience holds other than user/assistant roles" if roles else "audience is not a list")
        if kept:
            out["audience"] = kept
        else:
            del out["audience"]
    if "priority" in given and not _valid_priority(given["priority"]):
        del out["priority"]
        reasons.append("priority is not a number from 0 to 1")
    if "lastModified" in given and not isinstance(given["lastModified"], str):
        del out["lastModified"]
        reasons.append("lastModified is not a string")
    if not reasons:
        return None
    meta = meta_of(block)
    meta.setdefault(ORIGINAL_ANNOTATIONS_KEY, given)
    return {**block, "annotations": out, "_meta": meta}, "; ".join(reasons)


RESOURCE_LINK_NAME = Rule(
    name="resource_link_name",
    kind="resource_link_incomplete",
    summary="A resource_link without a string name gets the last segment of its URI (else the URI); one without "
    "a uri becomes a text block; the block kept in _meta.",
    on_result=each_block("resource_link_name", "named resource links", _link, ""),
)
ANNOTATIONS = Rule(
    name="annotations",
    kind="annotations_invalid",
    summary="Content annotations: audience roles other than user/assistant dropped (audience too when none is "
    "left), an invalid priority or lastModified dropped; originals kept in _meta.",
    on_result=each_block("annotations", "repaired content annotations", _annotations, "/annotations"),
)
