"""Schema keywords the SDK clients refuse: ``tools/list`` repairs for every client, each keeping the
meaning the server's author wrote (``cases/faults.md``, "Kinds from the autumn-2026 reports").

The TS SDK 1.x client compiles every ``outputSchema`` with Ajv when it lists the tools (one bad
keyword: the whole list refused); the TS client 2.x and the Python ``mcp`` client refuse the call of
such a tool; the Python client's ``Tool`` model refuses a whole list where a ``properties`` member
is not an object, and all three refuse an ``inputSchema`` whose root is not ``type: "object"``. The
model APIs behind the hosts refuse the same keywords in an ``inputSchema``. None of these repairs
changes what a client may send as arguments (a keyword no validator could read is read as its
author meant it), so they run for every client. What each replaces is kept in the tool's
``_meta["dev.mcp-normalizer/original-keywords"]`` by JSON pointer into the tool as listed.

- ``type_names`` (``invalid_type_keyword``): a ``type`` holding a name that is no JSON type, also
  inside a type array, at any depth of both schemas. Known aliases become their JSON type (``int``
  -> ``integer``, ``float``/``double`` -> ``number``, ``bool`` -> ``boolean``, ``str`` -> ``string``,
  ``dict``/``map`` -> ``object``, ``list`` -> ``array``, any case; ``date-time``/``date``/``time`` ->
  ``string`` with that ``format`` when the node sets none; ``"number|string"`` -> a type array);
  a ``type`` with any other name (``mixed``, ``any``) or a non-name value (``null``, a number) is
  dropped: the place accepts any value, as a reader ignoring the unknown name would. (A ``type``
  holding an object is left as it is.)
- ``required_in_properties`` (``required_in_properties``): ``properties: {required: ["a"]}``, a
  ``required`` array of strings naming sibling properties (an array is never a schema, so it
  cannot be a property named ``required``), moves up into the object's ``required`` (merged, each
  name once, order kept).
- ``required_boolean`` (``required_boolean``): draft-03 ``required: true/false`` inside a property
  schema is dropped; ``true`` adds the property's name to the parent's ``required``. A boolean
  ``required`` elsewhere (no parent object to name it in) is dropped.
- ``enum_not_array`` (``enum_not_array``): ``enum: null`` is dropped; any other value that is not
  an array (``enum: "x"``) becomes the one-value ``enum: ["x"]``.
- ``input_object_root`` (``input_schema_not_object``): an ``inputSchema`` root whose ``type`` is
  not ``"object"`` (``schema_shape`` gives a root without ``type`` one): a type array holding
  ``object``, an alias of it (``dict``) or a name no reader knows (``mixed``: any value) becomes
  ``object`` (arguments are always an object, never ``null``); any other root is advertised as
  ``{"type": "object"}`` with its title and description, the whole root kept in the tool's
  ``_meta["dev.mcp-normalizer/original-input-schema"]``. Arguments are an object in every era, so
  a client could only ever send one.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Union

import msgspec
from msgspec import UNSET, UnsetType

from ...types import JSON, JSONObject
from ...wire.pointer import Path, format_pointer
from .base import ORIGINAL_KEYWORDS_KEY, Rewrite, Rule, ToolContext, meta_of, with_original_values
from .scan import ToolScan
from .schema_repairs import ORIGINAL_INPUT_SCHEMA_KEY
from .schemas import repair_tool_schemas, tool_subschemas

JSON_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")
_DATE_FORMATS = ("date-time", "date", "time")
#: Type names that are no JSON type, lower-cased, to the JSON type they mean (and a ``format``).
TYPE_ALIASES: dict[str, tuple[str, str | None]] = {
    **{name: (name, None) for name in JSON_TYPES},
    "int": ("integer", None),
    "long": ("integer", None),
    "float": ("number", None),
    "double": ("number", None),
    "decimal": ("number", None),
    "bool": ("boolean", None),
    "str": ("string", None),
    "dict": ("object", None),
    "map": ("object", None),
    "list": ("array", None),
    "date-time": ("string", "date-time"),
    "datetime": ("string", "date-time"),
    "date": ("string", "date"),
    "time": ("string", "time"),
}
_ANNOTATIONS = ("title", "description")

#: Gates: what each rule reacts to in a tool's canonical text (:attr:`ToolScan.whole`: compact,
#: ``"type":`` only a key). A ``type`` that is not a JSON type name or an array of them; an
#: ``enum`` whose value does not open an array.
_NAMES = rb"(?:string|number|integer|boolean|object|array|null)"
BAD_TYPE = re.compile(rb'"type":(?:"(?!' + _NAMES + rb'")|\[(?!(?:"' + _NAMES + rb'",?)*\])|[-0-9ntf])')
BAD_ENUM = re.compile(rb'"enum":[^\[]')


def _type_of(value: JSON) -> tuple[JSON, str | None] | None:
    """What a ``type`` value means: the JSON type name or array to write and a ``format`` to add
    (``None``: none), or ``None`` when it names something no reader knows (the keyword is dropped)."""
    names: list[JSON]
    if isinstance(value, str):
        names = list(value.split("|")) if "|" in value else [value]
    elif isinstance(value, list):
        names = value
    else:
        return None
    types: list[str] = []
    formats: set[str | None] = set()
    for name in names:
        known = TYPE_ALIASES.get(name.strip().lower()) if isinstance(name, str) else None
        if known is None:
            return None
        kind, form = known
        if kind not in types:
            types.append(kind)
        if kind == "string":
            formats.add(form)
    form = formats.pop() if len(formats) == 1 else None  # a plain string beside a date: no format
    if isinstance(value, str) and len(types) == 1:
        return types[0], form
    return types, form


def bad_type(value: JSON) -> bool:
    """True when a ``type`` keyword's value is not a JSON type name or an array of them (an object
    is left alone: ``"type": {`` is mostly a property named ``type``, which the gate cannot tell)."""
    if isinstance(value, str):
        return value not in JSON_TYPES
    if isinstance(value, list):
        return not all(isinstance(name, str) and name in JSON_TYPES for name in value)
    return not isinstance(value, dict)


class _Walk:
    """One schema's walk: the pointer base (``/inputSchema``) and the originals kept by pointer."""

    __slots__ = ("base", "kept")

    def __init__(self, base: str) -> None:
        self.base = base
        self.kept: dict[str, JSON] = {}

    def keep(self, path: Path, value: JSON) -> None:
        self.kept.setdefault(self.base + format_pointer(path), value)


