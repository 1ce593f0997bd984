"""Static ``tools/list`` repairs of JSON Schemas: the first rung of the repair ladder
(``cases/faults.md``). Clients often reject a whole tool list for one bad schema, so these run
before any call. None changes what a schema accepts except where noted (a dangling ``$ref`` and a
``format`` assertion are relaxed, never tightened). Three change what is valid, because some
clients reject it: they apply only for clients not known to accept the original
(:mod:`mcp_normalizer.engine.rules.clients`), and keep what they remove in the tool's
``_meta["dev.mcp-normalizer/original-keywords"]`` (pointer into the tool -> value).

- ``schema_shape`` (``invalid_schema_shape``, ``spurious_output_schema``): ``properties: null`` or
  ``[]`` becomes ``{}``, ``required: null`` goes, an input-schema array without ``items`` gets
  ``items: {}``, a missing ``inputSchema`` becomes ``{"type": "object"}`` and an ``inputSchema`` root
  gets ``type: object``; an ``outputSchema`` that is not an object (``true``: vacuous, ``false``:
  impossible, ``null``) moves into the tool's ``_meta["dev.mcp-normalizer/original-output-schema"]``.
- ``schema_refs`` (``schema_ref_unresolvable``): local ``$ref``s are inlined (recursive ones and
  their ``$defs`` kept, and then each node whose ``$ref`` was inlined kept in ``_meta`` as it was;
  an emptied ``$defs`` is kept there whole); a ``$ref`` that resolves nowhere (dangling, split
  from its ``$defs``, or remote: never fetched) is dropped, which leaves the place unconstrained.
- ``schema_dialect`` (``schema_dialect``): a draft-04/06/07 ``outputSchema`` is translated to
  2020-12 (``definitions`` -> ``$defs``, array ``items`` -> ``prefixItems``, ``dependencies`` split,
  boolean ``exclusiveMaximum``) and loses its ``$schema``, so 2020-12-only validators accept it; an
  explicit 2020-12 ``$schema`` (the default) is dropped from both schemas.
- ``date_time_format`` (``format_date_time``): ``format: date-time`` / ``date`` / ``time`` in an
  ``outputSchema`` is moved into the ``description``: many servers emit date-times without an
  offset and clients that check formats reject them; no value changes. A precaution taken before
  any value is seen (``check`` reports a fault only for a value that fails).
- ``timestamp_objects`` (``type_mismatch``): a ``$defs`` entry named like a date or time whose
  schema is a bare ``{"type": "object"}`` (a schema-generator artifact for ``java.time`` and kin)
  becomes a date-time string.
"""

from __future__ import annotations

from typing import Any

from ...types import JSON, JSONObject
from ...wire.jsoncodec import fingerprint
from ...wire.pointer import Path, format_pointer
from .base import META_PREFIX, ORIGINAL_KEYWORDS_KEY, Rewrite, Rule, ToolContext, meta_of, with_original_values
from .declared import ORIGINAL_OUTPUT_SCHEMA_KEY
from .scan import ToolScan
from .schemas import SCHEMA_KEYS, map_schema, resolve_local_ref

#: ``_meta`` key keeping an ``inputSchema`` that was not an object.
ORIGINAL_INPUT_SCHEMA_KEY = META_PREFIX + "original-input-schema"

_STRUCTURAL = frozenset({"$defs", "definitions", "$id", "$schema", "$anchor"})
_ANNOTATIONS = frozenset(
    {"title", "description", "$comment", "examples", "default", "deprecated", "readOnly", "writeOnly"}
)
_DIALECT_2020 = ("https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2020-12/schema#")
_OLD_DRAFTS = ("draft-04", "draft-06", "draft-07")
_DATE_FORMATS = ("date-time", "date", "time")
#: ``$defs`` names (their last dotted segment, ``_``/``-`` ignored) that schema generators emit for
#: date and time types (``java.time.*``, pydantic, .NET).
_TIMESTAMP_NAMES = frozenset(
    {
        "date",
        "time",
        "datetime",
        "instant",
        "timestamp",
        "localdate",
        "localtime",
        "localdatetime",
        "offsetdatetime",
        "offsettime",
        "zoneddatetime",
        "datetimeoffset",
    }
)


