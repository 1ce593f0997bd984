"""Boolean schemas where clients want object schemas: ``tools/list`` repairs that keep what every
schema accepts (``cases/faults.md``, "Kinds from the late-2026 reports").

JSON Schema lets ``true`` (anything) and ``false`` (nothing) stand for any subschema. Many MCP
clients do not: the TS SDK 1.x client's tool schema wants every root ``properties`` value to be an
object and refuses the whole list otherwise; older Python SDKs crash walking the schema; draft-07
validators read 2020-12 tuples wrongly.

- ``boolean_subschema`` (``boolean_subschema``): at any depth of ``inputSchema`` and
  ``outputSchema``, a boolean where an object schema usually stands (a ``properties`` /
  ``patternProperties`` / ``$defs`` / ``dependentSchemas`` value, an ``allOf``/``anyOf``/``oneOf``/
  ``prefixItems`` entry, ``items``, ``not``, ``if``/``then``/``else``, ``contains``,
  ``propertyNames``) becomes its object spelling: ``true`` -> ``{}``, ``false`` -> ``{"not": {}}``.
  The same values are valid before and after. Booleans under ``additionalProperties``,
  ``unevaluatedProperties``, ``additionalItems`` and ``unevaluatedItems`` stay: they are the
  idiomatic spelling there (zod emits ``additionalProperties: false`` on every object) and every
  client reads them. A root ``outputSchema`` that is a boolean is ``schema_shape``'s (dropped,
  kept in ``_meta``). Originals are kept in the tool's ``_meta["dev.mcp-normalizer/original-keywords"]``.
- ``schema_tuple`` (``output_schema_tuple``): a 2020-12 tuple closed with ``items: false`` beside
  ``prefixItems``. A draft-07 validator (the TS SDK 1.x client's Ajv, Cursor) ignores
  ``prefixItems`` and reads ``items: false`` as "no item is valid", so every result with a
  non-empty array fails ("boolean schema is false"). The closing ``items: false`` is dropped (the
  draft-07 spelling, ``items: [...]``, is invalid 2020-12, which other clients enforce): the schema
  then also accepts longer arrays, and rejects no value it accepted. For clients not known to read
  2020-12 tuples (:data:`mcp_normalizer.engine.rules.clients.CLIENT_FAULTS` ``output_schema_tuple``);
  the original kept as above.
"""

from __future__ import annotations

from ...types import JSON, JSONObject
from ...wire.pointer import Path, format_pointer
from .base import Rewrite, Rule, ToolContext
from .host_faults import ARRAY_ITEMS
from .scan import ToolScan
from .schemas import repair_tool_schemas, tool_subschemas

#: Keywords whose value is one subschema that clients want as an object when it is a boolean.
_ONE = ("items", "not", "if", "then", "else", "contains", "propertyNames")
#: Keywords whose value is a map of subschemas.
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
#: Keywords whose value is a list of subschemas.
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems")
#: Every keyword above: a node holding none of them is passed over in one C call.
_KEYWORDS = frozenset((*_ONE, *_MAP, *_LIST))


def _spelled(value: bool) -> JSONObject:
    """The object schema that accepts what ``value`` (a boolean schema) accepts."""
    return {} if value else {"not": {}}


class _Objects:
    """The walk of one schema: replaces boolean subschemas, records each original by pointer."""

    __slots__ = ("base", "kept")

    def __init__(self, base: str) -> None:
        self.base = base
        self.kept: dict[str, JSON] = {}

    def fix(self, node: JSONObject, path: Path) -> JSON:
        if _KEYWORDS.isdisjoint(node):
            return node
        out: JSONObject | None = None
        for key in _ONE:
            value = node.get(key)
            if isinstance(value, bool) and not (key == "items" and "prefixItems" in node):
                out = out if out is not None else dict(node)
                out[key] = self._replace(value, (*path, key))
        for key in _MAP:
            members = node.get(key)
            if isinstance(members, dict) and any(isinstance(v, bool) for v in members.values()):
                out = out if out is not None else dict(node)
                out[key] = {
                    name: self._replace(v, (*path, key, name)) if isinstance(v, bool) else v
                    for name, v in members.items()
                }
        for key in _LIST:
            entries = node.get(key)
            if isinstance(entries, list) and any(isinstance(v, bool) for v in entries):
                out = out if out is not None else dict(node)
                out[key] = [
                    self._replace(v, (*path, key, i)) if isinstance(v, bool) else v for i, v in enumerate(entries)
                ]
        return out if out is not None else node

    def _replace(self, value: bool, path: Path) -> JSONObject:
        self.kept[self.base + format_pointer(path)] = value
        return _spelled(value)


