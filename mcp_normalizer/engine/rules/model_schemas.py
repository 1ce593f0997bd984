"""Rule ``model_schemas``: input schemas every model API family refuses, made ones they take, for the hosts.

Fault kind ``model_api_schema`` (the model API behind a host refuses what the spec allows;
:mod:`~.host_profiles`; ``check`` reports it as an advisory unless a real run of the host shows
the loss, as Codex's of a draft-07 tuple). A host forwards each tool's ``inputSchema`` to its model API; these are the
faults ``hosts.toml`` puts under ``[every_family]``: every host gets their repairs, the ones whose
model the user chooses (VS Code, Cursor) too, and no other client does (an SDK client, or one that
names no host, gets the server's bytes). None of them changes what the model may send as arguments,
so a ``tools/call`` goes upstream as the model wrote it. Only the ``inputSchema`` is repaired (the
model APIs never see an ``outputSchema``); nodes are rewritten children first, at any depth.

- ``object_without_properties`` (the OpenAI API: "object schema missing properties", 400): a node
  whose ``type`` is ``object`` (or a type array holding it) and that has no ``properties`` gets
  ``properties: {}``. Always, beside ``patternProperties`` or ``additionalProperties`` too:
  ``properties`` constrains only the members it names, so an empty one changes no accepted value.
- ``legacy_tuple_items`` (a draft-07 tuple where the model APIs read 2020-12, in which ``items`` is
  one schema: the Anthropic API refuses it, google-genai fails on it, Codex does not offer the
  tool): ``items: [A, B]`` becomes ``prefixItems: [A, B]`` and ``items`` takes ``additionalItems``,
  ``{}`` when there is none (draft-07 then took any further item, as ``{}`` does). A closing
  ``additionalItems: false`` (or ``{"not": {}}``) becomes ``items: {}`` with ``maxItems`` the
  tuple's length (the same values in 2020-12, and a draft-07 reader such as VS Code's Ajv, which
  ignores ``prefixItems``, still takes every valid array). The model APIs read every input schema
  as 2020-12 whatever its ``$schema`` says, so a declared draft is no exception.
- ``never_branch_anyof`` (zod's ``anyOf: [{"not": {}}, X]``; Kimi, OpenAI strict and Gemini take no
  ``not``): an ``anyOf`` arm no value matches (``false``, ``{"not": {}}``, ``{"not": true}``, with
  annotations at most) is dropped, which keeps the same values. An ``anyOf`` left with one arm is
  merged into its node when that reads the same: no keyword on both sides with different values,
  no ``$`` keyword in the arm nor ``$ref`` in the node, and no keywords that read each other
  (``properties``/``additionalProperties``, ``items``/``prefixItems``/``contains``, ``if``/``then``)
  split between the two; else it stays an ``anyOf`` of one. An ``anyOf`` whose every arm is a never
  arm stays as it is (nothing can say "no value" without ``not``).
- ``enum_type_conflict`` (the OpenAI API: 400): a node whose ``enum`` has no value of its ``type``,
  so it takes no value at all. An ``array`` node whose enum values are no arrays gets the ``enum``
  on its ``items`` (which holds no ``enum`` of its own and whose ``type``, if any, one value has):
  the array of those values the author meant. Any other such ``enum`` (on a ``null`` branch, a
  string enum on a number) is dropped and its values written into the ``description``
  (``(one of: [...])``), so the model still knows them.

Each node a repair replaced is kept in the tool's ``_meta["dev.mcp-normalizer/original-keywords"]``
(pointer into the tool as listed -> the node as it reached this rule, its own subschemas
unrepaired), as :mod:`~.host_schemas` keeps its nodes; what an earlier rule replaced inside it
stays under that rule's own pointer, so putting the nodes back outermost first gives the server's
schema.
"""

from __future__ import annotations

import functools
import re

from ...errors import DecodeError
from ...types import JSON, JSONObject
from ...wire.jsoncodec import dumps, loads
from ...wire.pointer import Path, format_pointer
from .base import ORIGINAL_KEYWORDS_KEY, Rewrite, Rule, ToolContext, with_original_values
from .host_faults import CONSTRAINTS
from .host_profiles import ARRAY_ITEMS, ENUM_TYPE, LEGACY_TUPLE, NEVER_BRANCH, OBJECT_PROPERTIES
from .scan import ToolScan
from .schemas import map_schema, subschemas

