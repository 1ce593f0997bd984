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
- ``wrap_result`` (``tools/call``, conformance group): the results of a tool the proxy wrapped get
  ``structuredContent: {result: <value>}`` (kept only if the result then conforms).
- ``object_result`` (``tools/call``): a tool with no ``outputSchema`` whose ``structuredContent`` is
  an array or scalar gets the same wrap, and a string holding a JSON object (double encoding) is
  decoded (the string kept in ``_meta``). Nothing is lost: the value moves one level down.
"""

from __future__ import annotations

from ...errors import DecodeError
from ...types import JSON, JSONObject
from ...wire.eras import era_of
from ...wire.pointer import Path
from .base import ResultContext, Rewrite, Rule, ToolContext, with_original_values
from .clients import ClientProfile
from .host_faults import STRUCTURED_NOT_OBJECT
from .schemas import map_schema, resolve_local_ref

#: Marks an ``outputSchema`` the proxy wrapped; results of that tool are wrapped to match.
WRAP_MARK = "x-mcp-normalizer-wrapped"
_ROOT_ONLY = ("$schema", "$id", "$defs", "definitions")


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


def _accepts_objects(node: JSON, root: JSON, depth: int = 0) -> bool:
    """False when ``node`` rejects every object (adding ``type: object`` would make it unsatisfiable)."""
    if node is False:
        return False
    if not isinstance(node, dict) or depth > 16:
        return True
    kind = node.get("type")
    if isinstance(kind, str) and kind != "object" or isinstance(kind, list) and "object" not in kind:
        return False
    if isinstance(node.get("enum"), list) and not any(isinstance(v, dict) for v in node["enum"]):
        return False
    if "const" in node and not isinstance(node["const"], dict):
        return False
    if "not" in node and (node["not"] in ({}, True) or _objects_only(node["not"], root, depth + 1)):
        return False
    ref = node.get("$ref")
    if isinstance(ref, str) and not _accepts_objects(resolve_local_ref(root, ref), root, depth + 1):
        return False
    if isinstance(node.get("allOf"), list) and not all(_accepts_objects(b, root, depth + 1) for b in node["allOf"]):
        return False
    for keyword in ("anyOf", "oneOf"):
        branches = node.get(keyword)
        if isinstance(branches, list) and branches and not any(_accepts_objects(b, root, depth + 1) for b in branches):
            return False
    return True


def _admits_non_objects(node: JSONObject, root: JSON) -> bool:
    """True when ``node`` may describe a non-object result (``null`` aside: a legacy null is dropped)."""
    kind = node.get("type")
    if isinstance(kind, str):
        return kind not in ("object", "null")
    if isinstance(kind, list):
        return any(k not in ("object", "null") for k in kind)
    for keyword in ("anyOf", "oneOf"):
        branches = node.get(keyword)
        if isinstance(branches, list) and not all(_objects_only(b, root) for b in branches):
            return True
    return False


def _rerooted(ref: str) -> str:
    """A ``$ref`` of the old root as seen from the wrapper (``#`` is now ``#/properties/result``)."""
    if ref == "#":
        return "#/properties/result"
    if ref.startswith("#/") and not ref.startswith(("#/$defs/", "#/definitions/")):
        return "#/properties/result" + ref[1:]
    return ref


def _reroot(schema: JSON) -> JSON:
    def fix(node: JSONObject, path: Path) -> JSON:
        ref = node.get("$ref")
        return {**node, "$ref": _rerooted(ref)} if isinstance(ref, str) and _rerooted(ref) != ref else node

    return map_schema(schema, fix)[0]


def objects_required(era: str | None, client: ClientProfile) -> bool:
    """Whether ``structuredContent`` must be a JSON object for ``client``: before 2026-07-28 for
    everyone, and in every era for a host that refuses anything else (Claude Code, host fault
    ``structured_content_not_object``: :mod:`~mcp_normalizer.engine.rules.host_faults`)."""
    return not era_of(era).structured_any or client.host_needs(STRUCTURED_NOT_OBJECT)


def _why(era: str | None, client: ClientProfile) -> str:
    if not era_of(era).structured_any or client.host is None:
        return f"era {era or 'legacy'} requires an object"
    source = client.host.faults.get(STRUCTURED_NOT_OBJECT, "")
    return f"{client.host.title} refuses a structuredContent that is not an object ({source})"


def _object_root(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    schema = tool.get("outputSchema")
    if not objects_required(ctx.era, ctx.client) or not isinstance(schema, dict) or schema.get("type") == "object":
        return None
    objects = _objects_only(schema, schema)
    if objects or (_accepts_objects(schema, schema) and not _admits_non_objects(schema, schema)):
        fixed = {"type": "object", **{k: v for k, v in schema.items() if k != "type"}}
        reason = "the root admits only objects but does not say type: object"
        return {**tool, "outputSchema": fixed}, Rewrite(
            "object_root", "added type: object at the outputSchema root", ("/outputSchema/type",), reason
        )
    inner = _reroot({k: v for k, v in schema.items() if k not in _ROOT_ONLY})
    wrapped: JSONObject = {k: _reroot(v) for k, v in schema.items() if k in _ROOT_ONLY}
    wrapped.update(
        {
            "type": "object",
            "properties": {"result": inner},
            "required": ["result"],
            "x-fastmcp-wrap-result": True,
            WRAP_MARK: True,
        }
    )
    reason = f"{_why(ctx.era, ctx.client)} root; the schema admits non-objects"
    return {**tool, "outputSchema": wrapped}, Rewrite(
        "object_root", "wrapped the outputSchema as {result: ...}", ("/outputSchema",), reason
    )


def _wrap_result(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    """A result of a tool whose schema the proxy wrapped (conformance group: kept only if it then conforms)."""
    schema = ctx.tool.output_schema if ctx.tool is not None else None
    if not objects_required(ctx.era, ctx.client) or "structuredContent" not in result:
        return None
    if not isinstance(schema, dict) or schema.get(WRAP_MARK) is not True:
        return None
    return {**result, "structuredContent": {"result": result["structuredContent"]}}, Rewrite(
        "wrap_result",
        "wrapped structuredContent as {result: ...}",
        ("/structuredContent",),
        "the proxy wrapped the outputSchema",
    )


def _object_result(result: JSONObject, ctx: ResultContext) -> tuple[JSONObject, Rewrite] | None:
    """A non-object ``structuredContent`` of a tool with no outputSchema, before 2026-07-28."""
    if not objects_required(ctx.era, ctx.client) or "structuredContent" not in result or ctx.tool is None:
        return None
    value = result["structuredContent"]
    if ctx.tool.output_schema is not None or isinstance(value, dict) or value is None:
        return None
    if isinstance(value, str):
        try:
            decoded = ctx.codec.loads(value)
        except DecodeError:
            decoded = None
        if isinstance(decoded, dict):
            reason = "structuredContent was a string holding a JSON object (double encoded)"
            out = with_original_values({**result, "structuredContent": decoded}, {"": value})
            return out, Rewrite(
                "object_result", "decoded the JSON string in structuredContent", ("/structuredContent",), reason
            )
    reason = f"{_why(ctx.era, ctx.client)}; got {type(value).__name__}"
    return {**result, "structuredContent": {"result": value}}, Rewrite(
        "object_result", "wrapped structuredContent as {result: ...}", ("/structuredContent",), reason
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
    "Before 2026-07-28: results of a tool whose outputSchema the proxy wrapped become {result: ...}.",
    on_result=_wrap_result,
    conformance=True,
)
OBJECT_RESULT = Rule(
    "object_result",
    "non_object_structured_content",
    "Before 2026-07-28, no outputSchema: array/scalar structuredContent wrapped as {result}; JSON strings decoded.",
    on_result=_object_result,
)
