"""Pure helpers that read and edit JSON Schemas (2020-12 and draft-07) without changing their meaning
beyond what a rule intends. Edits copy; the input schema is never mutated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from urllib.parse import unquote

from ..pointer import WILDCARD, Path, format_pointer
from ..types import JSON, JSONObject

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


def widen_at(root: JSON, segments: Sequence[str], widen: Callable[[JSON], JSON] | None = None) -> tuple[JSON, int]:
    """Apply ``widen`` (default :func:`make_nullable`: also accept ``null``) to every schema place that
    validates instance pattern ``segments``.

    Follows ``properties``, ``additionalProperties`` (for ``*`` or names not listed), ``items``,
    ``prefixItems``, ``allOf``/``anyOf``/``oneOf`` branches and local ``$ref``s (the referenced
    schema is inlined at that place, so other users of the definition are unchanged).

    Returns:
        The new schema and how many places were widened (0: the pattern reaches nothing).
    """
    drop_siblings = siblings_of_ref_ignored(root)
    change = widen or make_nullable

    def walk(node: JSON, segs: Sequence[str], seen: frozenset[str]) -> tuple[JSON, int]:
        if not segs:
            widened = change(node)
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
                new_props[name], n = walk(props[name], rest, seen)
                count += n
            out["properties"] = new_props
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and (seg == WILDCARD or not listed):
            out["additionalProperties"], n = walk(extra, rest, seen)
            count += n
        if seg == WILDCARD or seg.isdigit():
            items = node.get("items")
            if isinstance(items, dict):
                out["items"], n = walk(items, rest, seen)
                count += n
            prefix = node.get("prefixItems")
            if isinstance(prefix, list):
                new_prefix = list(prefix)
                for i, branch in enumerate(prefix):
                    if seg == WILDCARD or int(seg) == i:
                        new_prefix[i], n = walk(branch, rest, seen)
                        count += n
                out["prefixItems"] = new_prefix
        for keyword in _COMPOSITIONS:
            branches = node.get(keyword)
            if isinstance(branches, list):
                new_branches = list(branches)
                for i, branch in enumerate(branches):
                    new_branches[i], n = walk(branch, segs, seen)
                    count += n
                out[keyword] = new_branches
        ref = node.get("$ref")
        if isinstance(ref, str) and ref not in seen:
            target = resolve_local_ref(root, ref)
            if target is not None:
                inlined, n = walk(target, segs, seen | {ref})
                if n:
                    count += n
                    siblings = {k: v for k, v in out.items() if k != "$ref"}
                    if drop_siblings or not siblings:
                        return inlined, count
                    out = {**siblings, "allOf": [*siblings.get("allOf", []), inlined]}
        return (out if count else node), count

    return walk(root, tuple(segments), frozenset())


def convert_openapi_nullable(root: JSON) -> tuple[JSON, list[Path], int]:
    """Turn OpenAPI 3.0 ``nullable: true`` into JSON Schema (``type`` union, ``null`` in ``enum``).

    Returns:
        The new schema, the instance paths (``*`` for any item or member) of the converted places
        that are reachable through ``properties``/``items``/``additionalProperties``, and how many
        keywords were converted. ``nullable: false`` is left alone (it means nothing in JSON Schema).
    """
    places: list[Path] = []
    converted = 0

    def walk(node: JSON, path: Path | None, widen: bool = True) -> JSON:
        nonlocal converted
        if isinstance(node, list):
            return [walk(item, None) for item in node]
        if not isinstance(node, dict):
            return node
        out: JSONObject = {}
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                out[key] = {name: walk(sub, None if path is None else (*path, name)) for name, sub in value.items()}
            elif key in ("items", "additionalProperties") and isinstance(value, dict):
                out[key] = walk(value, None if path is None else (*path, WILDCARD))
            elif key == "oneOf" and isinstance(value, list):
                # Exactly one branch may accept null, or oneOf rejects it: widen only while none does.
                taken = any(accepts_null(branch) for branch in value)
                branches = []
                for branch in value:
                    branches.append(walk(branch, path, widen=not taken))
                    taken = taken or accepts_null(branches[-1])
                out[key] = branches
            elif key in _COMPOSITIONS and isinstance(value, list):
                out[key] = [walk(branch, path) for branch in value]
            elif key == "nullable" and value is True:
                continue
            elif key in _DATA_KEYWORDS:
                out[key] = value
            else:
                out[key] = walk(value, None)
        if node.get("nullable") is True:
            converted += 1
            if not widen:
                return out  # a sibling oneOf branch already takes null
            if path is not None:
                places.append(path)
            return make_nullable(out)
        return out

    result = walk(root, ())
    return (result if converted else root), places, converted


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
    touched: list[str] = []

    def visit(node: JSON, path: Path) -> JSON:
        if not isinstance(node, dict):
            return node
        if len(path) > 3 * max_depth:
            raise RecursionError("schema nested too deeply")
        out: JSONObject | None = None

        def put(key: str, value: JSON) -> None:
            nonlocal out
            if out is None:
                out = dict(node)
            out[key] = value

        for key in _ONE:
            if isinstance(node.get(key), dict):
                new = visit(node[key], (*path, key))
                if new is not node[key]:
                    put(key, new)
        for key in _MAP:
            members = node.get(key)
            if isinstance(members, dict):
                new_members = {name: visit(sub, (*path, key, name)) for name, sub in members.items()}
                if any(new_members[name] is not members[name] for name in members):
                    put(key, new_members)
        for key in (*_LIST, "items"):
            items = node.get(key)
            if key == "items" and isinstance(items, dict):
                new = visit(items, (*path, key))
                if new is not items:
                    put(key, new)
            elif isinstance(items, list):
                new_items = [visit(sub, (*path, key, i)) for i, sub in enumerate(items)]
                if any(a is not b for a, b in zip(new_items, items, strict=True)):
                    put(key, new_items)
        dependencies = node.get("dependencies")
        if isinstance(dependencies, dict):
            new_deps = {k: visit(v, (*path, "dependencies", k)) for k, v in dependencies.items()}
            if any(new_deps[k] is not dependencies[k] for k in dependencies):
                put("dependencies", new_deps)
        current = out if out is not None else node
        result = fn(current, path)
        if result is not current:
            touched.append(format_pointer(path))
        return result

    new_root = visit(root, ())
    return new_root, touched
