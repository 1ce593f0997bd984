"""Object roots for the eras that require them (fault kinds ``non_object_output_schema`` and
``non_object_structured_content``; ``wrapped_result`` for results of such tools).

Before 2026-07-28 an ``outputSchema`` must have ``type: "object"`` at its root and
``structuredContent`` must be a JSON object; the TS SDK rejects the whole ``tools/list`` for one
tool that breaks this, and every result with an array or string ``structuredContent``. From
2026-07-28 on any schema and any JSON value are allowed (SEP-2106), and these rules do nothing.

- ``object_root`` (``tools/list``): an ``anyOf``/``oneOf``/``allOf`` root whose branches are all
  objects, or a root with no ``type``, gets ``type: "object"`` (same meaning for object results). A
  root that admits non-objects is wrapped as ``{type: object, properties: {result: <root>},
  required: [result]}`` (FastMCP's ``x-fastmcp-wrap-result`` convention, plus the proxy's own marker).
- ``wrap_result`` (``tools/call``): the results of a tool the proxy wrapped get
  ``structuredContent: {result: <value>}``; a tool with no ``outputSchema`` whose
  ``structuredContent`` is an array or scalar gets the same wrap, and a string holding a JSON
  object (double encoding) is decoded. Nothing is lost: the value moves one level down.
"""

from __future__ import annotations

from ..errors import DecodeError
from ..jsoncodec import loads
from ..jsonrpc import object_only
from ..types import JSON, JSONObject
from .base import ResultContext, Rewrite, Rule, ToolContext, with_original_values
from .schemas import resolve_local_ref

#: Marks an ``outputSchema`` the proxy wrapped; results of that tool are wrapped to match.
WRAP_MARK = "x-mcp-normalizer-wrapped"
_ROOT_ONLY = ("$schema", "$id", "$defs", "definitions", "$anchor")


def _objects_only(node: JSON, root: JSON, depth: int = 0) -> bool:
    """True when ``node`` admits only objects."""
    if not isinstance(node, dict) or depth > 16:
        return False
    if node.get("type") == "object":
        return True
    ref = node.get("$ref")
    if isinstance(ref, str) and _objects_only(resolve_local_ref(root, ref), root, depth + 1):
        return True
    if isinstance(node.get("allOf"), list) and any(_objects_only(b, root, depth + 1) for b in node["allOf"]):
        return True
    for keyword in ("anyOf", "oneOf"):
        branches = node.get(keyword)
        if isinstance(branches, list) and branches and all(_objects_only(b, root, depth + 1) for b in branches):
            return True
    return False


def _admits_non_objects(node: JSONObject, root: JSON) -> bool:
    kind = node.get("type")
    if isinstance(kind, str):
        return kind != "object"
    if isinstance(kind, list):
        return kind != ["object"]
    for keyword in ("anyOf", "oneOf"):
        branches = node.get(keyword)
        if isinstance(branches, list) and not all(_objects_only(b, root) for b in branches):
            return True
    return False


def _object_root(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    schema = tool.get("outputSchema")
    if not object_only(ctx.era) or not isinstance(schema, dict) or schema.get("type") == "object":
        return None
    if _objects_only(schema, schema) or not _admits_non_objects(schema, schema):
        fixed = {"type": "object", **{k: v for k, v in schema.items() if k != "type"}}
        reason = "the root admits only objects but does not say type: object"
        return {**tool, "outputSchema": fixed}, Rewrite(
            "object_root", "added type: object at the outputSchema root", ("/outputSchema/type",), reason
        )
    inner = {k: v for k, v in schema.items() if k not in _ROOT_ONLY}
    wrapped: JSONObject = {k: v for k, v in schema.items() if k in _ROOT_ONLY}
    wrapped.update(
        {
            "type": "object",
            "properties": {"result": inner},
            "required": ["result"],
            "x-fastmcp-wrap-result": True,
            WRAP_MARK: True,
        }
    )
    reason = f"era {ctx.era or 'legacy'} requires an object root; the schema admits non-objects"
    return {**tool, "outputSchema": wrapped}, Rewrite(
        "object_root", "wrapped the outputSchema as {result: ...}", ("/outputSchema",), reason
    )


def _wrap_result(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    if not object_only(ctx.era) or "structuredContent" not in result:
        return None
    value = result["structuredContent"]
    schema = ctx.tool.output_schema if ctx.tool is not None else None
    if isinstance(schema, dict) and schema.get(WRAP_MARK) is True:
        action, reason = "wrapped structuredContent as {result: ...}", "the proxy advertised a wrapped outputSchema"
        return {**result, "structuredContent": {"result": value}}, Rewrite(
            "wrap_result", action, ("/structuredContent",), reason
        )
    if schema is not None or ctx.tool is None or isinstance(value, dict) or value is None:
        return None
    if isinstance(value, str):
        try:
            decoded = loads(value)
        except DecodeError:
            decoded = None
        if isinstance(decoded, dict):
            reason = "structuredContent was a string holding a JSON object (double encoded)"
            return {**result, "structuredContent": decoded}, Rewrite(
                "wrap_result", "decoded the JSON string in structuredContent", ("/structuredContent",), reason
            )
    reason = f"era {ctx.era or 'legacy'} requires an object; got {type(value).__name__}"
    return {**result, "structuredContent": {"result": value}}, Rewrite(
        "wrap_result", "wrapped structuredContent as {result: ...}", ("/structuredContent",), reason
    )


def _rewrap(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    """A wrap-result tool whose result came re-enveloped (``{ok, status, data}`` instead of
    ``{result}``, as some middlewares do): the one member that conforms to ``result`` becomes it."""
    tool = ctx.tool
    schema = tool.output_schema if tool is not None else None
    value = result.get("structuredContent")
    if tool is None or tool.compiled is None or result.get("isError") is True or not isinstance(schema, dict):
        return None
    wraps = schema.get("x-fastmcp-wrap-result") is True or schema.get(WRAP_MARK) is True
    inner = schema.get("properties", {}).get("result") if isinstance(schema.get("properties"), dict) else None
    if not wraps or inner is None or not isinstance(value, dict) or "result" in value:
        return None
    fits = [key for key, member in value.items() if tool.compiled.is_valid({"result": member})]
    if len(fits) != 1:
        return None  # none, or ambiguous
    key = fits[0]
    others = {f"/{k}": v for k, v in value.items() if k != key}
    out = with_original_values({**result, "structuredContent": {"result": value[key]}}, others)
    return out, Rewrite(
        "rewrap_result",
        "re-wrapped an enveloped result as {result: ...}",
        ("/structuredContent",),
        f"wrap-result schema; member {key!r} is the result, the other members are kept in _meta",
    )


OBJECT_ROOT = Rule(
    "object_root",
    "non_object_output_schema",
    "Before 2026-07-28: type: object on object-only roots; other roots wrapped as {result: <schema>}.",
    on_tool=_object_root,
)
REWRAP_RESULT = Rule(
    "rewrap_result",
    "wrapped_result",
    "A wrap-result tool's result re-enveloped as {ok, status, data}: the one member that fits becomes {result}.",
    on_result=_rewrap,
    conformance=True,
)
WRAP_RESULT = Rule(
    "wrap_result",
    "non_object_structured_content",
    "Before 2026-07-28: wrap results of wrapped tools, and array/scalar structuredContent, as {result: ...}.",
    on_result=_wrap_result,
)