class _Types(_Walk):
    __slots__ = ()

    def fix(self, node: JSONObject, path: Path) -> JSON:
        if "type" not in node or not bad_type(node["type"]):
            return node
        value = node["type"]
        self.keep((*path, "type"), value)
        meant = _type_of(value)
        if meant is None:
            return {k: v for k, v in node.items() if k != "type"}
        kind, form = meant
        out = {**node, "type": kind}
        if form is not None and "format" not in node:
            out["format"] = form
        return out


def _merged(required: JSON, names: list[str]) -> list[JSON] | None:
    """``required`` with ``names`` added (each once, order kept); ``None`` when nothing is added."""
    have: list[JSON] = list(required) if isinstance(required, list) else []
    added = [name for name in dict.fromkeys(names) if name not in have]
    return [*have, *added] if added or not isinstance(required, list) else None


def _misplaced(properties: JSONObject) -> bool:
    """True when ``properties`` holds a ``required`` array of strings naming its other members."""
    names = properties.get("required")
    return isinstance(names, list) and all(
        isinstance(name, str) and name != "required" and name in properties for name in names
    )


class _Required(_Walk):
    __slots__ = ()

    def fix(self, node: JSONObject, path: Path) -> JSON:
        properties = node.get("properties")
        if not isinstance(properties, dict) or not _misplaced(properties):
            return node
        names = properties["required"]
        self.keep((*path, "properties", "required"), names)
        out = {**node, "properties": {k: v for k, v in properties.items() if k != "required"}}
        merged = _merged(node.get("required"), names)
        if merged:  # (the object's own names stay first, in their order: only the moved ones are kept)
            if "required" in node and not isinstance(node["required"], list):
                self.keep((*path, "required"), node["required"])
            out["required"] = merged
        return out


_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"})
_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})


def _property_name(path: Path) -> str | None:
    """The name of the property whose schema is at ``path`` (a :func:`map_schema` path), or ``None``
    when the node there is not a member of a ``properties`` map."""
    i, end = 0, len(path)
    while i < end:
        step = path[i]
        if step in _MAPS or (step in _LISTS and i + 1 < end and isinstance(path[i + 1], int)):
            if i == end - 2 and step == "properties":
                return str(path[i + 1])
            i += 2
        else:
            i += 1
    return None


