"""Judges of the model APIs behind the hosts (issue 39): what each family refuses of an MCP tool.

One judge per family of ``mcp_normalizer/hosts.toml`` (``anthropic``, ``openai``, ``openai-strict``,
``gemini``); each has ``refused(tool) -> list[str]``: the reasons the family refuses the tool (a
``tools/list`` member as a host receives it), each ``"<rule>: <detail> [<source>]"``, empty when it
takes it. They are built from the real converters and validators installed here where one exists
(``jsonschema``'s 2020-12 metaschema for Anthropic, ``openai-agents``' strict conversion for OpenAI
strict, ``google-genai``'s MCP conversion for Gemini) and, for what those do not check, from the
APIs' published rules and the reports, with the same sources as ``hosts.toml``.

Written independently of the proxy: nothing here imports ``mcp_normalizer`` (its oracles in
``engine/rules/host_faults.py`` included), so a test can judge the proxy's output with them.

The hosts rename MCP tools before they reach the API (Claude Code and Codex: ``mcp__<server>__<tool>``
with other characters replaced, Codex hashing long names, openai/codex#8174; Gemini CLI: characters
outside ``[a-zA-Z0-9_.-]`` replaced, ``tests/host_gemini.py``), so their judges leave the tool name to
the host; ``openai-agents`` sends the MCP name as it is (``MCPUtil.to_function_tool``), so its judge
checks the OpenAI pattern.
"""

from __future__ import annotations

import logging
import math
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

__all__ = ["ANTHROPIC", "GEMINI", "JUDGES", "OPENAI", "OPENAI_STRICT", "Judge", "schema_nodes", "strict_conversion"]

# -- sources (as hosts.toml names them) ------------------------------------------------------------

ANTHROPIC_DOCS = "platform.claude.com/docs/agents-and-tools/tool-use/define-tools"
ANTHROPIC_2020_12 = "anthropics/claude-code#586, #2758"
ANTHROPIC_KEYS = "anthropics/claude-code#4668, #79418"
ANTHROPIC_ROOT = "anthropics/claude-code#5319, #27337, #40075"
OPENAI_NAMES = "openai/codex#8174; codex-rs/codex-mcp/src/mcp_tool_names.rs"
OPENAI_ROOT = "Dicklesworthstone/flywheel_connectors#49"
OPENAI_400 = "github/copilot-cli#2223; can1357/oh-my-pi#2652"
OPENAI_ITEMS = "ruvnet/ruflo#1294"
CODEX_TUPLE = "hosts.toml host.codex rejects (Codex 0.171.0: 'failed to build tool spec', tests/test_check_hosts.py)"
STRICT_SOURCE = "openai/openai-python#1733; agents.strict_schema.ensure_strict_json_schema"
FAULTS_MD = "cases/faults.md 'Kinds from the autumn-2026 reports'"
GEMINI_ENUM = "JetBrains/mcp-jetbrains#71"
GEMINI_400 = "zed-industries/zed#45552; Kilo-Org/kilocode#11950; GetStream/Vision-Agents PR #513"
GEMINI_SCHEMA = "danny-avila/LibreChat#13845"
GEMINI_NAMES = (
    "cloud.google.com Vertex AI FunctionDeclaration reference;"
    " google-genai 3.6.1 types.py FunctionDeclaration.parameters"
)
GEMINI_ANYOF = "google-gemini/gemini-cli#4121 ('type and anyOf cannot be both populated')"
GENAI = "google-genai 3.6.1 _mcp_utils.mcp_to_gemini_tool"

JSON_TYPES = frozenset({"null", "boolean", "object", "array", "number", "integer", "string"})

# -- walking a schema ------------------------------------------------------------------------------

_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_ONE = (
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
)