#: The constraint keys this rule repairs.
KEYS = frozenset({OBJECT_PROPERTIES, LEGACY_TUPLE, NEVER_BRANCH, ENUM_TYPE})

#: What each repair did, for the log.
_DONE = {
    LEGACY_TUPLE: "draft-07 tuples written as prefixItems",
    NEVER_BRANCH: "anyOf arms nothing matches dropped",
    ENUM_TYPE: "enums no value of the type can meet moved onto items or into the description",
    OBJECT_PROPERTIES: "properties: {} given to objects without properties",
}
_ANNOTATIONS = frozenset({"title", "description", "$comment"})
#: Keywords that read each other's results within one schema object: split between a node and
#: the arm merged into it, they would read something else.
_TOGETHER = (
    frozenset({"properties", "patternProperties", "additionalProperties", "unevaluatedProperties"}),
    frozenset(
        {"items", "prefixItems", "additionalItems", "unevaluatedItems", "contains", "minContains", "maxContains"}
    ),
    frozenset({"if", "then", "else"}),
)


def _kinds(node: JSONObject) -> list[str] | None:
    kind = node.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list) and all(isinstance(name, str) for name in kind):
        return list(kind)
    return None


def _of_type(value: JSON, kind: str) -> bool:
    """Whether ``value`` is an instance of JSON type ``kind`` (2020-12: 1.0 is an integer)."""
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float))
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return True  # no JSON type name (type_names' fault): no conflict to judge


def _never(arm: JSON) -> bool:
    """An arm no value matches: ``false``, or ``not`` of an always schema beside annotations only."""
    if arm is False:
        return True
    return (
        isinstance(arm, dict)
        and "not" in arm
        and (arm["not"] is True or arm["not"] == {})
        and all(key == "not" or key in _ANNOTATIONS for key in arm)
    )


def _tuple(node: JSONObject) -> JSONObject:
    """A draft-07 tuple node as 2020-12 spells it."""
    prefix = node["items"]
    extra: JSON = node.get("additionalItems", {})
    closed = _never(extra)
    out: JSONObject = {}
    for key, value in node.items():
        if key == "items":
            out["prefixItems"] = value
            out["items"] = {} if closed else extra
        elif key not in ("additionalItems", "prefixItems"):
            out[key] = value
    if closed and isinstance(prefix, list):
        bound = node.get("maxItems")
        whole = isinstance(bound, int) and not isinstance(bound, bool)
        out["maxItems"] = min(bound, len(prefix)) if whole else len(prefix)  # type: ignore[type-var]
    return out


def _merged(node: JSONObject, arm: JSON) -> JSONObject | None:
    """``node`` with its one-arm ``anyOf`` merged in, or ``None`` when that would read otherwise."""
    if arm is True or arm == {}:
        return {k: v for k, v in node.items() if k != "anyOf"}
    if not isinstance(arm, dict) or "$ref" in node or "$dynamicRef" in node:
        return None
    own = {k for k in node if k != "anyOf"}
    if any(key.startswith("$") for key in arm) or any(key in own and node[key] != arm[key] for key in arm):
        return None
    if any(own & group and set(arm) & group and not (set(arm) & group) <= own for group in _TOGETHER):
        return None
    out: JSONObject = {}
    for key, value in node.items():
        if key == "anyOf":
            out.update({k: v for k, v in arm.items() if k not in own})
        else:
            out[key] = value
    return out


def _drop_never(node: JSONObject) -> JSONObject:
    arms = node["anyOf"]
    assert isinstance(arms, list)
    left = [arm for arm in arms if not _never(arm)]
    if len(left) == len(arms) or not left:
        return node
    if len(left) == 1:
        merged = _merged(node, left[0])
        if merged is not None:
            return merged
    return {k: (left if k == "anyOf" else v) for k, v in node.items()}