class _RequiredBooleans(_Walk):
    """Children first: a property's boolean goes, its name waits (by the parent's path) for the
    parent's visit, which adds it to the parent's ``required``."""

    __slots__ = ("named",)

    def __init__(self, base: str) -> None:
        super().__init__(base)
        self.named: dict[Path, list[str]] = {}

    def fix(self, node: JSONObject, path: Path) -> JSON:
        out = node
        own = node.get("required")
        if isinstance(own, bool):
            self.keep((*path, "required"), own)
            out = {k: v for k, v in node.items() if k != "required"}
            name = _property_name(path)
            if own and name is not None:
                self.named.setdefault(path[:-2], []).append(name)
        names = self.named.pop(path, None)
        if names:
            merged = _merged(out.get("required"), names)
            if merged:
                if "required" in out and not isinstance(out["required"], list):
                    self.keep((*path, "required"), out["required"])
                out = {**out, "required": merged}
        return out


class _Enums(_Walk):
    __slots__ = ()

    def fix(self, node: JSONObject, path: Path) -> JSON:
        if "enum" not in node or isinstance(node["enum"], list):
            return node
        value = node["enum"]
        self.keep((*path, "enum"), value)
        if value is None:
            return {k: v for k, v in node.items() if k != "enum"}
        return {**node, "enum": [value]}