def schema_nodes(schema: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Every schema object of ``schema`` (itself first) with its path, through the keywords that
    hold subschemas (a property named like a keyword is a property); ``$ref`` is not followed, so a
    cycle of ``$defs`` ends. ``items`` holding a list (draft-07 tuples) is walked too."""
    stack: list[tuple[tuple[Any, ...], Any]] = [(path, schema)]
    while stack:
        where, node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield where, node
        for key in _MAPS:
            members = node.get(key)
            if isinstance(members, dict):
                stack.extend(((*where, key, name), sub) for name, sub in members.items())
        for key in _LISTS:
            arms = node.get(key)
            if isinstance(arms, list):
                stack.extend(((*where, key, i), arm) for i, arm in enumerate(arms))
        items = node.get("items")
        if isinstance(items, list):
            stack.extend(((*where, "items", i), arm) for i, arm in enumerate(items))
        elif isinstance(items, dict):
            stack.append(((*where, "items"), items))
        stack.extend(((*where, key), node[key]) for key in _ONE if isinstance(node.get(key), dict))


def _at(path: tuple[Any, ...]) -> str:
    return "/" + "/".join(str(step) for step in path)


def _types(node: dict[str, Any]) -> list[Any]:
    kind = node.get("type")
    return kind if isinstance(kind, list) else [] if kind is None else [kind]


def _is_object(node: dict[str, Any]) -> bool:
    return "object" in _types(node)


def _of_type(value: Any, kind: Any) -> bool:
    """Whether ``value`` (JSON) is an instance of the JSON type ``kind``."""
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and math.isfinite(value) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return False


# -- rules shared by families ----------------------------------------------------------------------


def _required_booleans(schema: Any) -> list[str]:
    return [
        f"required_boolean: `required: {node['required']}` at {_at(p)} (draft-03)"
        for p, node in schema_nodes(schema)
        if isinstance(node.get("required"), bool)
    ]


def _type_names(schema: Any) -> list[str]:
    found = []
    for p, node in schema_nodes(schema):
        if "type" in node and any(not isinstance(k, str) or k not in JSON_TYPES for k in _types(node) or [None]):
            found.append(f"invalid_type_keyword: `type: {node['type']!r}` at {_at(p)} is no JSON type")
    return found


def _tuple_items(schema: Any) -> list[str]:
    return [
        f"legacy_tuple_items: `items` is an array at {_at(p)} (draft-07 tuple)"
        for p, node in schema_nodes(schema)
        if isinstance(node.get("items"), list)
    ]


def _enum_not_array(schema: Any) -> list[str]:
    return [
        f"enum_not_array: `enum: {node['enum']!r}` at {_at(p)}"
        for p, node in schema_nodes(schema)
        if "enum" in node and not isinstance(node["enum"], list)
    ]


def _objects_without_properties(schema: Any) -> list[str]:
    return [
        f"object_without_properties: an object schema at {_at(p)} has no `properties`"
        for p, node in schema_nodes(schema)
        if _is_object(node) and not isinstance(node.get("properties"), dict)
    ]


def _enum_type_conflicts(schema: Any) -> list[str]:
    found = []
    for p, node in schema_nodes(schema):
        enum, kinds = node.get("enum"), _types(node)
        if isinstance(enum, list) and enum and kinds:
            if not any(_of_type(value, kind) for value in enum for kind in kinds):
                found.append(f"enum_type_conflict: no value of `enum` at {_at(p)} is a {'/'.join(map(str, kinds))}")
    return found


def _arrays_without_items(schema: Any) -> list[str]:
    return [
        f"array_without_items: an array schema at {_at(p)} has no `items`"
        for p, node in schema_nodes(schema)
        if "array" in _types(node) and "items" not in node
    ]


def _never_branches(schema: Any) -> list[str]:
    return [
        f"never_branch_anyof: `not` at {_at(p)} (a branch nothing matches; the API has no `not`)"
        for p, node in schema_nodes(schema)
        if "not" in node
    ]


def _root_object(schema: Any, source: str) -> list[str]:
    if not isinstance(schema, dict):
        return [f"input_schema_missing: the input schema is {schema!r}, not an object schema [{source}]"]
    if schema.get("type") != "object":
        return [f"input_object_root: the input schema's root `type` is {schema.get('type')!r}, not 'object' [{source}]"]
    return []


def _sourced(reasons: list[str], source: str) -> list[str]:
    return [f"{reason} [{source}]" for reason in reasons]


# -- the judges ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Judge:
    """A model-API family's judge: ``refused(tool)`` lists why the family refuses ``tool`` (an MCP
    ``tools/list`` member, JSON), empty when it takes it. ``renamed_by_host``: the family's hosts
    send the tool under a name of their own (the name is then not judged)."""

    family: str
    check: Callable[[dict[str, Any]], list[str]]
    renamed_by_host: bool = True

    def refused(self, tool: dict[str, Any]) -> list[str]:
        """The reasons the family refuses ``tool`` (deduplicated, in order)."""
        return list(dict.fromkeys(self.check(tool)))


_ANTHROPIC_NAME = re.compile(r"[a-zA-Z0-9_-]{1,128}")
_ANTHROPIC_KEY = re.compile(r"[a-zA-Z0-9_.-]{1,64}")
_METASCHEMA = Draft202012Validator(Draft202012Validator.META_SCHEMA)


def _anthropic(tool: dict[str, Any]) -> list[str]:
    """The Anthropic Messages API's tool rules: an ``input_schema`` of ``type: object`` (define-tools),
    no root ``anyOf``/``oneOf``/``allOf`` (claude-code#5319), a valid 2020-12 schema (claude-code#586,
    #2758: the metaschema catches ``required`` booleans, type names that are no JSON type, a non-array
    ``enum``, draft-07 tuple ``items``), property keys ``^[a-zA-Z0-9_.-]{1,64}$`` (claude-code#4668:
    the error names ``input_schema.properties``, the top-level keys)."""
    schema = tool.get("inputSchema")
    found = _root_object(schema, ANTHROPIC_DOCS)
    if not isinstance(schema, dict):
        return found
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            found.append(f"input_combinator: a root `{key}` [{ANTHROPIC_ROOT}]")
    named = [*_required_booleans(schema), *_type_names(schema), *_enum_not_array(schema), *_tuple_items(schema)]
    found += _sourced(named, ANTHROPIC_2020_12)
    if not named:
        for error in list(_METASCHEMA.iter_errors(schema))[:3]:
            found.append(
                f"draft_2020_12: {error.message[:160]} at {_at(tuple(error.absolute_path))} [{ANTHROPIC_2020_12}]"
            )
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for key in properties:
            if _ANTHROPIC_KEY.fullmatch(key) is None:
                found.append(
                    f"property_key_strict: property {key!r} outside ^[a-zA-Z0-9_.-]{{1,64}}$ [{ANTHROPIC_KEYS}]"
                )
    return found


def anthropic_name(tool: dict[str, Any]) -> list[str]:
    """The Anthropic API's tool name rule (``^[a-zA-Z0-9_-]{1,128}$``, define-tools), for a host
    that sends the MCP name as it is (the Claude hosts put their own prefix and replace the rest)."""
    name = tool.get("name")
    if isinstance(name, str) and _ANTHROPIC_NAME.fullmatch(name):
        return []
    return [f"tool_name: {name!r} outside ^[a-zA-Z0-9_-]{{1,128}}$ [{ANTHROPIC_DOCS}]"]


_OPENAI_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def _openai_schema(schema: Any) -> list[str]:
    """The non-strict OpenAI function rules on ``parameters`` (what ``hosts.toml`` lists for
    ``model_api.openai``) and Codex's tool spec (draft-07 tuples)."""
    found = _root_object(schema, OPENAI_ROOT)
    if not isinstance(schema, dict):
        return found
    for key in ("anyOf", "oneOf", "allOf", "enum", "not"):
        if key in schema:
            found.append(f"input_combinator: a root `{key}` in parameters [{OPENAI_ROOT}]")
    found += _sourced([*_objects_without_properties(schema), *_enum_type_conflicts(schema)], OPENAI_400)
    found += _sourced(_arrays_without_items(schema), OPENAI_ITEMS)
    found += _sourced(_tuple_items(schema), CODEX_TUPLE)
    return found