def _values_text(values: list[JSON]) -> str:
    try:
        return dumps(values).decode("utf-8")
    except DecodeError:  # pragma: no cover - the values came off the wire as JSON
        return repr(values)


def _enum(node: JSONObject) -> JSONObject:
    kinds, values = _kinds(node), node.get("enum")
    if kinds is None or not isinstance(values, list) or not values:
        return node
    if any(_of_type(value, kind) for value in values for kind in kinds):
        return node
    without = {k: v for k, v in node.items() if k != "enum"}
    items = node.get("items", {})
    if "array" in kinds and not any(isinstance(value, list) for value in values):
        if items is True:
            items = {}
        item_kinds = _kinds(items) if isinstance(items, dict) else None
        if (
            isinstance(items, dict)
            and "enum" not in items
            and ("type" not in items or (item_kinds and any(_of_type(v, k) for v in values for k in item_kinds)))
        ):
            return {**without, "items": {**items, "enum": values}}
    description = node.get("description")
    said = f"(one of: {_values_text(values)})"
    without["description"] = f"{description} {said}" if isinstance(description, str) and description else said
    return without


def _properties(node: JSONObject) -> JSONObject:
    kinds = _kinds(node)
    if kinds is None or "object" not in kinds or "properties" in node:
        return node
    return {**node, "properties": {}}


def _at(root: JSON, path: Path) -> JSON:
    """The node at ``path`` (a :func:`map_schema` path) of ``root`` as it was."""
    node = root
    for step in path:
        node = node[step]
    return node


class _Walk:
    """One ``inputSchema``'s walk: the repairs ``wanted``, what each did, the originals by pointer."""

    __slots__ = ("done", "kept", "root", "wanted")

    def __init__(self, root: JSONObject, wanted: frozenset[str]) -> None:
        self.root = root
        self.wanted = wanted
        self.kept: dict[str, JSON] = {}
        self.done: set[str] = set()

    def fix(self, node: JSONObject, path: Path) -> JSON:
        out, wanted = node, self.wanted
        if LEGACY_TUPLE in wanted and isinstance(out.get("items"), list):
            out = self._step(LEGACY_TUPLE, out, _tuple(out))
        if NEVER_BRANCH in wanted and isinstance(out.get("anyOf"), list):
            out = self._step(NEVER_BRANCH, out, _drop_never(out))
        if ENUM_TYPE in wanted and "enum" in out:
            out = self._step(ENUM_TYPE, out, _enum(out))
        if OBJECT_PROPERTIES in wanted and "type" in out:
            out = self._step(OBJECT_PROPERTIES, out, _properties(out))
        if out is not node:
            self.kept[format_pointer(("inputSchema", *path))] = _at(self.root, path)
        return out

    def _step(self, key: str, before: JSONObject, after: JSONObject) -> JSONObject:
        if after is not before:
            self.done.add(key)
        return after


def needs_repair(schema: JSON, wanted: frozenset[str]) -> bool:
    """Whether this rule changes ``schema`` (an ``inputSchema``) for a client that needs ``wanted``:
    a node of it that :meth:`_Walk.fix` changes by its own keywords (an ``anyOf`` merged brings in
    nothing a node of its own did not have). A look without copies (:func:`subschemas`)."""
    keys = (LEGACY_TUPLE, NEVER_BRANCH, ENUM_TYPE, OBJECT_PROPERTIES)
    tuples, nevers, enums, objects = (key in wanted for key in keys)
    for node in subschemas(schema):
        if "items" in node and tuples and isinstance(node["items"], list):
            return True
        if "anyOf" in node and nevers:
            arms = node["anyOf"]
            if isinstance(arms, list) and any(map(_never, arms)) and not all(map(_never, arms)):
                return True
        if "enum" in node and enums and _enum(node) is not node:
            return True
        if objects and "properties" not in node and "type" in node and _properties(node) is not node:
            return True
    return False


