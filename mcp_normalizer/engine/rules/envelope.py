"""Rule ``null_members``: optional members serialized as ``null``.

Fault kind ``null_optional_fields`` (``cases/faults.md``): servers built on serializers that write
absent optionals as ``null`` (``_meta: null``, ``annotations: null``). The TS SDK's result schema
rejects the whole result. ``null`` and absence carry the same information for these members, so the
member is dropped. A ``content: null`` becomes ``[]`` (``content`` is required in every era).
``structuredContent: null`` is dropped only before 2026-07-28, where it is not a valid value; from
2026-07-28 on it is a JSON value like any other (SEP-2106).
"""

from __future__ import annotations

from ...types import JSONObject
from ...wire.eras import era_of
from ...wire.pointer import format_pointer
from .base import ResultContext, Rewrite, Rule

#: Optional ``CallToolResult`` members whose ``null`` means "absent" in every era.
_RESULT_OPTIONALS = ("_meta", "isError")
#: Content block members that are never meaningful as ``null``.
_BLOCK_REQUIRED = frozenset({"type"})


def _repair(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    touched: list[str] = []
    out = result
    for name in _RESULT_OPTIONALS:
        if name in out and out[name] is None:
            out = {k: v for k, v in out.items() if k != name}
            touched.append(format_pointer((name,)))
    if "structuredContent" in out and out["structuredContent"] is None and not era_of(ctx.era).structured_any:
        out = {k: v for k, v in out.items() if k != "structuredContent"}
        touched.append("/structuredContent")
    if "content" in out and out["content"] is None:
        out = {**out, "content": []}
        touched.append("/content")
    content = out.get("content")
    if isinstance(content, list):
        blocks = list(content)
        for i, block in enumerate(content):
            nulls = (
                [k for k, v in block.items() if v is None and k not in _BLOCK_REQUIRED]
                if isinstance(block, dict)
                else []
            )
            if nulls:
                blocks[i] = {k: v for k, v in block.items() if k not in nulls}
                touched.extend(format_pointer(("content", i, k)) for k in nulls)
                out = {**out, "content": blocks}
    if not touched:
        return None
    return out, Rewrite("null_members", "dropped null optional members", tuple(touched), "optional member is null")


RULE = Rule(
    name="null_members",
    kind="null_optional_fields",
    summary="Drop optional members serialized as null (_meta, isError, annotations; content: null becomes []).",
    on_result=_repair,
)
