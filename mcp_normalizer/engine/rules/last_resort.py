"""Rule ``last_resort`` (off by default): a success result no rule could make conform becomes an error.

The repair ladder's last rung (``cases/faults.md``). A success result whose ``structuredContent``
still fails the advertised ``outputSchema`` (or is missing although the schema requires it) is
rejected by every strict client, and the useful content is lost with it. With this rule on, the
result becomes ``isError: true`` (clients then skip output validation and show the text): the
original ``structuredContent`` is kept in ``_meta["dev.mcp-normalizer/original-structured-content"]``
and, when ``content`` has no text, a text block with its JSON is added. Off by default because it
turns a success into an error; the proxy otherwise leaves such a result as it is and logs why.
"""

from __future__ import annotations

from ...types import JSONObject
from ..schema import SchemaUnusable
from .base import ORIGINAL_STRUCTURED_KEY, Mode, ResultContext, Rewrite, Rule, text_blocks, with_meta


def _demote(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    tool = ctx.tool
    if tool is None or tool.compiled is None or result.get("isError") is True or ctx.client.keeps_structured:
        return None  # (a host that validates nothing of structuredContent shows it as it is)
    if "structuredContent" in result:
        try:
            violations = tool.compiled.violations(result["structuredContent"], limit=1)
        except SchemaUnusable:
            return None
        if not violations:
            return None
        reason = f"structuredContent fails outputSchema at {violations[0].describe()}"
        out = {k: v for k, v in result.items() if k != "structuredContent"}
        out, _ = with_meta(out, ORIGINAL_STRUCTURED_KEY, result["structuredContent"])
        if not text_blocks(out):
            blocks = list(out.get("content") or [])
            blocks.append({"type": "text", "text": ctx.codec.dumps(result["structuredContent"]).decode()})
            out["content"] = blocks
    else:
        reason = "structuredContent is missing and the outputSchema requires one"
        out = dict(result)
    out["isError"] = True
    return out, Rewrite("last_resort", "turned an unrepairable success into an error", ("/isError",), reason)


RULE = Rule(
    "last_resort",
    "last resort (cases/faults.md rung 5)",
    "Off by default. A success result still not conforming becomes isError: true, the original kept in _meta.",
    default=Mode.OFF,
    on_result=_demote,
)