def _openai(tool: dict[str, Any]) -> list[str]:
    return _openai_schema(tool.get("inputSchema"))


def openai_name(name: Any) -> list[str]:
    """The OpenAI function name rule (``^[a-zA-Z0-9_-]{1,64}$``, openai/codex#8174)."""
    if isinstance(name, str) and _OPENAI_NAME.fullmatch(name):
        return []
    return [f"tool_name: {name!r} outside ^[a-zA-Z0-9_-]{{1,64}}$ [{OPENAI_NAMES}]"]


@dataclass(frozen=True)
class StrictConversion:
    """What ``openai-agents`` (0.24.0, ``MCPUtil.to_function_tool(tool, server, True)``) makes of an
    MCP tool: the function's name, its parameters and whether it goes strict (else the non-strict
    fallback); ``error`` when the conversion itself raises (the agent then lists none of the
    server's tools)."""

    name: str | None
    parameters: dict[str, Any] | None
    strict: bool
    error: str | None = None


def strict_conversion(tool: dict[str, Any]) -> StrictConversion:
    """Convert ``tool`` as ``openai-agents`` does for an agent with ``convert_schemas_to_strict``:
    the MCP SDK's ``Tool`` model first (what its client parses), then ``MCPUtil.to_function_tool``
    (``agents/mcp/util.py``: ``properties: {}`` added to a root without, ``ensure_strict_json_schema``
    on a copy, the schema as it was when that raises)."""
    import mcp.types
    from agents.mcp import MCPServerStreamableHttp, MCPUtil

    server = MCPServerStreamableHttp(params={"url": "http://127.0.0.1:9/unused"})  # (never connected)
    try:
        parsed = mcp.types.Tool.model_validate(tool)
        agents_log = logging.getLogger("openai.agents")
        level = agents_log.level
        agents_log.setLevel(logging.WARNING)  # (its info line for the fallback)
        try:
            function = MCPUtil.to_function_tool(parsed, server, True)
        finally:
            agents_log.setLevel(level)
    except Exception as exc:  # (any error refuses the tool)
        return StrictConversion(None, None, False, f"{type(exc).__name__}: {str(exc)[:200]}")
    return StrictConversion(function.name, dict(function.params_json_schema), function.strict_json_schema)