def _with_schemas(tool: JSONObject, keys: tuple[str, ...], fix: Any) -> tuple[JSONObject, list[str]]:
    """Apply ``fix(schema, key) -> (new_schema, pointers)`` to the tool's schemas named ``keys``."""
    out, touched = tool, []
    for key in keys:
        schema = tool.get(key)
        if not isinstance(schema, dict):
            continue
        new, pointers = fix(schema, key)
        if new is not schema:
            out = {**out, key: new}
            touched += [f"/{key}{p}" for p in pointers] or [f"/{key}"]
    return out, touched


# -- schema_shape ------------------------------------------------------------------------------


def _shape(node: JSONObject, path: Path, *, items: bool) -> JSON:
    out = node
    if "properties" in node and (node["properties"] is None or node["properties"] == []):
        out = {**out, "properties": {}}
    if "required" in node and node["required"] is None:
        out = {k: v for k, v in out.items() if k != "required"}
    kind = node.get("type")
    is_array = kind == "array" or (isinstance(kind, list) and "array" in kind)
    if items and is_array and node.get("items") is None and "prefixItems" not in node:
        out = {**out, "items": {}}  # input schemas only: clients building arguments reject item-less arrays
    return out


def misshapen_input(node: JSONObject) -> bool:
    """True when :func:`_shape` repairs ``node`` of an input schema (itself, not its subschemas)."""
    return _shape(node, (), items=True) is not node