def _repair(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    client = ctx.client
    wanted = client.host_faults & KEYS
    schema = tool.get("inputSchema")
    if not wanted or not isinstance(schema, dict):  # (a host, or a client a model_api setting names the family of)
        return None
    if not needs_repair(schema, wanted):
        return None  # (a look without copies first: most schemas with an enum or objects are fine)
    walk = _Walk(schema, frozenset(wanted))
    new, touched = map_schema(schema, walk.fix)
    if new is schema:
        return None
    out = with_original_values({**tool, "inputSchema": new}, walk.kept, ORIGINAL_KEYWORDS_KEY)
    reasons = [f"{_DONE[key]} ({client.fault_source(key)})" for key in _DONE if key in walk.done]
    why = f"{'; '.join(reasons)}, for {client.title}"
    pointers = tuple(f"/inputSchema{p}" for p in touched)
    return out, Rewrite("model_schemas", "made a schema every model API takes", pointers, why)


def _may_repair(scan: ToolScan, ctx: ToolContext) -> bool:
    """Whether :func:`_repair` may change the tool, from the ``inputSchema``'s canonical text: a list
    ``items``, an ``enum``, a ``not`` or ``false`` there, or ``"object"`` more than once, or once
    but not as the type of a root with ``properties`` (then no other node can be an object); then
    a look at its nodes without copies (:func:`needs_repair`), which is what the hook finds first."""
    faults = ctx.client.host_faults
    if faults.isdisjoint(KEYS):
        return False
    text = scan.schema_text("inputSchema")
    if text is None:
        return True
    schema = scan.tool.get("inputSchema")
    if not isinstance(schema, dict):
        return False
    if not (b'"items":[' in text or b'"enum":' in text or b'"not":' in text or b"false" in text):
        count = text.count(b'"object"')
        if count == 0 or (count == 1 and schema.get("type") == "object" and isinstance(schema.get("properties"), dict)):
            return False
    return needs_repair(schema, faults & KEYS)


@functools.cache
def listing_faults_checked(faults: frozenset[str]) -> bool:
    """Whether :func:`unchanged_input` answers for every listing repair ``faults`` (a client's host
    faults) ask for: each is a result fault (a content block's), one of this rule's :data:`KEYS`,
    or ``array_without_items`` (rule ``host_schemas``), whose repair changes only what
    ``Normalizer._unchanged`` already refuses: an array without ``items`` (``schema_shape``'s, for
    every client) or a tuple (a ``prefixItems`` key)."""
    return all(key in KEYS or key == ARRAY_ITEMS or CONSTRAINTS[key].subject == "block" for key in faults)


_LIST_ITEMS = re.compile(rb'"items"[ \t\r\n]*:[ \t\r\n]*\[')


def unchanged_input(faults: frozenset[str], text: bytes, root_type: object, root_properties: object) -> bool:
    """Whether this rule leaves an ``inputSchema`` as it is for a client with host ``faults``, from
    the schema's text as listed (any whitespace and key order; the caller has refused a text
    holding ``false``, ``true`` or a ``\\u00`` escape) and its root's ``type`` and ``properties``
    (``Normalizer._unchanged`` reads them undecoded): no ``not``, no ``enum``, no list ``items``,
    and ``"object"`` nowhere or only as the type of a root that has ``properties``; else the schema
    decoded, no node of it a repair changes (:func:`needs_repair`; the caller has refused a text
    nested deeper than the rules read)."""
    if faults.isdisjoint(KEYS):
        return True
    if b'"not"' in text or b'"enum"' in text or (b'"items"' in text and _LIST_ITEMS.search(text) is not None):
        return not needs_repair(loads(text), faults & KEYS)
    count = text.count(b'"object"')
    if count == 0 or (count == 1 and root_type == "object" and isinstance(root_properties, dict)):
        return True
    return not needs_repair(loads(text), faults & KEYS)


RULE = Rule(
    "model_schemas",
    "model_api_schema",
    "for every host (its model API's family known or the user's choice), what every model API refuses in an"
    " inputSchema made what they take, the same arguments valid: properties: {} given to objects without"
    " properties, draft-07 tuples written as prefixItems, anyOf arms nothing matches dropped, an enum no value of"
    " its type can meet moved onto items or into the description; each node as listed kept in the tool's _meta",
    on_tool=_repair,
    tool_gate=_may_repair,
)
