"""Rule ``error_problem``: an error's ``structuredContent`` moves to an RFC 9457 problem in ``_meta``.

Fault kind ``error_result_validated`` (DESIGN section 3, rule 1; the Protean contract). The TS SDK
1.x client validates ``structuredContent`` against the success ``outputSchema`` even when
``isError`` is true (typescript-sdk#1943) and then throws "Structured content does not match the
tool's output schema", hiding the real error. On ``isError: true``, a ``structuredContent`` that does
not conform to the tool's ``outputSchema``, or that is an RFC 9457 problem object, is removed and
carried under ``_meta[<problem key>]``: as is when it is a problem object, wrapped in one otherwise.
A non-conforming one that is not a problem object is left to clients known not to validate errors
(:mod:`mcp_normalizer.engine.rules.clients`): the Python SDK client shows it as the server sent it.
The error stays readable: when ``content`` has no text, a ``[CODE] detail`` text block is added.
"""

from __future__ import annotations

from ...types import JSON, JSONObject
from ...wire.jsoncodec import Codec
from ...wire.pointer import format_pointer
from ..schema import SchemaUnusable
from .base import ResultContext, Rewrite, Rule, text_blocks, with_meta

#: RFC 9457 section 3.1 members and their JSON types.
_PROBLEM_MEMBERS: dict[str, type | tuple[type, ...]] = {
    "type": str,
    "title": str,
    "status": int,
    "detail": str,
    "instance": str,
}
#: ``type`` of the problem that wraps a non-problem ``structuredContent``.
WRAPPED_PROBLEM_TYPE = "urn:mcp-normalizer:problem:tool-error"


def is_problem(value: JSON) -> bool:
    """True when ``value`` looks like an RFC 9457 problem details object.

    At least two of ``type``, ``title``, ``status``, ``detail``, ``instance`` must be present with
    their RFC 9457 JSON types, one of them ``title`` or ``detail``, and none of them mistyped.
    """
    if not isinstance(value, dict):
        return False
    present = 0
    for name, kind in _PROBLEM_MEMBERS.items():
        if name in value:
            member = value[name]
            if not isinstance(member, kind) or isinstance(member, bool):
                return False
            present += 1
    return present >= 2 and ("title" in value or "detail" in value)


def _problem_text(problem: JSONObject, limit: int, codec: Codec) -> str:
    """The text block for a problem: ``[code] detail``; for a wrapped ``structuredContent`` with no
    text, its compact JSON (up to ``limit`` bytes), which says more than the title."""
    code = problem.get("code")
    message = problem.get("detail") or problem.get("title")
    if problem.get("type") == WRAPPED_PROBLEM_TYPE and "detail" not in problem:
        serialized = codec.dumps(problem.get("structuredContent"))
        if len(serialized) <= limit:
            message = f"{problem.get('title')}: {serialized.decode()}"
    if not isinstance(message, str):
        message = codec.dumps(problem.get("structuredContent", problem)).decode()
    if isinstance(code, str | int) and not isinstance(code, bool) and str(code):
        return f"[{code}] {message}"
    return message


def _repair(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    if result.get("isError") is not True or "structuredContent" not in result:
        return None
    structured = result["structuredContent"]
    problem_like = is_problem(structured)
    reason = "structuredContent is an RFC 9457 problem object"
    if not problem_like:
        if not ctx.client.needs("error_result_validated"):
            return None  # a client known not to validate errors: it gets the server's structuredContent
        compiled = ctx.tool.compiled if ctx.tool is not None else None
        if compiled is None:
            return None  # no schema to break: strict clients accept it
        try:
            violations = compiled.violations(structured, limit=1)
        except SchemaUnusable:
            return None
        if not violations:
            return None
        reason = f"structuredContent fails outputSchema at {violations[0].describe()}"

    texts = text_blocks(result)
    if problem_like:
        problem: JSONObject = structured
    else:
        problem = {"type": WRAPPED_PROBLEM_TYPE, "title": "Tool error"}
        if texts:
            problem["detail"] = texts[0]["text"]
        problem["structuredContent"] = structured
    out = {k: v for k, v in result.items() if k != "structuredContent"}
    out, key = with_meta(out, ctx.settings.problem_meta_key, problem)
    pointers = ["/structuredContent", format_pointer(("_meta", key))]
    if not texts:
        content = out.get("content")
        blocks = list(content) if isinstance(content, list) else []
        blocks.append({"type": "text", "text": _problem_text(problem, ctx.settings.mirror_max_bytes, ctx.codec)})
        out["content"] = blocks
        pointers.append(f"/content/{len(blocks) - 1}")
    for_clients = "" if problem_like else "error_result_validated"  # a problem object moves for every client
    return out, Rewrite(
        "error_problem", "moved structuredContent to _meta problem", tuple(pointers), reason, for_clients=for_clients
    )


RULE = Rule(
    name="error_problem",
    kind="error_result_validated",
    summary="On isError, move non-conforming or problem-shaped structuredContent to an RFC 9457 problem in _meta.",
    on_result=_repair,
)
