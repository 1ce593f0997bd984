"""Rule ``output_member``: a result that carries its text outside ``content``.

Fault kind ``result_output_field`` (``cases/faults.md``, "Kinds from the late-2026 reports"):
servers written against other tool protocols answer ``{"output": "..."}`` (or ``result``, or
``text``) and no ``content``. ``content`` is required in every era (MCP schema.ts
``CallToolResult``); content-only hosts show nothing, and the bare ``content: []`` that
``content_blocks`` would add keeps the answer invisible. When ``content`` is missing, the first of
``output``, ``result``, ``text`` that is present and not ``null`` becomes one text block: a string
as it is, any other value as its JSON (numbers keep their spelling). The member itself stays.
"""

from __future__ import annotations

from ...types import JSONObject
from .base import ResultContext, Rewrite, Rule

#: The members servers put their text in, in the order they are read.
MEMBERS = ("output", "result", "text")


def _repair(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    if "content" in result or "toolResult" in result:  # the legacy wrapper is content_blocks'
        return None
    name = next((m for m in MEMBERS if result.get(m) is not None), None)
    if name is None:
        return None
    value = result[name]
    text = value if isinstance(value, str) else ctx.codec.dumps(value).decode()
    reason = f"content is missing and the result's text is in {name!r}"
    out = {**result, "content": [{"type": "text", "text": text}]}
    return out, Rewrite("output_member", f"copied {name} into a text block", ("/content",), reason)


RULE = Rule(
    name="output_member",
    kind="result_output_field",
    summary="A result with no content whose text is in an output, result or text member gets a text block with "
    "it (the member kept).",
    on_result=_repair,
)