def _hook(name: str, make: Any, action: str, reason: str) -> Any:
    def repair(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
        out, kept = repair_tool_schemas(tool, make)
        if not kept:
            return None
        return out, Rewrite(name, action, tuple(kept), reason)

    return repair


def _fix_root(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict) or "type" not in schema or schema["type"] == "object":
        return None
    kind = schema["type"]
    meant = _type_of(kind)
    reason = "every SDK client refuses the whole list for an inputSchema root that is not type: object"
    if meant is None or meant[0] == "object" or (isinstance(meant[0], list) and "object" in meant[0]):
        # an object among the types (arguments are never null), or a name no reader knows (any value)
        out = with_original_values(
            {**tool, "inputSchema": {**schema, "type": "object"}}, {"/inputSchema/type": kind}, ORIGINAL_KEYWORDS_KEY
        )
        return out, Rewrite("input_object_root", "typed the inputSchema root as object", ("/inputSchema/type",), reason)
    fixed: JSONObject = {"type": "object", **{k: schema[k] for k in _ANNOTATIONS if k in schema}}
    meta = meta_of(tool)
    meta[ORIGINAL_INPUT_SCHEMA_KEY] = schema
    return {**tool, "inputSchema": fixed, "_meta": meta}, Rewrite(
        "input_object_root",
        "advertised the inputSchema root as an object schema",
        ("/inputSchema",),
        reason + "; arguments are an object in every era (the root kept in _meta)",
    )


def _may_types(scan: ToolScan, ctx: ToolContext) -> bool:
    return scan.search(BAD_TYPE)


def _may_misplace(scan: ToolScan, ctx: ToolContext) -> bool:
    # `required` arrays are everywhere; a look at the subschemas (no copy) only where one is
    if not scan.has(b'required":['):
        return False
    whole = scan.whole
    if whole is None:
        return True
    try:  # the skeleton decode (in C) fails for an array among properties, and for a few others
        TOOL_SHAPE.decode(whole)
        return False
    except msgspec.DecodeError:
        pass
    for node in tool_subschemas(scan.tool):
        properties = node.get("properties")
        if isinstance(properties, dict) and isinstance(properties.get("required"), list):
            return True
    return False


def _may_root(scan: ToolScan, ctx: ToolContext) -> bool:
    schema = scan.tool.get("inputSchema")
    return isinstance(schema, dict) and "type" in schema and schema["type"] != "object"


TYPE_NAMES = Rule(
    name="type_names",
    kind="invalid_type_keyword",
    summary="A type that is no JSON type name: known aliases to their type (int -> integer, date-time -> string "
    "+ format), any other name dropped (any value).",
    on_tool=_hook(
        "type_names",
        _Types,
        "wrote type names as JSON types",
        "a type name that is no JSON type: Ajv (TS SDK) and jsonschema (Python SDK) refuse to compile the schema",
    ),
    tool_gate=_may_types,
)
REQUIRED_IN_PROPERTIES = Rule(
    name="required_in_properties",
    kind="required_in_properties",
    summary="A required array nested in properties (naming sibling properties) moves up to the object's required.",
    on_tool=_hook(
        "required_in_properties",
        _Required,
        "moved required out of properties",
        "an array in properties is no schema: the Python SDK refuses the whole list",
    ),
    tool_gate=_may_misplace,
)
REQUIRED_BOOLEAN = Rule(
    name="required_boolean",
    kind="required_boolean",
    summary="Draft-03 required: true/false in a property schema dropped; true names the property in the parent's "
    "required.",
    on_tool=_hook(
        "required_boolean",
        _RequiredBooleans,
        "moved draft-03 required booleans to the parent's required",
        "required must be an array (2020-12): the SDK clients refuse to compile the schema",
    ),
    tool_gate=lambda scan, ctx: scan.has(b'required":true', b'required":false'),
)
ENUM_NOT_ARRAY = Rule(
    name="enum_not_array",
    kind="enum_not_array",
    summary="enum: null dropped; an enum that is not an array becomes the one-value array.",
    on_tool=_hook(
        "enum_not_array",
        _Enums,
        "made enum an array",
        "enum must be an array: the SDK clients refuse to compile the schema",
    ),
    tool_gate=lambda scan, ctx: scan.search(BAD_ENUM),
)
INPUT_OBJECT_ROOT = Rule(
    name="input_object_root",
    kind="input_schema_not_object",
    summary="An inputSchema root whose type is not object: a type array with object becomes object; any other root "
    "is advertised as {type: object} (kept in the tool's _meta).",
    on_tool=_fix_root,
    tool_gate=_may_root,
)


# -- the listing without the rules (Normalizer._unchanged) -----------------------------------------

_TypeName = Literal["string", "number", "integer", "boolean", "object", "array", "null"]
_Sub = Union["_Shape", bool]


class _Shape(msgspec.Struct, gc=False):
    """A subschema as :func:`keywords_clean` reads it: only the keywords these rules repair and the
    ones holding subschemas are typed; every other member is skipped undecoded (in C). A value of
    another type than these (a ``type`` that is no JSON type name, an ``enum`` that is not an array,
    a boolean ``required``, an array among ``properties``) fails the decode."""

    type: _TypeName | list[_TypeName] | UnsetType = UNSET
    enum: list[msgspec.Raw] | UnsetType = UNSET
    required: list[str] | UnsetType = UNSET
    properties: dict[str, _Sub] | UnsetType = UNSET
    patternProperties: dict[str, _Sub] | UnsetType = UNSET
    defs: dict[str, _Sub] | UnsetType = msgspec.field(default=UNSET, name="$defs")
    definitions: dict[str, _Sub] | UnsetType = UNSET
    dependentSchemas: dict[str, _Sub] | UnsetType = UNSET
    dependencies: dict[str, _Shape | bool | list[str]] | UnsetType = UNSET
    items: _Shape | bool | list[_Sub] | UnsetType = UNSET
    prefixItems: list[_Sub] | UnsetType = UNSET
    allOf: list[_Sub] | UnsetType = UNSET
    anyOf: list[_Sub] | UnsetType = UNSET
    oneOf: list[_Sub] | UnsetType = UNSET
    additionalProperties: _Sub | UnsetType = UNSET
    additionalItems: _Sub | UnsetType = UNSET
    unevaluatedProperties: _Sub | UnsetType = UNSET
    unevaluatedItems: _Sub | UnsetType = UNSET
    contains: _Sub | UnsetType = UNSET
    propertyNames: _Sub | UnsetType = UNSET
    not_: _Sub | UnsetType = msgspec.field(default=UNSET, name="not")
    if_: _Sub | UnsetType = msgspec.field(default=UNSET, name="if")
    then: _Sub | UnsetType = UNSET
    else_: _Sub | UnsetType = msgspec.field(default=UNSET, name="else")


#: The decoder of :class:`_Shape` (what ``Normalizer._unchanged`` reads a schema's root and keywords with).
SHAPE = msgspec.json.Decoder(_Shape)


class _ToolShape(msgspec.Struct, gc=False):
    """A tool as :func:`_may_misplace` reads it: its two schemas as :class:`_Shape` skeletons."""

    inputSchema: _Sub | UnsetType = UNSET
    outputSchema: _Sub | UnsetType = UNSET


#: The decoder of :class:`_ToolShape`: it succeeds only for a tool with no array among any
#: ``properties`` of its schemas (nor any other value :class:`_Shape` refuses).
TOOL_SHAPE = msgspec.json.Decoder(_ToolShape)
