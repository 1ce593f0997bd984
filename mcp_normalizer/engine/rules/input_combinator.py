"""Rule ``input_combinator``: an ``inputSchema`` whose root is ``anyOf``/``oneOf``/``allOf`` of objects.

Fault kind ``input_schema_root_combinator`` (``cases/faults.md``, "Kinds from the 2026 reports";
anthropics/claude-code#88049, makenotion/notion-mcp-server#340, zereight/gitlab-mcp#550): Zod and
Pydantic write a union of argument shapes as a root combinator. The TS SDK client rejects the whole
``tools/list`` when the root has no ``type: "object"``, and the Anthropic and OpenAI tool APIs
reject any root combinator (a 400 on every turn of the session).

When every arm is an object schema, the root becomes ``type: "object"`` with the arms' properties
merged into its own: a property named by several arms with different schemas is their ``anyOf``;
required are the root's own and, for ``allOf``, every arm's, for ``anyOf``/``oneOf`` those every arm
requires. The combinator is removed and kept whole in the tool's
``_meta["dev.mcp-normalizer/input-schema-combinator"]``. A client builds arguments from a schema
that admits every argument set the original did; the upstream still validates what it receives.
A root with an arm that is not an object schema is left as it is.
"""

from __future__ import annotations

from typing import Any

from ...types import JSON, JSONObject
from .base import META_PREFIX, Rewrite, Rule, ToolContext, meta_of

COMBINATOR_KEY = META_PREFIX + "input-schema-combinator"
_COMBINATORS = ("anyOf", "oneOf", "allOf")


def _object_arm(arm: JSON) -> bool:
    """An arm the merge can read: an object schema whose ``properties``, when present, is an object."""
    if not isinstance(arm, dict) or ("properties" in arm and not isinstance(arm["properties"], dict)):
        return False
    kind = arm.get("type")
    return kind == "object" or (kind is None and isinstance(arm.get("properties"), dict))


def _names(required: JSON) -> list[str]:
    """The property names of a ``required`` keyword (anything but a list of strings names none)."""
    return [name for name in required if isinstance(name, str)] if isinstance(required, list) else []


def _merge(properties: dict[str, Any], name: str, schema: Any) -> None:
    if name not in properties:
        properties[name] = schema
    elif properties[name] != schema:
        found = properties[name]
        arms = found["anyOf"] if isinstance(found, dict) and set(found) == {"anyOf"} else [found]
        if schema not in arms:
            properties[name] = {"anyOf": [*arms, schema]}


def _repair(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        return None
    present = [keyword for keyword in _COMBINATORS if keyword in schema]
    if not present or not all(
        isinstance(schema[k], list) and schema[k] and all(map(_object_arm, schema[k])) for k in present
    ):
        return None
    own = schema.get("properties")
    properties: dict[str, Any] = dict(own) if isinstance(own, dict) else {}
    required: list[str] = _names(schema.get("required"))
    for keyword in present:
        arms: list[JSONObject] = schema[keyword]
        needed: list[set[str]] = []
        for arm in arms:
            arm_properties = arm.get("properties")
            for name, sub in arm_properties.items() if isinstance(arm_properties, dict) else ():
                _merge(properties, name, sub)
            needed.append(set(_names(arm.get("required"))))
        common = set.union(*needed) if keyword == "allOf" else set.intersection(*needed)
        required += sorted(common - set(required))
    out: JSONObject = {k: v for k, v in schema.items() if k not in _COMBINATORS}
    out["type"] = "object"
    out["properties"] = properties
    if required:
        out["required"] = required
    else:
        out.pop("required", None)
    meta = meta_of(tool)
    meta[COMBINATOR_KEY] = {keyword: schema[keyword] for keyword in present}
    pointers = tuple(f"/inputSchema/{keyword}" for keyword in present)
    reason = "tool APIs and the TS SDK client reject a root combinator in inputSchema"
    return {**tool, "inputSchema": out, "_meta": meta}, Rewrite(
        "input_combinator", "merged the root combinator's object arms into one object schema", pointers, reason
    )


RULE = Rule(
    name="input_combinator",
    kind="input_schema_root_combinator",
    summary="An inputSchema root anyOf/oneOf/allOf of objects becomes one object schema (arms' properties "
    "merged), the combinator kept in the tool's _meta.",
    on_tool=_repair,
    tool_gate=lambda scan, ctx: scan.has(b'anyOf":', b'oneOf":', b'allOf":'),
)
