"""Rule ``host_schemas``: input schemas a host cannot send on, made equivalent ones it can, for it alone.

Fault kind ``host_content`` (a host refuses what the spec allows; :mod:`~.host_profiles`). The
repair runs only for a client whose ``clientInfo`` names such a host.

- ``type`` beside ``anyOf`` for Gemini CLI (the Gemini API: "type and anyOf cannot be both
  populated", google-gemini/gemini-cli#4121): the node's ``type`` goes into each ``anyOf`` arm that
  has none, which accepts exactly the same values (``type`` and ``anyOf`` both had to hold; now each
  arm carries both). An arm with a ``type`` of its own keeps it. Nodes are rewritten children first,
  anywhere in the ``inputSchema``.

- property names outside ``^[a-zA-Z0-9_.-]{1,64}$`` for the Claude hosts (the Anthropic API
  answers 400 for every request while one tool has one, anthropics/claude-code#4668): each such
  name of the ``inputSchema``'s own ``properties`` (and of its ``required``) is advertised under
  a valid one, its other characters made ``_``, cut to 47, then ``_`` and 16 hex digits of a
  BLAKE2b digest of the name (hashed again with a counter while that is taken), so every listing
  of the tool gets the same names. The map is kept in the tool's
  ``_meta["dev.mcp-normalizer/original-keys"]`` (advertised -> own); a ``tools/call`` from that
  host sends the arguments upstream under the tool's own names (:mod:`mcp_normalizer.engine.request_rewrite`).

- an array without ``items`` for VS Code (Copilot Chat's ``normalizeToolSchema`` throws "tool
  parameters array type must have items", microsoft/vscode-copilot-chat
  ``src/extension/tools/common/toolSchemaNormalizer.ts``, and the chat request fails): each node of
  ``type: "array"`` with no ``items`` gets ``items: {}``, which takes any item as the absent keyword
  did (beside ``prefixItems`` too: the items after the tuple stay free). The default
  ``schema_shape`` repair already gives every other item-less input array ``items: {}`` for every
  client, so what is left for VS Code is the open 2020-12 tuple.

What the repair replaced is kept in the tool's ``_meta["dev.mcp-normalizer/original-keywords"]``
(pointer into the tool -> the node as listed).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable

from ...types import JSON, JSONObject
from ...wire.pointer import Path, format_pointer
from .base import META_PREFIX, ORIGINAL_KEYWORDS_KEY, Rewrite, Rule, ToolContext, meta_of, with_original_values
from .host_profiles import ARRAY_ITEMS, PROPERTY_KEY, TYPE_BESIDE_ANYOF
from .scan import ToolScan
from .schemas import map_schema

#: Property names the Anthropic API takes.
VALID_KEY = re.compile(r"[a-zA-Z0-9_.-]{1,64}")
#: ``_meta`` key of a tool's argument map: advertised name -> the tool's own.
ORIGINAL_KEYS_KEY = META_PREFIX + "original-keys"
_OTHER = re.compile(r"[^a-zA-Z0-9_.-]")
_BASE = 47
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


def key_names(keys: Iterable[str]) -> dict[str, str]:
    """The advertised name of each of ``keys`` (a schema's property names) outside
    :data:`VALID_KEY`: own name -> advertised name, unique among them all."""
    keys = list(keys)
    taken = set(keys)
    names: dict[str, str] = {}
    for key in keys:
        if VALID_KEY.fullmatch(key) is not None or key in names:
            continue
        base, raw, salt = _OTHER.sub("_", key)[:_BASE], key.encode("utf-8", "surrogatepass"), 0
        while True:
            digest = hashlib.blake2b(raw + (b"\0%d" % salt if salt else b""), digest_size=8).hexdigest()
            new = f"{base}_{digest}"
            if new not in taken:
                break
            salt += 1
        taken.add(new)
        names[key] = new
    return names


def _rename_keys(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, list[str], str] | None:
    """The tool with its ``inputSchema`` property names valid for the host, the pointers, why."""
    schema = tool.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(schema, dict) or not isinstance(properties, dict) or not ctx.client.host_needs(PROPERTY_KEY):
        return None
    names = key_names(properties)
    if not names:
        return None
    new_schema = {**schema, "properties": {names.get(k, k): v for k, v in properties.items()}}
    required = schema.get("required")
    if isinstance(required, list):
        new_schema["required"] = [names.get(k, k) if isinstance(k, str) else k for k in required]
    meta = meta_of(tool)
    meta[ORIGINAL_KEYS_KEY] = {new: own for own, new in names.items()}
    pointers = [format_pointer(("inputSchema", "properties", new)) for new in names.values()]
    why = f"{len(names)} property names outside [a-zA-Z0-9_.-]{{1,64}} renamed ({_source(ctx, PROPERTY_KEY)})"
    return {**tool, "inputSchema": new_schema, "_meta": meta}, pointers, why


def argument_map(tool: JSONObject) -> dict[str, str] | None:
    """The argument map this rule left in an advertised tool's ``_meta`` (advertised -> own), if any."""
    meta = tool.get("_meta")
    keys = meta.get(ORIGINAL_KEYS_KEY) if isinstance(meta, dict) else None
    if not isinstance(keys, dict) or not keys:
        return None
    return {k: v for k, v in keys.items() if isinstance(v, str)}


def host_argument_map(tool: JSONObject) -> dict[str, str] | None:
    """The argument map of a tool for a host that refuses some of its property names (advertised
    -> own), whichever client the tool was listed for: the map this rule left in its ``_meta``
    (listed for such a host), else the one this rule gives the tool's own ``inputSchema``
    property names (listed for another client: its names are the tool's own); ``None`` when every
    name is valid. A call from such a host is sent upstream by this map, never by the map of
    whichever client listed last (:mod:`mcp_normalizer.engine.request_rewrite`)."""
    found = argument_map(tool)
    if found is not None:
        return found
    schema = tool.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return None
    names = key_names(properties)
    return {new: own for own, new in names.items()} or None


def _source(ctx: ToolContext, fault: str) -> str:
    return ctx.client.fault_source(fault)


def _add_items(node: JSONObject, path: Path, kept: dict[str, JSON]) -> JSON:
    if node.get("type") != "array" or "items" in node:
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
    same values: an absent ``items`` and ``{}`` both take any item, beside ``prefixItems`` too), the
    pointers, why."""
    if not ctx.client.host_needs(ARRAY_ITEMS):
        return None
    return _map_input(tool, _add_items, f"items: {{}} given to arrays without items ({_source(ctx, ARRAY_ITEMS)})")


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
        or (client.host_needs(TYPE_BESIDE_ANYOF) and scan.schema_has("inputSchema", b'"anyOf":'))
        or (client.host_needs(ARRAY_ITEMS) and scan.schema_has("inputSchema", b'"array"'))
    )


RULE = Rule(
    "host_schemas",
    "host_content",
    "for a host that refuses a schema the spec allows, one it takes: property names outside [a-zA-Z0-9_.-]{1,64}"
    " renamed for the Claude hosts (calls sent upstream under the own names), type beside anyOf moved into each"
    " arm for Gemini CLI, items: {} given to arrays without items for VS Code; the originals kept in the tool's"
    " _meta",
    on_tool=_repair,
    tool_gate=_may_repair,
)
