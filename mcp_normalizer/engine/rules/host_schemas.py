"""Rule ``host_schemas``: input schemas a host cannot send on, made equivalent ones it can, for it alone.

Fault kind ``host_content`` (a host refuses what the spec allows; :mod:`~.host_profiles`). The
repair runs only for a client whose ``clientInfo`` names such a host.

- ``type`` beside ``anyOf`` for Gemini CLI (the Gemini API: "type and anyOf cannot be both
  populated", google-gemini/gemini-cli#4121): the node's ``type`` goes into each ``anyOf`` arm that
  has none, which accepts exactly the same values (``type`` and ``anyOf`` both had to hold; now each
  arm carries both). An arm with a ``type`` of its own keeps it. Nodes are rewritten children first,
  anywhere in the ``inputSchema``.

- property names a model API refuses, renamed (:func:`key_names`): for the Claude hosts, those
  of the ``inputSchema``'s own ``properties`` outside ``^[a-zA-Z0-9_.-]{1,64}$`` (the Anthropic
  API answers 400 for every request while one tool has one, anthropics/claude-code#4668); for a
  client of the Gemini API (Gemini CLI, or a ``model_api`` setting naming ``gemini``), those
  outside ``^[a-zA-Z_][a-zA-Z0-9_]{0,63}$`` (google-genai ``FunctionDeclaration.parameters``:
  "Parameter names must start with a letter or an underscore and must only contain chars a-z,
  A-Z, 0-9, or underscores with a maximum length of 64") at every argument's place: the root, a
  nested object, an item object, an ``anyOf``/``oneOf``/``allOf`` arm of one (not under
  ``$defs``, ``additionalProperties`` or ``patternProperties``, where no call's member could be
  told apart). Each such name (and its entries in ``required``) is advertised under a valid one,
  its other characters made ``_`` (``_`` put first where Gemini wants a letter), cut to 47, then
  ``_`` and 16 hex digits of a BLAKE2b digest of the name (hashed again with a counter while that
  is one of the tool's names), so every listing of the tool gets the same names, at every place.
  The map is kept in the tool's ``_meta["dev.mcp-normalizer/original-keys"]`` (advertised -> own);
  a ``tools/call`` from that client sends the arguments upstream under the tool's own names, at
  every place (:mod:`mcp_normalizer.engine.request_rewrite`), each value's bytes as they came.

- an array without ``items`` for VS Code (Copilot Chat's ``normalizeToolSchema`` throws "tool
  parameters array type must have items", microsoft/vscode-copilot-chat
  ``src/extension/tools/common/toolSchemaNormalizer.ts``, and the chat request fails): each node of
  ``type: "array"`` with no ``items`` gets ``items: {}``, which takes any item as the absent keyword
  did (beside ``prefixItems`` too: the items after the tuple stay free). The default
  ``schema_shape`` repair already gives every other item-less input array ``items: {}`` for every
  client, so what is left for VS Code is the open 2020-12 tuple. The OpenAI API reads the same
  rule (ruvnet/ruflo#1294) and none of ``prefixItems`` (its Structured Outputs guide, "Supported
  schemas": of the array keywords only ``items``, ``minItems`` and ``maxItems``), so for the OpenAI
  families and VS Code a closed tuple (``prefixItems`` with ``items: false``, or its
  ``{"not": {}}``) gets ``items: {"anyOf": [each position's schema]}``, ``maxItems`` its length and
  the positions in its ``description`` (:func:`_closed_tuple`): the same arrays for a 2020-12
  reader, every array of the tuple for one that ignores ``prefixItems``, and the order told to the
  model. (Rule ``schema_tuple`` leaves such a client's ``inputSchema`` tuples to this one.)

What the repair replaced is kept in the tool's ``_meta["dev.mcp-normalizer/original-keywords"]``
(pointer into the tool -> the node as listed).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from ...errors import DecodeError
from ...types import JSON, ArgumentKeys, JSONObject
from ...wire.jsoncodec import dumps
from ...wire.pointer import Path, format_pointer
from .base import META_PREFIX, ORIGINAL_KEYWORDS_KEY, Rewrite, Rule, ToolContext, meta_of, with_original_values
from .host_faults import PROPERTY_KEY_GEMINI
from .host_profiles import ARRAY_ITEMS, PROPERTY_KEY, TYPE_BESIDE_ANYOF
from .scan import ToolScan
from .schemas import map_schema

#: Property names the Anthropic API takes.
VALID_KEY = re.compile(r"[a-zA-Z0-9_.-]{1,64}")
#: ``_meta`` key of a tool's argument map: advertised name -> the tool's own.
ORIGINAL_KEYS_KEY = META_PREFIX + "original-keys"
_OTHER = re.compile(r"[^a-zA-Z0-9_.-]")
_BASE = 47
_MAX_DEPTH = 64
#: A JSON object member whose name has the shape :func:`key_names` invents (in a request body).
_INVENTED_MEMBER = re.compile(rb'"[a-zA-Z0-9_.-]{0,%d}_[0-9a-f]{16}"\s*:' % _BASE)


def mentions_invented_key(body: bytes) -> bool:
    """Whether ``body`` (a POST body) has an object member named as :func:`key_names` names an
    advertised key: a call that may need the tool's argument map (a real key may have that shape
    too; the caller then only looks the map up)."""
    return _INVENTED_MEMBER.search(body) is not None


def _spread_type(node: JSONObject, path: Path, kept: dict[str, JSON]) -> JSON:
    arms = node.get("anyOf")
    if "type" not in node or not isinstance(arms, list) or not arms:
        return node
    kind = node["type"]
    new_arms: list[JSON] = []
    for arm in arms:
        if isinstance(arm, dict) and "type" not in arm:
            new_arms.append({"type": kind, **arm})
        elif arm is True:
            new_arms.append({"type": kind})
        else:
            new_arms.append(arm)
    kept[format_pointer(("inputSchema", *path))] = node
    return {**{k: v for k, v in node.items() if k != "type"}, "anyOf": new_arms}


@dataclass(frozen=True, slots=True)
class KeyRule:
    """A model API family's rule for property names, and how :func:`key_names` makes valid ones.

    Attributes:
        valid: the names the family takes (matched whole).
        other: a character :func:`key_names` replaces with ``_``.
        lead: the first character must be a letter or ``_`` (else ``_`` is put before the name).
        nested: the rule holds at every argument's place (nested objects, item objects, ``anyOf``
            arms), not at the root's ``properties`` alone.
        text: the rule as the log writes it.
    """

    valid: re.Pattern[str]
    other: re.Pattern[str]
    lead: bool
    nested: bool
    text: str


#: The Anthropic API's ``input_schema.properties`` keys (the top-level ones: the error names them).
ANTHROPIC_KEYS = KeyRule(VALID_KEY, _OTHER, False, False, "[a-zA-Z0-9_.-]{1,64}")
#: The Gemini API's parameter names (google-genai ``FunctionDeclaration.parameters``), at every
#: argument's place.
GEMINI_KEYS = KeyRule(
    re.compile(r"[a-zA-Z_][a-zA-Z0-9_]{0,63}"), re.compile(r"[^a-zA-Z0-9_]"), True, True, "[a-zA-Z_][a-zA-Z0-9_]{0,63}"
)
_LEAD = re.compile(r"[a-zA-Z_]")


def key_names(keys: Iterable[str], rule: KeyRule = ANTHROPIC_KEYS, taken: Iterable[str] = ()) -> dict[str, str]:
    """The advertised name of each of ``keys`` (a schema's property names) outside ``rule``: own
    name -> advertised name, unique among them all and ``taken`` (the tool's other names): its
    other characters made ``_`` (and ``_`` put first where the rule wants a letter there), cut to
    47, then ``_`` and 16 hex digits of a BLAKE2b digest of the name (hashed again with a counter
    while that is taken). The same name gets the same advertised name at every place of a tool."""
    keys = list(keys)
    taken = {*keys, *taken}
    names: dict[str, str] = {}
    for key in keys:
        if rule.valid.fullmatch(key) is not None or key in names:
            continue
        base = rule.other.sub("_", key)
        if rule.lead and _LEAD.match(base) is None:
            base = "_" + base
        base, raw, salt = base[:_BASE], key.encode("utf-8", "surrogatepass"), 0
        while True:
            digest = hashlib.blake2b(raw + (b"\0%d" % salt if salt else b""), digest_size=8).hexdigest()
            new = f"{base}_{digest}"
            if new not in taken:
                break
            salt += 1
        taken.add(new)
        names[key] = new
    return names


_ARMS = ("anyOf", "oneOf", "allOf")


def _objects(
    schema: JSON, names: Mapping[str, str], place: str = "", path: Path = (), depth: int = 0
) -> Iterator[tuple[str, Path, JSONObject]]:
    """Each node of an input schema at an argument's place, with that place and its path in the
    schema. The place is a JSON pointer into the arguments under the advertised names (``names``:
    own -> advertised), ``*`` for any item. The nodes: the root, the nodes under ``properties``
    and ``items`` (one schema) of such a node, and the arms of its ``anyOf``/``oneOf``/``allOf``
    (the same place). Not followed: ``$ref``, ``$defs``, ``additionalProperties``,
    ``patternProperties`` (no call's member could be told apart there)."""
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return
    yield place, path, schema
    members = schema.get("properties")
    if isinstance(members, dict):
        for key, member in members.items():
            new = names.get(key, key)
            yield from _objects(member, names, place + format_pointer((new,)), (*path, "properties", new), depth + 1)
    yield from _objects(schema.get("items"), names, place + "/*", (*path, "items"), depth + 1)
    for keyword in _ARMS:
        arms = schema.get(keyword)
        if isinstance(arms, list):
            for index, arm in enumerate(arms):
                yield from _objects(arm, names, place, (*path, keyword, index), depth + 1)


def _own_names(schema: JSON, rule: KeyRule) -> tuple[list[str], list[str]]:
    """The property names ``rule`` judges (the root's, or every argument place's) and all of them."""
    judged: list[str] = []
    every: list[str] = []
    for place, _, node in _objects(schema, {}):
        members = node.get("properties")
        if isinstance(members, dict):
            every += members
            if place == "" or rule.nested:
                judged += members
    return list(dict.fromkeys(judged)), every


def _renamed_schema(node: JSON, names: Mapping[str, str], nested: bool, depth: int = 0) -> JSON:
    """``node`` with its ``properties`` names and ``required`` entries renamed by ``names`` (own ->
    advertised): at the root alone, or (``nested``) at every argument place (:func:`_objects`)."""
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return node
    out = node
    members = node.get("properties")
    if isinstance(members, dict):
        inner = {k: _renamed_schema(v, names, nested, depth + 1) if nested else v for k, v in members.items()}
        if any(k in names for k in members) or any(inner[k] is not members[k] for k in members):
            out = {**out, "properties": {names.get(k, k): v for k, v in inner.items()}}
        required = node.get("required")
        if isinstance(required, list) and any(isinstance(k, str) and k in names for k in required):
            out = {**out, "required": [names.get(k, k) if isinstance(k, str) else k for k in required]}
    if not nested:
        return out
    items = node.get("items")
    if isinstance(items, dict):
        new_items = _renamed_schema(items, names, nested, depth + 1)
        if new_items is not items:
            out = {**out, "items": new_items}
    for keyword in _ARMS:
        arms = node.get(keyword)
        if isinstance(arms, list):
            new_arms = [_renamed_schema(arm, names, nested, depth + 1) for arm in arms]
            if any(a is not b for a, b in zip(new_arms, arms, strict=True)):
                out = {**out, keyword: new_arms}
    return out


def _names_for(schema: JSON, rule: KeyRule) -> dict[str, str]:
    """Own -> advertised, for the names of ``schema`` that ``rule`` refuses."""
    judged, every = _own_names(schema, rule)
    return key_names(judged, rule, every)


def _rule_for(ctx: ToolContext) -> tuple[KeyRule, str] | None:
    """The key rule the client's model API has (the stricter when it has both), and its fault."""
    if ctx.client.host_needs(PROPERTY_KEY_GEMINI):
        return GEMINI_KEYS, PROPERTY_KEY_GEMINI
    if ctx.client.host_needs(PROPERTY_KEY):
        return ANTHROPIC_KEYS, PROPERTY_KEY
    return None


def _rename_keys(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, list[str], str] | None:
    """The tool with its ``inputSchema`` property names valid for the host, the pointers, why."""
    schema = tool.get("inputSchema")
    found = _rule_for(ctx)
    if not isinstance(schema, dict) or found is None:
        return None
    rule, fault = found
    if not _has_invalid(schema, rule):
        return None  # (most tools: a plain look before the names are made)
    names = _names_for(schema, rule)
    if not names:
        return None
    new_schema = _renamed_schema(schema, names, rule.nested)
    meta = meta_of(tool)
    meta[ORIGINAL_KEYS_KEY] = {new: own for own, new in names.items()}
    kept = meta.get(ORIGINAL_KEYWORDS_KEY)
    if isinstance(kept, dict) and kept:  # (an earlier rule's places, written in the names as listed)
        meta[ORIGINAL_KEYWORDS_KEY] = {advertised_pointer(p, names, rule.nested): v for p, v in kept.items()}
    advertised = set(names.values())
    pointers = [
        format_pointer(("inputSchema", *path, "properties", key))
        for _, path, node in _objects(new_schema, {})
        if isinstance(node.get("properties"), dict)
        for key in node["properties"]
        if key in advertised
    ]
    why = f"{len(names)} property names outside {rule.text} renamed ({_source(ctx, fault)})"
    return {**tool, "inputSchema": new_schema, "_meta": meta}, pointers, why


def advertised_pointer(pointer: str, names: Mapping[str, str], nested: bool) -> str:
    """``pointer`` (into a tool, RFC 6901) with each property name at an argument's place (the
    root's ``properties``; with ``nested``, every place :func:`_objects` walks) written under its
    advertised name (``names``: own -> advertised): a place an earlier rule kept in the tool's
    ``_meta``, as the tool is listed."""
    steps = [s.replace("~1", "/").replace("~0", "~") for s in pointer.split("/")[1:]]
    if steps[:1] != ["inputSchema"]:
        return pointer
    at_place, index = True, 1
    while index < len(steps) and at_place:
        step = steps[index]
        following = steps[index + 1] if index + 1 < len(steps) else None
        if step == "properties" and following is not None:
            steps[index + 1] = names.get(following, following)
            index, at_place = index + 2, nested
        elif nested and step == "items" and not (following or "").isdigit():
            index += 1
        elif nested and step in _ARMS and (following or "").isdigit():
            index += 2
        else:
            at_place = False
    return format_pointer(steps)


def argument_map(tool: JSONObject) -> dict[str, str] | None:
    """The argument map this rule left in an advertised tool's ``_meta`` (advertised -> own), if any."""
    meta = tool.get("_meta")
    keys = meta.get(ORIGINAL_KEYS_KEY) if isinstance(meta, dict) else None
    if not isinstance(keys, dict) or not keys:
        return None
    return {k: v for k, v in keys.items() if isinstance(v, str)}


def host_argument_map(tool: JSONObject) -> ArgumentKeys | None:
    """The argument names of a tool for a host that refuses some of its property names, whichever
    client the tool was listed for: the names each family's rule gives the tool's own
    ``inputSchema`` (read back through the map this rule left in its ``_meta``, when it was listed
    for such a host), advertised -> own, with the places they may be at (the root for the Anthropic
    API; every argument place for the Gemini API, where the places are written in Gemini's names).
    ``None`` when every name is valid for every family. A call from such a host is sent upstream by
    these names, never by the map of whichever client listed last
    (:mod:`mcp_normalizer.engine.request_rewrite`). The advertised names of the two families never
    name a property of the tool (:func:`key_names` keeps them out of the tool's names), so one map
    serves both."""
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        return None
    listed = argument_map(tool)
    if listed is None and not _has_invalid(schema):
        return None
    own = _renamed_schema(schema, listed, True) if listed else schema
    anthropic = _names_for(own, ANTHROPIC_KEYS)
    gemini = _names_for(own, GEMINI_KEYS)
    names = {
        **(listed or {}),
        **{new: old for old, new in anthropic.items()},
        **{new: old for old, new in gemini.items()},
    }
    if not names:
        return None
    places = {"", *(place for place, _, node in _objects(own, gemini) if _has_member(node, gemini))}
    return ArgumentKeys(names, tuple(sorted(places)))


def gemini_named(tool: JSONObject) -> JSON:
    """The tool's ``inputSchema`` with the property names a client of the Gemini API is shown (its
    own names, read back through the map this rule left in its ``_meta`` when it was listed for a
    host that refuses some, then renamed as :data:`GEMINI_KEYS` wants)."""
    schema = tool.get("inputSchema")
    listed = argument_map(tool)
    own = _renamed_schema(schema, listed, True) if listed else schema
    names = _names_for(own, GEMINI_KEYS)
    return _renamed_schema(own, names, True) if names else own


def _has_member(node: JSONObject, names: Mapping[str, str]) -> bool:
    members = node.get("properties")
    return isinstance(members, dict) and any(k in names for k in members)


def _has_invalid(schema: JSON, rule: KeyRule = GEMINI_KEYS) -> bool:
    """Whether a property name ``rule`` judges (the root's; with :attr:`KeyRule.nested`, every
    argument place's, as :func:`_objects` walks them) is outside it (Gemini's rule, the stricter,
    by default). A plain walk: what most tools of a listing cost."""
    valid = rule.valid.fullmatch
    stack: list[tuple[JSON, int]] = [(schema, 0)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, dict) or depth > _MAX_DEPTH:
            continue
        members = node.get("properties")
        if isinstance(members, dict):
            for key in members:
                if valid(key) is None:
                    return True
            if rule.nested:
                stack.extend((member, depth + 1) for member in members.values())
        if not rule.nested:
            return False
        items = node.get("items")
        if isinstance(items, dict):
            stack.append((items, depth + 1))
        for keyword in _ARMS:
            arms = node.get(keyword)
            if isinstance(arms, list):
                stack.extend((arm, depth + 1) for arm in arms)
    return False


def _source(ctx: ToolContext, fault: str) -> str:
    return ctx.client.fault_source(fault)


def _is_array(node: JSONObject) -> bool:
    kind = node.get("type")
    return kind == "array" or (isinstance(kind, list) and "array" in kind)


def _closing(items: JSON) -> bool:
    """Whether ``items`` beside ``prefixItems`` takes no further item: ``false``, or ``not`` of an
    always schema (``boolean_subschema``'s spelling of ``false``)."""
    return items is False or (isinstance(items, dict) and set(items) == {"not"} and items["not"] in ({}, True))


def _closed_tuple(node: JSONObject, prefix: list[JSON]) -> JSONObject:
    """A closed 2020-12 tuple (``prefixItems: [A, B]``, ``items: false``) with an ``items`` the
    model APIs take: ``{"anyOf": [A, B]}``, ``maxItems`` the tuple's length (or less, as the node
    said) and the positions in the ``description``. A 2020-12 reader takes the same arrays (with
    ``maxItems`` no item is read by ``items``); one that ignores ``prefixItems`` (the OpenAI API's
    subset, a draft-07 validator) takes every array the tuple takes, each item one of the
    positions' schemas, and the model reads the order in the description."""
    bound = node.get("maxItems")
    whole = isinstance(bound, int) and not isinstance(bound, bool)
    out: JSONObject = {k: v for k, v in node.items() if k != "items"}
    out["items"] = {"anyOf": list(prefix)}
    out["maxItems"] = min(bound, len(prefix)) if whole else len(prefix)  # type: ignore[type-var]
    try:
        positions = dumps(prefix).decode("utf-8")
    except DecodeError:  # pragma: no cover - the schema came off the wire as JSON
        positions = repr(prefix)
    note = f"items by position: {positions}; no further items"
    description = node.get("description")
    out["description"] = f"{description} ({note})" if isinstance(description, str) and description else note
    return out


def _add_items(node: JSONObject, path: Path, kept: dict[str, JSON]) -> JSON:
    prefix = node.get("prefixItems")
    if isinstance(prefix, list) and prefix and _closing(node.get("items")) and _is_array(node):
        kept[format_pointer(("inputSchema", *path))] = node
        return _closed_tuple(node, prefix)
    if "items" in node or not (node.get("type") == "array" or ("prefixItems" in node and _is_array(node))):
        return node
    kept[format_pointer(("inputSchema", *path))] = node
    return {**node, "items": {}}


def _spread(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, list[str], str] | None:
    """The tool with no ``type`` beside ``anyOf`` in its ``inputSchema``, the pointers, why."""
    if not ctx.client.host_needs(TYPE_BESIDE_ANYOF):
        return None
    return _map_input(tool, _spread_type, f"type moved into the anyOf arms ({_source(ctx, TYPE_BESIDE_ANYOF)})")


def _items(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, list[str], str] | None:
    """The tool with ``items: {}`` in each array node of its ``inputSchema`` that had none (the
    same values: an absent ``items`` and ``{}`` both take any item, beside ``prefixItems`` too), and
    each closed tuple's ``items: false`` made :func:`_closed_tuple`'s; the pointers, why."""
    if not ctx.client.host_needs(ARRAY_ITEMS):
        return None
    why = f"items given to arrays without items and to closed tuples ({_source(ctx, ARRAY_ITEMS)})"
    return _map_input(tool, _add_items, why)


def _map_input(
    tool: JSONObject, fix: Callable[[JSONObject, Path, dict[str, JSON]], JSON], reason: str
) -> tuple[JSONObject, list[str], str] | None:
    """``fix`` applied to every node of the tool's ``inputSchema``, each node it replaced kept."""
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        return None
    kept: dict[str, JSON] = {}
    new, touched = map_schema(schema, lambda node, path: fix(node, path, kept))
    if new is schema:
        return None
    out = with_original_values({**tool, "inputSchema": new}, kept, ORIGINAL_KEYWORDS_KEY)
    return out, [f"/inputSchema{p}" for p in touched], reason


#: The repairs of this rule, in the order they run on a tool.
_STEPS = (_rename_keys, _spread, _items)


def _repair(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    if not ctx.client.host_faults:  # (a host, or a client a model_api setting names the family of)
        return None
    pointers: list[str] = []
    reasons: list[str] = []
    out = tool
    for step in _STEPS:
        done = step(out, ctx)
        if done is not None:
            out = done[0]
            pointers += done[1]
            reasons.append(done[2])
    if not reasons:
        return None
    why = f"{'; '.join(reasons)}, for {ctx.client.title}"
    return out, Rewrite("host_schemas", "made a schema the host takes", tuple(pointers), why)


def _may_repair(scan: ToolScan, ctx: ToolContext) -> bool:
    client = ctx.client
    if not client.host_faults:
        return False
    return (
        client.host_needs(PROPERTY_KEY)
        or client.host_needs(PROPERTY_KEY_GEMINI)
        or (client.host_needs(TYPE_BESIDE_ANYOF) and scan.schema_has("inputSchema", b'"anyOf":'))
        or (client.host_needs(ARRAY_ITEMS) and scan.schema_has("inputSchema", b'"array"'))
    )


RULE = Rule(
    "host_schemas",
    "host_content",
    "for a host that refuses a schema the spec allows, one it takes: property names outside [a-zA-Z0-9_.-]{1,64}"
    " renamed for the Claude hosts, and outside [a-zA-Z_][a-zA-Z0-9_]{0,63} at every argument place for a client"
    " of the Gemini API (calls sent upstream under the own names), type beside anyOf moved into each"
    " arm for Gemini CLI, items given to arrays without items and closed tuples for VS Code and the OpenAI"
    " hosts; the originals kept in the tool's"
    " _meta",
    on_tool=_repair,
    tool_gate=_may_repair,
)