def _strict_schema(schema: dict[str, Any]) -> list[str]:
    """OpenAI strict function calling: every object closed (``additionalProperties: false``) with
    every property required (openai/openai-python#1733); no ``not`` and no draft-03 ``required``
    booleans (faults.md: never_branch_anyof and required_boolean break OpenAI strict)."""
    found = []
    for p, node in schema_nodes(schema):
        if _is_object(node):
            if node.get("additionalProperties") is not False:
                found.append(f"strict_open_object: an object at {_at(p)} without additionalProperties: false")
            properties = node.get("properties")
            names = set(properties) if isinstance(properties, dict) else set()
            required = node.get("required")
            if not isinstance(required, list) or set(required) != names:
                found.append(f"strict_required: the object at {_at(p)} does not require every property")
    found = _sourced(found, STRICT_SOURCE)
    found += _sourced([*_never_branches(schema), *_required_booleans(schema)], FAULTS_MD)
    return found


def _openai_strict(tool: dict[str, Any]) -> list[str]:
    """What ``openai-agents`` sends (its strict conversion, or its non-strict fallback), judged by
    the OpenAI rules for that mode; a conversion that raises refuses the tool (and the server's list)."""
    converted = strict_conversion(tool)
    if converted.error is not None or converted.parameters is None:
        return [f"agents_conversion: {converted.error} [{STRICT_SOURCE}]"]
    found = openai_name(converted.name)
    found += _openai_schema(converted.parameters)
    if converted.strict:
        found += _strict_schema(converted.parameters)
    return found


_GEMINI_KEY = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]{0,63}")


