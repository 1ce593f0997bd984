"""Rule ``empty_structured_content``: drop ``structuredContent: {}`` on tools with no ``outputSchema``.

DESIGN section 3, rule 3. Frameworks attach an empty object to every result; on a tool that declares
no ``outputSchema`` it carries nothing, and content-preferring clients show ``{}`` instead of the
text. Dropping it loses nothing. Only applied when the proxy knows the tool (from ``tools/list``).
"""

from __future__ import annotations

from ...types import JSONObject
from .base import ResultContext, Rewrite, Rule


def _drop(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    if ctx.tool is None or ctx.tool.has_output_schema or result.get("structuredContent", None) != {}:
        return None
    out = {k: v for k, v in result.items() if k != "structuredContent"}
    return out, Rewrite(
        "empty_structured_content",
        "dropped empty structuredContent",
        ("/structuredContent",),
        "tool declares no outputSchema",
    )


RULE = Rule(
    name="empty_structured_content",
    kind="empty_structured_content",
    summary="Drop structuredContent: {} on tools that declare no outputSchema.",
    on_result=_drop,
)