def _fix_shape(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    out, touched = tool, []
    if "outputSchema" in tool and not isinstance(tool["outputSchema"], dict):
        # true/false/null: clients want an object schema; true says nothing, false can never be met.
        kept = {**meta_of(tool), ORIGINAL_OUTPUT_SCHEMA_KEY: tool["outputSchema"]}
        out = {**{k: v for k, v in tool.items() if k != "outputSchema"}, "_meta": kept}
        touched.append("/outputSchema")
    if not isinstance(tool.get("inputSchema"), dict):
        out = {**out, "inputSchema": {"type": "object"}}
        if "inputSchema" in tool:  # a list, a string: kept, never dropped
            out["_meta"] = {**meta_of(out), ORIGINAL_INPUT_SCHEMA_KEY: tool["inputSchema"]}
        touched.append("/inputSchema")
    elif "type" not in tool["inputSchema"]:
        out = {**out, "inputSchema": {"type": "object", **tool["inputSchema"]}}
        touched.append("/inputSchema/type")
    out, more = _with_schemas(
        out,
        SCHEMA_KEYS,
        lambda schema, key: map_schema(schema, lambda node, path: _shape(node, path, items=key == "inputSchema")),
    )
    touched += more
    if out is tool:
        return None
    return out, Rewrite("schema_shape", "repaired malformed schema keywords", tuple(touched), "invalid schema shape")


# -- schema_refs -------------------------------------------------------------------------------


def _anchors(root: JSON) -> set[str]:
    """Plain-name fragments the schema declares (``$anchor``, draft-07 ``$id: "#name"``), and the
    ``$id``s of embedded resources (a ``$ref`` to one resolves inside the document)."""
    found: set[str] = set()

    def note(node: JSONObject, path: Path) -> JSON:
        if isinstance(node.get("$anchor"), str):
            found.add("#" + node["$anchor"])
        for key in ("$id", "id"):
            if isinstance(node.get(key), str) and node[key]:
                found.add(node[key])
        return node

    map_schema(root, note)
    return found


class _RefResolver:
    """:func:`_resolve_refs`' step (a class, not a closure that passes itself on: that would be a
    reference cycle per call, left for the cyclic collector)."""

    __slots__ = ("anchors", "dropped", "inline", "inlined", "old_dialect", "removed", "replaced", "root", "stack")

    def __init__(self, root: JSONObject, inline: bool) -> None:
        self.root = root
        self.removed: dict[str, JSON] = {}
        self.replaced: dict[str, JSON] = {}
        self.inline = inline
        self.anchors = _anchors(root)
        self.old_dialect = any(d in str(root.get("$schema", "")) for d in _OLD_DRAFTS)
        self.dropped: list[str] = []
        self.inlined: list[str] = []
        self.stack: list[str] = []

    def fix(self, node: JSONObject, path: Path) -> JSON:
        ref = node.get("$ref")
        if not isinstance(ref, str):
            return node
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if ref == "#" or ref.startswith("#/"):
            target = resolve_local_ref(self.root, ref)
            if target is None:
                self.dropped.append(format_pointer(path))
                self.removed[format_pointer((*path, "$ref"))] = ref
                return siblings
            if not self.inline or ref in self.stack or not isinstance(target, dict):
                return node  # recursive (or not inlining): the $ref and its $defs stay
            self.stack.append(ref)
            try:
                body, _ = map_schema(target, self.fix)
            finally:
                self.stack.pop()
            self.inlined.append(format_pointer(path))
            if not self.stack:  # (a path inside an inlined body is the body's own: its outermost node is kept)
                self.replaced[format_pointer(path)] = node
            if self.old_dialect or not siblings:
                return body  # draft-07 ignores the siblings of $ref
            return {**siblings, "allOf": [*siblings.get("allOf", []), body]}
        if ref in self.anchors or ref.split("#", 1)[0] in self.anchors:
            return node  # an anchor or an embedded resource of this very document
        self.dropped.append(format_pointer(path))  # remote (never fetched) or an anchor nobody declares
        self.removed[format_pointer((*path, "$ref"))] = ref
        return siblings


def _resolve_refs(root: JSONObject, *, inline: bool) -> tuple[JSON, list[str], list[str], dict[str, JSON]]:
    """Drop unresolvable ``$ref``s and, with ``inline``, inline the resolvable non-recursive ones.

    Returns:
        The new schema, the pointers of dropped refs, the pointers of inlined refs, and what was
        removed (pointer into ``root`` -> value: the dropped ``$ref`` strings, emptied ``$defs``,
        and, where a ``$defs`` stays because a recursive ``$ref`` still points into it, each
        outermost node whose ``$ref`` was inlined, as it was: the inlined copy alone does not say
        it was a ``$ref``, so nothing of the server's schema is lost).
    """
    resolver = _RefResolver(root, inline)
    new, _ = map_schema(root, resolver.fix)
    dropped, inlined, removed = resolver.dropped, resolver.inlined, resolver.removed
    if inline and isinstance(new, dict) and inlined:
        for container in ("$defs", "definitions"):
            if container in new and not _referenced(new, container):
                removed["/" + container] = root.get(container, new[container])
                new = {k: v for k, v in new.items() if k != container}  # everything was inlined
    if resolver.replaced and isinstance(new, dict) and ("$defs" in new or "definitions" in new):
        removed.update(resolver.replaced)
    return new, dropped, inlined, removed


def _referenced(schema: JSONObject, container: str) -> bool:
    """True when a ``$ref`` outside ``schema[container]`` still points into it."""
    rest = {k: v for k, v in schema.items() if k != container}
    return f'"#/{container}/'.encode() in fingerprint(rest)


def _fix_refs(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    notes: list[str] = []
    kept: dict[str, JSON] = {}
    inline = ctx.client.needs("schema_ref_local")

    def fix(schema: JSONObject, key: str) -> tuple[JSON, list[str]]:
        if "$ref" not in fingerprint(schema).decode():
            return schema, []
        new, dropped, inlined, removed = _resolve_refs(schema, inline=inline)
        # Inlining must not blow a schema up (a definition used in many places): then only drop.
        if inlined and len(fingerprint(new)) > max(4 * len(fingerprint(schema)), 65536):
            new, dropped, inlined, removed = _resolve_refs(schema, inline=False)
        if dropped:
            notes.append(f"{len(dropped)} unresolvable $ref dropped in {key}")
        if inlined:
            notes.append(f"{len(inlined)} local $ref inlined in {key} (for clients that cannot resolve $defs)")
        kept.update({f"/{key}{pointer}": value for pointer, value in removed.items()})
        return new, dropped + inlined

    out, touched = _with_schemas(tool, SCHEMA_KEYS, fix)
    if out is tool:
        return None
    if kept:
        out = with_original_values(out, kept, ORIGINAL_KEYWORDS_KEY)
    only_inlined = all("inlined" in note for note in notes)
    return out, Rewrite(
        "schema_refs", "resolved $ref", tuple(touched), "; ".join(notes), for_clients="schema_ref_local" * only_inlined
    )


# -- schema_dialect ----------------------------------------------------------------------------


def _to_2020(node: JSONObject, path: Path) -> JSON:
    out = dict(node)
    if "definitions" in out:
        defs = out.pop("definitions")
        out["$defs"] = {**(defs if isinstance(defs, dict) else {}), **out.get("$defs", {})}
    if isinstance(out.get("items"), list):
        out["prefixItems"] = out.pop("items")
        if "additionalItems" in out:
            out["items"] = out.pop("additionalItems")
    else:
        out.pop("additionalItems", None)  # ignored unless items is an array
    dependencies = out.pop("dependencies", None)
    if isinstance(dependencies, dict):
        required = {k: v for k, v in dependencies.items() if isinstance(v, list)}
        schemas = {k: v for k, v in dependencies.items() if not isinstance(v, list)}
        if required:
            out["dependentRequired"] = {**out.get("dependentRequired", {}), **required}
        if schemas:
            out["dependentSchemas"] = {**out.get("dependentSchemas", {}), **schemas}
    for bound, exclusive in (("maximum", "exclusiveMaximum"), ("minimum", "exclusiveMinimum")):
        if out.get(exclusive) is True and bound in out:  # draft-04 boolean form
            out[exclusive] = out.pop(bound)
        elif out.get(exclusive) is False:
            out.pop(exclusive)
    if isinstance(out.get("id"), str) and "$id" not in out and path == ():
        out["$id"] = out.pop("id")
    ref = out.get("$ref")
    if isinstance(ref, str):
        if ref.startswith("#/definitions/"):
            out["$ref"] = "#/$defs/" + ref[len("#/definitions/") :]
        # draft-07 ignores assertions next to $ref; keep the annotations and what structures the
        # document ($defs the refs point into, $id and $schema at the root).
        out = {k: v for k, v in out.items() if k == "$ref" or k in _ANNOTATIONS or k in _STRUCTURAL}
    return out if out != node else node


def _fix_dialect(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    reasons: list[str] = []
    kept: dict[str, JSON] = {}
    faults: list[str] = []

    def fix(schema: JSONObject, key: str) -> tuple[JSON, list[str]]:
        dialect = schema.get("$schema")
        if not isinstance(dialect, str):
            return schema, []
        if dialect in _DIALECT_2020 and ctx.client.needs("schema_dialect_2020"):
            reasons.append(f"{key}: explicit 2020-12 $schema is the default (for clients rejecting it)")
            kept[f"/{key}/$schema"] = dialect
            faults.append("schema_dialect_2020")
            return {k: v for k, v in schema.items() if k != "$schema"}, ["/$schema"]
        old = key == "outputSchema" and any(d in dialect for d in _OLD_DRAFTS)
        if old and ctx.client.needs("schema_dialect_draft"):
            translated, _ = map_schema(schema, _to_2020)
            reasons.append(f"{key}: {dialect} translated to 2020-12 (for 2020-12-only clients)")
            new = {k: v for k, v in translated.items() if k != "$schema"}
            kept[f"/{key}/$schema"] = dialect
            faults.append("schema_dialect_draft")
            if new != {k: v for k, v in schema.items() if k != "$schema"}:
                kept[f"/{key}"] = schema  # keywords were translated: the whole schema as listed
            return new, ["/$schema"]
        return schema, []

    out, touched = _with_schemas(tool, SCHEMA_KEYS, fix)
    if out is tool:
        return None
    out = with_original_values(out, kept, ORIGINAL_KEYWORDS_KEY)
    return out, Rewrite(
        "schema_dialect", "made the schema 2020-12", tuple(touched), "; ".join(reasons), for_clients=faults[0]
    )


# -- date_time_format --------------------------------------------------------------------------


def _unformat(node: JSONObject, path: Path, kept: dict[str, JSON]) -> JSON:
    form = node.get("format")
    if form not in _DATE_FORMATS:
        return node
    kept[format_pointer(("outputSchema", *path, "format"))] = form
    note = f"{form} (RFC 3339; offset or parts may be missing)"
    description = node.get("description")
    text = f"{description} [{note}]" if isinstance(description, str) and description else note
    return {**{k: v for k, v in node.items() if k != "format"}, "description": text}


def _fix_date_formats(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    if not ctx.client.needs("format_date_time"):
        return None
    kept: dict[str, JSON] = {}
    out, touched = _with_schemas(
        tool, ("outputSchema",), lambda schema, key: map_schema(schema, lambda node, path: _unformat(node, path, kept))
    )
    if out is tool:
        return None
    out = with_original_values(out, kept, ORIGINAL_KEYWORDS_KEY)
    reason = (
        "clients that check formats reject a date-time sent without a time-zone offset, which many servers send"
        " (a precaution for those clients: check reports a value only when one fails)"
    )
    return out, Rewrite(
        "date_time_format",
        "moved date/time format assertions to the description",
        tuple(touched),
        reason,
        for_clients="format_date_time",
    )


# -- timestamp_objects -------------------------------------------------------------------------


def _is_bare_object(node: JSON) -> bool:
    return isinstance(node, dict) and node.get("type") == "object" and set(node) <= {"type", *_ANNOTATIONS}


def _timestamp_name(name: str) -> bool:
    return name.rsplit(".", 1)[-1].replace("_", "").replace("-", "").lower() in _TIMESTAMP_NAMES


def _fix_timestamps(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    schema = tool.get("outputSchema")
    if not isinstance(schema, dict):
        return None
    out, touched = schema, []
    for container in ("$defs", "definitions"):
        defs = schema.get(container)
        if not isinstance(defs, dict):
            continue
        fixed = {
            name: {**sub, "type": "string", "format": "date-time"}
            if _is_bare_object(sub) and _timestamp_name(name)
            else sub
            for name, sub in defs.items()
        }
        changed = [name for name in defs if fixed[name] is not defs[name]]
        if changed:
            out = {**out, container: fixed}
            touched += [format_pointer(("outputSchema", container, name)) for name in changed]
    if out is schema:
        return None
    reason = "a bare object schema named as a date or time (generator artifact); values are strings"
    return {**tool, "outputSchema": out}, Rewrite(
        "timestamp_objects", "typed timestamps as strings", tuple(touched), reason
    )


def _may_shape(scan: ToolScan, ctx: ToolContext) -> bool:
    tool = scan.tool
    if "outputSchema" in tool and not isinstance(tool["outputSchema"], dict):
        return True
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict) or "type" not in schema:
        return True
    return scan.has(b'properties":null', b'properties":[]', b'required":null') or scan.schema_has(
        "inputSchema", b'"array"'
    )


def _may_date_formats(scan: ToolScan, ctx: ToolContext) -> bool:
    return ctx.client.needs("format_date_time") and scan.has(b'format":"date', b'format":"time"')


SCHEMA_SHAPE = Rule(
    "schema_shape",
    "invalid_schema_shape",
    "properties: null/[] -> {}, required: null dropped, items: {} for arrays, inputSchema made an object schema.",
    on_tool=_fix_shape,
    tool_gate=_may_shape,
)
SCHEMA_REFS = Rule(
    "schema_refs",
    "schema_ref_unresolvable",
    "Inline local $refs (recursive ones kept); drop dangling and remote $refs (never fetched).",
    on_tool=_fix_refs,
    tool_gate=lambda scan, ctx: scan.has(b'$ref":'),
)
SCHEMA_DIALECT = Rule(
    "schema_dialect",
    "schema_dialect",
    "Translate draft-04/06/07 outputSchemas to 2020-12 and drop $schema; drop explicit 2020-12 $schema.",
    on_tool=_fix_dialect,
    tool_gate=lambda scan, ctx: scan.has(b'$schema":'),
)
TIMESTAMP_OBJECTS = Rule(
    "timestamp_objects",
    "type_mismatch",
    "A bare {type: object} $defs entry named like a date/time becomes a date-time string.",
    on_tool=_fix_timestamps,
    tool_gate=lambda scan, ctx: scan.has(b'$defs":', b'definitions":'),
)
DATE_TIME_FORMAT = Rule(
    "date_time_format",
    "format_date_time",
    "Move format: date-time/date/time in outputSchema into the description (values unchanged).",
    on_tool=_fix_date_formats,
    tool_gate=_may_date_formats,
)