def _genai_conversion(tool: dict[str, Any]) -> tuple[Any, str | None]:
    """``google-genai``'s MCP conversion (``_mcp_utils.mcp_to_gemini_tool``: its ``JSONSchema`` model,
    then ``Schema.from_json_schema`` into a ``FunctionDeclaration``) of the MCP SDK's ``Tool``: the
    declaration's ``parameters``, or the error."""
    import mcp.types
    from google.genai import _mcp_utils

    try:
        parsed = mcp.types.Tool.model_validate(tool)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (pydantic's serializer warnings on non-string enums)
            converted = _mcp_utils.mcp_to_gemini_tool(parsed)
    except Exception as exc:  # (any error refuses the tool)
        return None, f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    declarations = converted.function_declarations or []
    return (declarations[0].parameters if declarations else None), None


def _genai_nodes(schema: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every ``google.genai.types.Schema`` node of a converted declaration."""
    if schema is None:
        return
    yield path, schema
    for name, sub in (schema.properties or {}).items():
        yield from _genai_nodes(sub, (*path, "properties", name))
    if schema.items is not None:
        yield from _genai_nodes(schema.items, (*path, "items"))
    for i, arm in enumerate(schema.any_of or []):
        yield from _genai_nodes(arm, (*path, "anyOf", i))


def _in_any_of(schema: Any) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    for p, node in schema_nodes(schema):
        arms = node.get("anyOf")
        if isinstance(arms, list):
            for i, arm in enumerate(arms):
                yield from schema_nodes(arm, (*p, "anyOf", i))


def _gemini(tool: dict[str, Any]) -> list[str]:
    """The Gemini API as google-genai's MCP conversion reaches it, and the API's published rules the
    conversion does not check: no ``$schema`` (LibreChat#13845), string enums only (mcp-jetbrains#71),
    no ``const`` or ``additionalProperties`` inside ``anyOf`` and no ``required`` naming an undefined
    property (zed#45552, kilocode#11950, Vision-Agents #513), no ``not`` (faults.md:
    never_branch_anyof), parameter names ``[a-zA-Z_][a-zA-Z0-9_]{0,63}`` (the Vertex AI reference and
    google-genai's ``FunctionDeclaration.parameters``: "must start with a letter or an underscore and
    must only contain chars a-z, A-Z, 0-9, or underscores with a maximum length of 64"), and, on the
    converted declaration, no node with both ``type`` and ``anyOf`` (gemini-cli#4121)."""
    schema = tool.get("inputSchema")
    found = _root_object(schema, GEMINI_NAMES)
    parameters, error = _genai_conversion(tool)
    if error is not None:
        found.append(f"genai_conversion: {error} [{GENAI}]")
    for p, node in _genai_nodes(parameters):
        if node.type is not None and node.any_of:
            found.append(f"type_beside_anyof: the converted node at {_at(p)} has type and anyOf [{GEMINI_ANYOF}]")
    if not isinstance(schema, dict):
        return found
    for p, node in schema_nodes(schema):
        if "$schema" in node:
            found.append(f"schema_keyword: `$schema` at {_at(p)} [{GEMINI_SCHEMA}; {GEMINI_400}]")
        enum = node.get("enum")
        if isinstance(enum, list) and any(not isinstance(value, str) for value in enum):
            found.append(f"enum_non_string: a non-string enum value at {_at(p)} [{GEMINI_ENUM}]")
        required, properties = node.get("required"), node.get("properties")
        if isinstance(required, list) and (properties is not None or _is_object(node)):
            names = set(properties) if isinstance(properties, dict) else set()
            undefined = [name for name in required if name not in names]
            if undefined:
                found.append(
                    f"required_undefined: `required` names {undefined!r} at {_at(p)}, no such property [{GEMINI_400}]"
                )
    for p, node in _in_any_of(schema):
        for key in ("const", "additionalProperties"):
            if key in node:
                found.append(f"inside_anyof: `{key}` inside anyOf at {_at(p)} [{GEMINI_400}]")
    found += _sourced(_never_branches(schema), FAULTS_MD)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for key in properties:
            if _GEMINI_KEY.fullmatch(key) is None:
                found.append(f"property_name: parameter {key!r} outside [a-zA-Z_][a-zA-Z0-9_]{{0,63}} [{GEMINI_NAMES}]")
    return found


ANTHROPIC = Judge("anthropic", _anthropic)
OPENAI = Judge("openai", _openai)
OPENAI_STRICT = Judge("openai-strict", _openai_strict, renamed_by_host=False)
GEMINI = Judge("gemini", _gemini)

#: The judges by family.
JUDGES: dict[str, Judge] = {judge.family: judge for judge in (ANTHROPIC, OPENAI, OPENAI_STRICT, GEMINI)}
