"""Pure helpers that read and edit JSON Schemas (2020-12 and draft-07) without changing their meaning
beyond what a rule intends. Edits copy; the input schema is never mutated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import unquote

from ...errors import DecodeError
from ...types import JSON, JSONObject
from ...wire.jsoncodec import dumps
from ...wire.pointer import WILDCARD, Path, format_pointer
from .base import ORIGINAL_KEYWORDS_KEY, with_original_values

#: Keywords whose presence means null may be rejected by something other than ``type``/``enum``.
_NULL_SENSITIVE = ("$ref", "$dynamicRef", "anyOf", "oneOf", "allOf", "not", "const", "if")
_COMPOSITIONS = ("allOf", "anyOf", "oneOf")
#: Keywords whose values are instance data, not schemas: never edited.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples", "example"})
_OLD_DIALECT_MARKERS = ("draft-03", "draft-04", "draft-06", "draft-07")


def siblings_of_ref_ignored(root: JSON) -> bool:
    """True for draft-07 and older, where keywords next to ``$ref`` are ignored."""
    dialect = root.get("$schema") if isinstance(root, dict) else None
    return isinstance(dialect, str) and any(marker in dialect for marker in _OLD_DIALECT_MARKERS)


def resolve_local_ref(root: JSON, ref: str) -> JSON | None:
    """The subschema a same-document JSON-pointer ``$ref`` (``#`` or ``#/...``) points at, or ``None``
    (anchors such as ``#name`` and other documents are not followed)."""
    if ref != "#" and not ref.startswith("#/"):
        return None
    node = root
    for raw in ref[2:].split("/") if ref != "#" else []:
        step = unquote(raw).replace("~1", "/").replace("~0", "~")  # a URI fragment: percent-encoded
        if isinstance(node, dict) and step in node:
            node = node[step]
        elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
            node = node[int(step)]
        else:
            return None
    return node


def schema_at(root: JSON, schema_path: Sequence[str | int]) -> JSON | None:
    """Follow a validator's absolute schema path from ``root``, through local ``$ref``s."""
    node = root
    for step in schema_path:
        if isinstance(node, dict) and step in ("$ref", "$dynamicRef") and isinstance(node.get(step), str):
            node = resolve_local_ref(root, node[step])
            continue
        if isinstance(node, dict) and isinstance(step, str) and step in node:
            node = node[step]
        elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            node = node[step]
        else:
            return None
    return node


def accepts_null(node: JSON) -> bool:
    """True when ``node`` obviously accepts ``null`` (no ``type``/``enum``/composition says otherwise)."""
    if node is True or node == {}:
        return True
    if not isinstance(node, dict) or any(k in node for k in _NULL_SENSITIVE):
        return False
    kind = node.get("type")
    enum = node.get("enum")
    type_ok = kind is None or kind == "null" or (isinstance(kind, list) and "null" in kind)
    enum_ok = not isinstance(enum, list) or None in enum
    return type_ok and enum_ok


def make_nullable(node: JSON) -> JSON:
    """Return ``node`` widened to also accept ``null``.

    ``type: T`` becomes ``[T, "null"]`` and ``null`` joins an ``enum``; a node whose other keywords
    could still reject null (``$ref``, compositions, ``const``) is wrapped as ``anyOf[node, null]``.
    """
    if accepts_null(node):
        return node
    if node is False:
        return {"type": "null"}
    if not isinstance(node, dict):
        return node
    if any(k in node for k in _NULL_SENSITIVE):
        return {"anyOf": [node, {"type": "null"}]}
    widened = dict(node)
    kind = node.get("type")
    if isinstance(kind, str):
        widened["type"] = [kind, "null"]
    elif isinstance(kind, list):
        widened["type"] = [*kind, "null"]
    enum = node.get("enum")
    if isinstance(enum, list) and None not in enum:
        widened["enum"] = [*enum, None]
    return widened


class _Widener:
    """:func:`widen_at`'s walk (a class, not a closure: a recursive closure is a reference cycle
    that only the cyclic collector frees, and 50,000 listed tools make 100,000 of them)."""

    __slots__ = ("change", "drop_siblings", "root")

    def __init__(self, root: JSON, change: Callable[[JSON], JSON]) -> None:
        self.root = root
        self.change = change
        self.drop_siblings = siblings_of_ref_ignored(root)

    def walk(self, node: JSON, segs: Sequence[str], seen: frozenset[str]) -> tuple[JSON, int]:
        if not segs:
            widened = self.change(node)
            return widened, 0 if widened == node else 1
        if not isinstance(node, dict):
            return node, 0
        seg, rest = segs[0], segs[1:]
        out: JSONObject = dict(node)
        count = 0
        props = node.get("properties")
        listed = isinstance(props, dict) and (seg in props or seg == WILDCARD)
        if isinstance(props, dict):
            new_props = dict(props)
            for name in props if seg == WILDCARD else ([seg] if seg in props else []):
                new_props[name], n = self.walk(props[name], rest, seen)
                count += n
            out["properties"] = new_props
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and (seg == WILDCARD or not listed):
            out["additionalProperties"], n = self.walk(extra, rest, seen)
            count += n
        if seg == WILDCARD or seg.isdigit():
            items = node.get("items")
            if isinstance(items, dict):
                out["items"], n = self.walk(items, rest, seen)
                count += n
            prefix = node.get("prefixItems")
            if isinstance(prefix, list):
                new_prefix = list(prefix)
                for i, branch in enumerate(prefix):
                    if seg == WILDCARD or int(seg) == i:
                        new_prefix[i], n = self.walk(branch, rest, seen)
                        count += n
                out["prefixItems"] = new_prefix
        for keyword in _COMPOSITIONS:
            branches = node.get(keyword)
            if isinstance(branches, list):
                new_branches = list(branches)
                for i, branch in enumerate(branches):
                    new_branches[i], n = self.walk(branch, segs, seen)
                    count += n
                out[keyword] = new_branches
        ref = node.get("$ref")
        if isinstance(ref, str) and ref not in seen:
            target = resolve_local_ref(self.root, ref)
            if target is not None:
                inlined, n = self.walk(target, segs, seen | {ref})
                if n:
                    count += n
                    siblings = {k: v for k, v in out.items() if k != "$ref"}
                    if self.drop_siblings or not siblings:
                        return inlined, count
                    out = {**siblings, "allOf": [*siblings.get("allOf", []), inlined]}
        return (out if count else node), count


def widen_at(root: JSON, segments: Sequence[str], widen: Callable[[JSON], JSON] | None = None) -> tuple[JSON, int]:
    """Apply ``widen`` (default :func:`make_nullable`: also accept ``null``) to every schema place that
    validates instance pattern ``segments``.

    Follows ``properties``, ``additionalProperties`` (for ``*`` or names not listed), ``items``,
    ``prefixItems``, ``allOf``/``anyOf``/``oneOf`` branches and local ``$ref``s (the referenced
    schema is inlined at that place, so other users of the definition are unchanged).

    Returns:
        The new schema and how many places were widened (0: the pattern reaches nothing).
    """
    return _Widener(root, widen or make_nullable).walk(root, tuple(segments), frozenset())


class _NullableConverter:
    """:func:`convert_openapi_nullable`'s walk (a class, not a recursive closure: see :class:`_Widener`)."""

    __slots__ = ("converted", "places")

    def __init__(self) -> None:
        self.places: list[Path] = []
        self.converted = 0

    def walk(self, node: JSON, path: Path | None, widen: bool = True) -> JSON:
        if isinstance(node, list):
            return [self.walk(item, None) for item in node]
        if not isinstance(node, dict):
            return node
        out: JSONObject = {}
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                out[key] = {
                    name: self.walk(sub, None if path is None else (*path, name)) for name, sub in value.items()
                }
            elif key in ("items", "additionalProperties") and isinstance(value, dict):
                out[key] = self.walk(value, None if path is None else (*path, WILDCARD))
            elif key == "oneOf" and isinstance(value, list):
                # Exactly one branch may accept null, or oneOf rejects it: widen only while none does.
                taken = any(accepts_null(branch) for branch in value)
                branches = []
                for branch in value:
                    branches.append(self.walk(branch, path, widen=not taken))
                    taken = taken or accepts_null(branches[-1])
                out[key] = branches
            elif key in _COMPOSITIONS and isinstance(value, list):
                out[key] = [self.walk(branch, path) for branch in value]
            elif key == "nullable" and value is True:
                continue
            elif key in _DATA_KEYWORDS:
                out[key] = value
            else:
                out[key] = self.walk(value, None)
        if node.get("nullable") is True:
            self.converted += 1
            if not widen:
                return out  # a sibling oneOf branch already takes null
            if path is not None:
                self.places.append(path)
            return make_nullable(out)
        return out


def convert_openapi_nullable(root: JSON) -> tuple[JSON, list[Path], int]:
    """Turn OpenAPI 3.0 ``nullable: true`` into JSON Schema (``type`` union, ``null`` in ``enum``).

    Returns:
        The new schema, the instance paths (``*`` for any item or member) of the converted places
        that are reachable through ``properties``/``items``/``additionalProperties``, and how many
        keywords were converted. ``nullable: false`` is left alone (it means nothing in JSON Schema).
    """
    global _last_converted
    try:
        text: bytes | None = dumps(root)
    except DecodeError:
        text = None
    last = _last_converted
    if text is not None and last is not None and last[0] is root and last[1] == text:
        result, places, converted = last[2]
        return result, list(places), converted
    converter = _NullableConverter()
    result = converter.walk(root, ())
    converted = converter.converted
    answer = result if converted else root
    if text is not None:
        _last_converted = (root, text, (answer, tuple(converter.places), converted))
    return answer, converter.places, converted


#: The last schema :func:`convert_openapi_nullable` converted, its text and the answer: listing a
#: tool asks twice for the same schema (the rule ``nullable`` advertises, the catalog entry takes
#: the places), and the walk is the cost of listing such a tool. Kept for that object with that
#: text only: the answer holds the object's own parts (a writer copies their bytes by identity),
#: and a schema changed in place between two calls is converted again. Nothing changes the
#: answer's new schema in place (rules make copies).
_last_converted: tuple[JSON, bytes, tuple[JSON, tuple[Path, ...], int]] | None = None


#: Keywords whose value is one subschema / a map of subschemas / a list of subschemas (2020-12 and draft-07).
_ONE = (
    "additionalProperties",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
)
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems")

SchemaFn = Callable[[JSONObject, Path], JSON]

#: Each subschema keyword's kind, and the order map_schema visits them in.
_KIND: dict[str, str] = {
    **dict.fromkeys(_ONE, "one"),
    **dict.fromkeys(_MAP, "map"),
    **dict.fromkeys(_LIST, "list"),
    "items": "items",  # one subschema (2020-12) or a list of them (draft-07 tuple form)
    "dependencies": "map",  # draft-07: a map whose values are subschemas or lists of names
}
_RANK = {key: rank for rank, key in enumerate(_KIND)}


def subschemas(root: JSON) -> Iterator[JSONObject]:
    """Every object subschema of ``root`` that :func:`map_schema` visits (``root`` first when it
    is an object; then in no particular order), without copying and without a depth bound: call
    it only on schemas known to nest within :func:`map_schema`'s."""
    stack = [root]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield node
        for key, value in node.items():
            kind = _KIND.get(key)
            if kind is None:
                continue
            if kind == "map":
                if isinstance(value, dict):
                    stack.extend(value.values())
            elif kind == "list":
                if isinstance(value, list):
                    stack.extend(value)
            elif isinstance(value, dict):  # one subschema (and items, 2020-12)
                stack.append(value)
            elif kind == "items" and isinstance(value, list):  # items, draft-07 tuple form
                stack.extend(value)


def tool_subschemas(tool: JSONObject, keys: Sequence[str] = ("inputSchema", "outputSchema")) -> Iterator[JSONObject]:
    """:func:`subschemas` of each of ``tool``'s schemas named ``keys`` that is an object."""
    for key in keys:
        schema = tool.get(key)
        if isinstance(schema, dict):
            yield from subschemas(schema)


class _SchemaMapper:
    """:func:`map_schema`'s walk (a class, not a recursive closure: see :class:`_Widener`)."""

    __slots__ = ("fn", "max_depth", "touched")

    def __init__(self, fn: SchemaFn, max_depth: int) -> None:
        self.fn = fn
        self.max_depth = max_depth
        self.touched: list[str] = []

    def visit(self, node: JSON, path: Path) -> JSON:
        if not isinstance(node, dict):
            return node
        if len(path) > 3 * self.max_depth:
            raise RecursionError("schema nested too deeply")
        out: JSONObject | None = None
        # The subschema keywords present, in the fixed order of _RANK (most nodes have none or one).
        present = [key for key in node if key in _RANK]
        if len(present) > 1:
            present.sort(key=_RANK.__getitem__)
        for key in present:
            value = node[key]
            kind = _KIND[key]
            new: JSON
            if kind == "one" or (kind == "items" and isinstance(value, dict)):
                if not isinstance(value, dict):
                    continue
                new = self.visit(value, (*path, key))
                changed = new is not value
            elif kind == "map":
                if not isinstance(value, dict):
                    continue
                new = {name: self.visit(sub, (*path, key, name)) for name, sub in value.items()}
                changed = any(new[name] is not value[name] for name in value)
            elif isinstance(value, list):
                new = [self.visit(sub, (*path, key, i)) for i, sub in enumerate(value)]
                changed = any(a is not b for a, b in zip(new, value, strict=True))
            else:
                continue
            if changed:
                if out is None:
                    out = dict(node)
                out[key] = new
        current = out if out is not None else node
        result = self.fn(current, path)
        if result is not current:
            self.touched.append(format_pointer(path))
        return result


def map_schema(root: JSON, fn: SchemaFn, *, max_depth: int = 64) -> tuple[JSON, list[str]]:
    """Apply ``fn`` to every object subschema of ``root``, children first, copying only what changes.

    ``fn(node, path)`` gets a subschema whose children are already mapped and its location in the
    schema (keywords and names, outermost first), and returns the node to use (the same object when
    it has nothing to change). Data keywords (``enum``, ``const``, ``default``, ``examples``) are
    never entered.

    Returns:
        The new schema (``root`` itself when nothing changed) and the JSON pointers of the
        subschemas ``fn`` replaced.

    Raises:
        RecursionError: the schema nests subschemas deeper than ``max_depth``.
    """
    mapper = _SchemaMapper(fn, max_depth)
    return mapper.visit(root, ()), mapper.touched


#: The two schemas of a tool the schema rules walk.
SCHEMA_KEYS = ("inputSchema", "outputSchema")


def repair_tool_schemas(tool: JSONObject, make: Callable[[str], Any]) -> tuple[JSONObject, dict[str, JSON]]:
    """Run a fresh walk over each schema of ``tool``: ``make(base)`` (``base`` the schema's pointer,
    ``/inputSchema``) returns an object whose ``fix`` is a :data:`SchemaFn` for
    :func:`map_schema` and whose ``kept`` maps each pointer it changed to the value it replaced.
    Returns the new tool, with those originals under ``_meta[ORIGINAL_KEYWORDS_KEY]``
    (:func:`~mcp_normalizer.engine.rules.base.with_original_values`), and the originals; ``tool``
    itself when nothing changed."""
    out, kept = tool, {}
    for key in SCHEMA_KEYS:
        schema = tool.get(key)
        if not isinstance(schema, dict):
            continue
        walk = make(f"/{key}")
        new, _ = map_schema(schema, walk.fix)
        if walk.kept:
            out = {**out, key: new}
            kept.update(walk.kept)
    return (with_original_values(out, kept, ORIGINAL_KEYWORDS_KEY) if kept else tool), kept
