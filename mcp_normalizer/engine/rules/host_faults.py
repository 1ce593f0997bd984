"""The host faults: the closed set of constraint keys ``hosts.toml`` may name, each with its one
repair and an oracle. Pure data and pure functions, no I/O.

A *host fault* is something the spec allows that a host, or the model API behind it, refuses
(:mod:`~.host_profiles`). Each key here names one such fault, the one rule that repairs it (it runs
for the hosts whose profile names the key, and for no one else), what that repair changes, whether
it makes the model send arguments in another form (which the proxy converts back), and an oracle:
``violates(value)`` says whether a content block (for a result fault) or a ``tools/list`` member
(for a listing fault) has the fault. The oracles are written from the hosts' published rules, not
from the repair code (they import none of it), so a test can judge the repair's output with them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from ...types import JSON

#: An SVG image block (``image/svg+xml``): the Anthropic API takes JPEG, PNG, GIF and WebP only.
IMAGE_SVG = "image_svg"
#: A ``resource_link`` content block: rmcp ``=3.1.3`` (Codex, ChatGPT) fails the whole call.
RESOURCE_LINK = "resource_link_block"

#: A schema node with ``type`` beside ``anyOf``: older Gemini CLIs send the schema to the Gemini
#: API, which answers "type and anyOf cannot be both populated".
TYPE_BESIDE_ANYOF = "type_beside_anyof"

#: A tool name the spec allows but outside ``^[a-zA-Z0-9_-]{1,64}$`` (a dot, 65 to 128 characters):
#: Claude Desktop and claude.ai refuse every tool of the server.
TOOL_NAME = "tool_name_strict"

#: An ``inputSchema`` property name outside ``^[a-zA-Z0-9_.-]{1,64}$``: the Anthropic API answers
#: 400 for every request while one tool has one.
PROPERTY_KEY = "property_key_strict"

#: An array schema (``type: "array"``) without ``items``: VS Code's Copilot Chat throws "tool
#: parameters array type must have items" and the chat request fails.
ARRAY_ITEMS = "array_without_items"

#: A ``$schema`` keyword anywhere in an ``inputSchema``: the Gemini API answers 400 ('Unknown name
#: "$schema" ... Cannot find field') for the whole request, in ``parameters`` and in
#: ``parametersJsonSchema`` alike.
SCHEMA_KEYWORD = "dollar_schema_gemini"
#: ``const`` or ``additionalProperties`` on an ``anyOf`` arm: the Gemini API's ``Schema`` has neither
#: ('Unknown name "const" at ...any_of[0]'), and the whole request fails.
ANYOF_ARM_KEYWORD = "anyof_arm_keyword_gemini"
#: A ``required`` naming a property its node does not define: the Gemini API answers 400
#: ('parameters.required[0]: property is not defined').
REQUIRED_UNDEFINED = "required_undefined_gemini"
#: An ``enum`` holding a value that is not a string (numbers, booleans): the Gemini API's
#: ``Schema.enum`` is a list of strings ('Invalid value at ...enum[0] (TYPE_STRING), 0').
ENUM_NON_STRING = "enum_non_string"

#: A ``structuredContent`` that is no JSON object (an array, a string, a number): valid from
#: 2026-07-28 on (SEP-2106), but Claude Code before 2.1.332 ("expects record"), Claude Desktop and
#: claude.ai ("Tool execution failed") refuse it, whatever the era.
STRUCTURED_NOT_OBJECT = "structured_content_not_object"

#: What an oracle judges: a content block of a ``CallToolResult``, a member of ``tools/list``, or
#: a whole ``CallToolResult``.
Subject = Literal["block", "tool", "result"]


@dataclass(frozen=True, slots=True)
class Constraint:
    """One key of the closed set.

    Attributes:
        key: the key, as ``hosts.toml`` names it.
        rule: the one rule that repairs it (a name of :data:`~mcp_normalizer.engine.rules.RULES`).
        subject: what :attr:`violates` judges (``block``: a content block; ``tool``: a ``tools/list``
            member; ``result``: a ``CallToolResult``).
        what: the fault, for the log, ``check`` and the docs.
        repair: what the proxy changes for a host that refuses it (the docs' tables).
        changes_arguments: whether the repair makes the model send arguments (or a tool name) in
            another form, which the proxy converts back on ``tools/call``.
        violates: the oracle, independent of the repair code.
    """

    key: str
    rule: str
    subject: Subject
    what: str
    repair: str
    changes_arguments: bool
    violates: Callable[[JSON], bool]


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONE = (
    "items",
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


def schema_nodes(schema: JSON) -> Iterator[dict[str, JSON]]:
    """Every schema object of ``schema``, itself first, through the keywords that hold subschemas
    (a property named like a keyword is a property, never a keyword)."""
    stack: list[JSON] = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield node
        for key in _SCHEMA_MAPS:
            members = node.get(key)
            if isinstance(members, dict):
                stack.extend(members.values())
        for key in _SCHEMA_LISTS:
            arms = node.get(key)
            if isinstance(arms, list):
                stack.extend(arms)
        for key in _SCHEMA_ONE:
            child = node.get(key)
            if isinstance(child, (dict, list)):
                stack.extend(child if isinstance(child, list) else [child])


def _input_schema(tool: JSON) -> JSON:
    return tool.get("inputSchema") if isinstance(tool, dict) else None


def _svg_image(block: JSON) -> bool:
    """The Anthropic API's image rule (docs.anthropic.com, vision: JPEG, PNG, GIF, WebP only) as it
    meets an SVG: an ``image`` block whose media type is ``image/svg+xml`` (parameters aside)."""
    if not isinstance(block, dict) or block.get("type") != "image":
        return False
    media = block.get("mimeType")
    return isinstance(media, str) and media.split(";", 1)[0].strip().lower() == "image/svg+xml"


def _resource_link(block: JSON) -> bool:
    """rmcp ``=3.1.3``'s content types (text, image, audio, resource): a ``resource_link`` is none."""
    return isinstance(block, dict) and block.get("type") == "resource_link"


def _structured_not_object(result: JSON) -> bool:
    """Claude Code's result check (its MCP client's zod ``structuredContent: z.record(...)``: "expects
    record"): a ``structuredContent`` present and not ``null`` must be a JSON object."""
    if not isinstance(result, dict) or "structuredContent" not in result:
        return False
    value = result["structuredContent"]
    return value is not None and not isinstance(value, dict)


def _type_beside_anyof(tool: JSON) -> bool:
    """The Gemini API's "type and anyOf cannot be both populated", at any node of the inputSchema."""
    return any("type" in node and "anyOf" in node for node in schema_nodes(_input_schema(tool)))


_CLAUDE_APP_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def _tool_name(tool: JSON) -> bool:
    """The Claude apps' ``FrontendRemoteMcpToolDefinition.name``: ``^[a-zA-Z0-9_-]{1,64}$``."""
    name = tool.get("name") if isinstance(tool, dict) else None
    return isinstance(name, str) and _CLAUDE_APP_NAME.fullmatch(name) is None


_ANTHROPIC_KEY = re.compile(r"[a-zA-Z0-9_.-]{1,64}")


def _property_key(tool: JSON) -> bool:
    """The Anthropic API's ``input_schema.properties`` keys: ``^[a-zA-Z0-9_.-]{1,64}$``, checked on
    the top-level properties (the Bedrock Converse report of the same error says only those)."""
    schema = _input_schema(tool)
    members = schema.get("properties") if isinstance(schema, dict) else None
    return isinstance(members, dict) and any(_ANTHROPIC_KEY.fullmatch(key) is None for key in members)


def _array_without_items(tool: JSON) -> bool:
    """Copilot Chat's ``normalizeToolSchema``: a node of type ``array`` must have ``items``."""
    for node in schema_nodes(_input_schema(tool)):
        kind = node.get("type")
        if (kind == "array" or (isinstance(kind, list) and "array" in kind)) and "items" not in node:
            return True
    return False


#: The closed set, by key.
CONSTRAINTS: Mapping[str, Constraint] = {
    c.key: c
    for c in (
        Constraint(
            IMAGE_SVG,
            "host_content",
            "block",
            "an image block of type `image/svg+xml`",
            "an `image/svg+xml` image becomes a text block with the SVG source",
            False,
            _svg_image,
        ),
        Constraint(
            RESOURCE_LINK,
            "host_content",
            "block",
            "a `resource_link` content block",
            "a `resource_link` block becomes a text block naming it (`<name>: <uri> (<mimeType>)`)",
            False,
            _resource_link,
        ),
        Constraint(
            TYPE_BESIDE_ANYOF,
            "host_schemas",
            "tool",
            "`type` beside `anyOf` in an inputSchema node",
            "an inputSchema node with `type` beside `anyOf` gets the type in each arm instead (the same values"
            " accepted)",
            False,
            _type_beside_anyof,
        ),
        Constraint(
            TOOL_NAME,
            "tool_names",
            "tool",
            "a tool name outside ^[a-zA-Z0-9_-]{1,64}$ (a dot, more than 64 characters)",
            "a tool name outside `^[a-zA-Z0-9_-]{1,64}$` (a dot, 65 to 128 characters: valid, but every tool of"
            " the server is refused) is advertised under one inside it, as rule `tool_names` does, and called"
            " upstream by its own",
            True,
            _tool_name,
        ),
        Constraint(
            PROPERTY_KEY,
            "host_schemas",
            "tool",
            "an inputSchema property name outside ^[a-zA-Z0-9_.-]{1,64}$",
            "an inputSchema property name outside `^[a-zA-Z0-9_.-]{1,64}$` is advertised under a valid one and"
            " called upstream by its own",
            True,
            _property_key,
        ),
        Constraint(
            ARRAY_ITEMS,
            "host_schemas",
            "tool",
            'an inputSchema node of type `"array"` without `items`',
            "an open 2020-12 tuple (`prefixItems` without `items`) gets `items: {}` (the same values); other"
            " item-less arrays get `items: {}` for every client (`schema_shape`)",
            False,
            _array_without_items,
        ),
        Constraint(
            STRUCTURED_NOT_OBJECT,
            "object_result",
            "result",
            "a `structuredContent` that is no JSON object (an array, a string, a number)",
            "the tool's `outputSchema` that admits non-objects is advertised wrapped as `{result: <schema>}`"
            " (`object_root`, marked `x-fastmcp-wrap-result`) and each non-object `structuredContent` is sent"
            " as `{result: <value>}` (`wrap_result`, `object_result`), as before 2026-07-28, in every era",
            False,
            _structured_not_object,
        ),
    )
}


def _schema_keyword(tool: JSON) -> bool:
    """The Gemini API's function parameters: ``$schema`` is no field of its ``Schema`` (``parameters``)
    nor a keyword its ``parametersJsonSchema`` takes; at any node of the inputSchema."""
    return any("$schema" in node for node in schema_nodes(_input_schema(tool)))


def _anyof_arm_keyword(tool: JSON) -> bool:
    """The Gemini API's ``Schema`` (ai.google.dev ``Schema`` reference: no ``const``, no
    ``additionalProperties`` in an ``anyOf`` arm): an arm of any ``anyOf`` of the inputSchema that
    holds either."""
    for node in schema_nodes(_input_schema(tool)):
        arms = node.get("anyOf")
        if isinstance(arms, list) and any(
            isinstance(arm, dict) and ("const" in arm or "additionalProperties" in arm) for arm in arms
        ):
            return True
    return False


def _required_undefined(tool: JSON) -> bool:
    """The Gemini API's check of ``required``: each name must be a key of the same node's
    ``properties`` (a node without ``properties`` defines none)."""
    for node in schema_nodes(_input_schema(tool)):
        required = node.get("required")
        if not isinstance(required, list):
            continue
        members = node.get("properties")
        defined = members if isinstance(members, dict) else {}
        if any(isinstance(name, str) and name not in defined for name in required):
            return True
    return False


def _enum_non_string(tool: JSON) -> bool:
    """The Gemini API's ``Schema.enum``: a list of strings (``TYPE_STRING``); any other value in an
    ``enum`` of the inputSchema fails the request."""
    for node in schema_nodes(_input_schema(tool)):
        values = node.get("enum")
        if isinstance(values, list) and any(not isinstance(value, str) for value in values):
            return True
    return False


#: The Gemini keys (appended to :data:`CONSTRAINTS`; ``gemini_schemas`` repairs them).
GEMINI_CONSTRAINTS: tuple[Constraint, ...] = (
    Constraint(
        SCHEMA_KEYWORD,
        "gemini_schemas",
        "tool",
        "a `$schema` keyword in an inputSchema",
        "every `$schema` of the inputSchema is removed (the dialect marker only: the same values accepted)",
        False,
        _schema_keyword,
    ),
    Constraint(
        ANYOF_ARM_KEYWORD,
        "gemini_schemas",
        "tool",
        "`const` or `additionalProperties` on an `anyOf` arm of an inputSchema",
        "an `anyOf` arm's `const` becomes a one-value `enum` (the same values); its `additionalProperties`"
        " is removed and written into the arm's description",
        False,
        _anyof_arm_keyword,
    ),
    Constraint(
        REQUIRED_UNDEFINED,
        "gemini_schemas",
        "tool",
        "a `required` naming a property its node does not define",
        "the names a node's `required` lists without defining them are dropped from it and written into its"
        " description",
        False,
        _required_undefined,
    ),
    Constraint(
        ENUM_NON_STRING,
        "gemini_schemas",
        "tool",
        "an `enum` holding numbers or booleans",
        "an argument's `enum` of numbers or booleans becomes the same values as strings (`type: string`, the"
        " original type in the description); a call's string argument is sent upstream as the value it"
        " stands for",
        True,
        _enum_non_string,
    ),
)

CONSTRAINTS = {**CONSTRAINTS, **{c.key: c for c in GEMINI_CONSTRAINTS}}
