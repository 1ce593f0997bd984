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

For a host (``mcp_normalizer/hosts.toml``, issue 40) the problem reaches the model whole: a host whose
model reads ``structuredContent`` first and that validates none of it (Codex) keeps the
``structuredContent`` as the server sent it (a problem object is copied to ``_meta``, not moved; a
non-problem one is left); for any other host whose ``reads`` a source gives, the added text is
``[CODE] detail`` followed by the problem's compact JSON (within ``mirror_max_bytes``), since its
model reads the text; where the server's text says less than its ``structuredContent``
(:func:`~.text_mirror.says_less`), that block is put first, before the server's text. Clients
without a host profile get what they got before.
"""

from __future__ import annotations

import json

from ...types import JSON, JSONObject
from ...wire.jsoncodec import Codec
from ...wire.pointer import format_pointer
from ..schema import SchemaUnusable
from .base import ResultContext, Rewrite, Rule, text_blocks, with_meta
from .text_mirror import says_less

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
        if not ctx.client.needs("error_result_validated") or ctx.client.keeps_structured:
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
    keep = ctx.client.keeps_structured  # (only a problem object gets here for such a host)
    out = dict(result) if keep else {k: v for k, v in result.items() if k != "structuredContent"}
    out, key = with_meta(out, ctx.settings.problem_meta_key, problem)
    pointers = [format_pointer(("_meta", key))] if keep else ["/structuredContent", format_pointer(("_meta", key))]
    host_text = ctx.client.reads_known and not keep  # a host whose model reads the text: the whole problem
    content = out.get("content")
    blocks = list(content) if isinstance(content, list) else []
    if not texts:
        text = _problem_text(problem, ctx.settings.mirror_max_bytes, ctx.codec)
        blocks.append({"type": "text", "text": _whole(text, problem, ctx) if host_text else text})
        out["content"] = blocks
        pointers.append(f"/content/{len(blocks) - 1}")
    elif host_text and isinstance(content, list) and _says_less(texts, structured, ctx):
        text = _whole(_problem_text(problem, ctx.settings.mirror_max_bytes, ctx.codec), problem, ctx)
        blocks.insert(0, {"type": "text", "text": text})  # first: a host may parse a JSON first block
        out["content"] = blocks
        pointers.append("/content/0")
    for_clients = "" if problem_like else "error_result_validated"  # a problem object moves for every client
    if keep:
        action = "copied structuredContent to _meta problem (the host's model reads structuredContent)"
    else:
        action = "moved structuredContent to _meta problem"
    return out, Rewrite("error_problem", action, tuple(pointers), reason, for_clients=for_clients)


def _says_less(texts: list[JSONObject], structured: JSON, ctx: ResultContext) -> bool:
    """The server's text blocks carry less than its ``structuredContent`` (:func:`~.text_mirror.says_less`)."""
    compact = ctx.codec.dumps(structured)
    if len(compact) > ctx.settings.mirror_max_bytes:
        return False
    return says_less([block["text"] for block in texts], structured, compact.decode(), ctx.codec)


def _is_json(text: str) -> bool:
    """``text`` parses as JSON (what a host's transport would read as a value)."""
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _whole(text: str, problem: JSONObject, ctx: ResultContext) -> str:
    """``text`` followed by the problem's compact JSON, for a host whose model reads the text: every
    member reaches it (type, title, status and the extension members too); ``text`` alone when the
    JSON is over ``mirror_max_bytes``. The text never starts as JSON: Gemini CLI turns a first text
    block holding JSON into a ``structuredContent`` its SDK then validates (hosts.toml)."""
    if _is_json(text):
        text = f"{problem.get('title') or 'Tool error'}: {text}"
    serialized = ctx.codec.dumps(problem)
    if len(serialized) > ctx.settings.mirror_max_bytes:
        return text
    return f"{text}\n{serialized.decode()}"


RULE = Rule(
    name="error_problem",
    kind="error_result_validated",
    summary="On isError, move non-conforming or problem-shaped structuredContent to an RFC 9457 problem in _meta.",
    on_result=_repair,
)