def _fix_booleans(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    out, kept = repair_tool_schemas(tool, _Objects)
    if not kept:
        return None
    reason = "a boolean schema where clients read an object schema (true -> {}, false -> {not: {}}: same values)"
    return out, Rewrite("boolean_subschema", "spelled boolean subschemas as objects", tuple(kept), reason)


class _Tuples:
    """The walk of one schema: drops each tuple's closing ``items: false``, records it by pointer."""

    __slots__ = ("base", "kept", "skip")

    def __init__(self, base: str, skip: bool = False) -> None:
        self.base = base
        self.kept: dict[str, JSON] = {}
        self.skip = skip

    def fix(self, node: JSONObject, path: Path) -> JSON:
        if self.skip or node.get("items") is not False or not isinstance(node.get("prefixItems"), list):
            return node
        self.kept[self.base + format_pointer((*path, "items"))] = False
        return {k: v for k, v in node.items() if k != "items"}


def _fix_tuples(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    if not ctx.client.needs("output_schema_tuple"):
        return None
    # A host that refuses an array without items (the OpenAI families, VS Code) gets its inputSchema's
    # closed tuples from rule host_schemas, with an items it takes that keeps the tuple's length.
    closes_input = ctx.client.host_needs(ARRAY_ITEMS)
    out, kept = repair_tool_schemas(tool, lambda base: _Tuples(base, closes_input and base == "/inputSchema"))
    if not kept:
        return None
    reason = (
        "a 2020-12 tuple closed with items: false; draft-07 validators ignore prefixItems and then reject"
        " every item (for those clients)"
    )
    return out, Rewrite(
        "schema_tuple",
        "dropped the closing items: false of tuples",
        tuple(kept),
        reason,
        for_clients="output_schema_tuple",
    )


def _boolean_at(node: JSONObject) -> bool:
    """True when :meth:`_Objects.fix` may replace something in ``node`` itself (an int ``1`` or
    ``0`` among a map's or list's subschemas counts too: it equals a boolean; the rule then
    finds nothing, which a gate may allow)."""
    for key in _KEYWORDS.intersection(node):
        value = node[key]
        if value is True or value is False:
            if key in _ONE and not (key == "items" and "prefixItems" in node):
                return True
        elif isinstance(value, dict):
            if key in _MAP and (True in value.values() or False in value.values()):
                return True
        elif isinstance(value, list) and key in _LIST and (True in value or False in value):
            return True
    return False


def _may_booleans(scan: ToolScan, ctx: ToolContext) -> bool:
    # The text first; where it holds a boolean (an OpenAPI nullable: true, zod's additionalProperties:
    # false on every object), a look at the subschemas, which copies nothing, before the rule's walk.
    if not scan.has_boolean():
        return False
    return scan.whole is None or any(map(_boolean_at, tool_subschemas(scan.tool)))


def _may_tuple(scan: ToolScan, ctx: ToolContext) -> bool:
    return ctx.client.needs("output_schema_tuple") and scan.has(b'prefixItems":')


BOOLEAN_SUBSCHEMA = Rule(
    name="boolean_subschema",
    kind="boolean_subschema",
    summary="Boolean subschemas in input and output schemas (a property's true, items: false) spelled as objects "
    "({} and {not: {}}); additionalProperties booleans stay.",
    on_tool=_fix_booleans,
    tool_gate=_may_booleans,
)
SCHEMA_TUPLE = Rule(
    name="schema_tuple",
    kind="output_schema_tuple",
    summary="A tuple's closing items: false beside prefixItems is dropped for draft-07 clients (TS SDK 1.x, "
    "Cursor), which otherwise reject every item.",
    on_tool=_fix_tuples,
    tool_gate=_may_tuple,
)
