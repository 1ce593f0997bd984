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

import base64
import binascii
import json
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

#: A parameter name outside ``^[a-zA-Z_][a-zA-Z0-9_]{0,63}$`` (a dot, a hyphen, a leading digit,
#: unicode) at an argument's place of an ``inputSchema``: google-genai documents that the Gemini
#: API's parameter names "must start with a letter or an underscore and must only contain chars
#: a-z, A-Z, 0-9, or underscores with a maximum length of 64".
PROPERTY_KEY_GEMINI = "property_key_gemini"

#: A ``structuredContent`` that is no JSON object (an array, a string, a number): valid from
#: 2026-07-28 on (SEP-2106), but Claude Code before 2.1.332 ("expects record"), Claude Desktop and
#: claude.ai ("Tool execution failed") refuse it, whatever the era.
STRUCTURED_NOT_OBJECT = "structured_content_not_object"

#: An ``inputSchema`` node of type ``"object"`` without ``properties`` (the Go SDK's default for
#: ``any`` fields): the OpenAI API answers 400 (Copilot CLI, Codex with GPT models).
OBJECT_PROPERTIES = "object_without_properties"

#: A draft-07 tuple, ``items`` holding an array of schemas (and ``additionalItems``), in an
#: ``inputSchema`` the model APIs read as 2020-12, where ``items`` is one schema: the Anthropic API
#: refuses it, google-genai fails on it, Codex does not offer the tool.
LEGACY_TUPLE = "legacy_tuple_items"

#: An ``anyOf`` arm no value matches (zod's ``{"not": {}}``, or ``false``): Kimi, OpenAI strict and
#: Gemini refuse ``not``.
NEVER_BRANCH = "never_branch_anyof"

#: An ``enum`` no value of which is of the node's ``type`` (an enum of strings on an ``array`` node,
#: on a ``null`` branch): the OpenAI API answers 400 (Copilot CLI, Codex).
ENUM_TYPE = "enum_type_conflict"

#: An image block whose ``mimeType`` is not what its bytes are (``image/webp`` holding a PNG): the
#: Anthropic API answers 400 for the whole turn.
IMAGE_MIME = "image_mime_mismatch"

#: A raster image block (PNG, JPEG, GIF, WebP) whose bytes do not hold the header that gives its
#: width and height (the first bytes of a cut file, as the 8-byte PNG signature alone): Claude Code
#: 2.1.332 shows its model "[Image could not be processed: ... dimensions could not be read from the
#: file header ...]" and Codex 0.171.0 "image content omitted because it could not be processed".
IMAGE_UNDECODABLE = "image_undecodable"

#: A ``tools/call`` result without a ``structuredContent`` (or a falsy one) whose first content block
#: is text holding JSON that is no object (``[]``, ``42``, ``"x"``, ``null``): Gemini CLI 0.61.0's
#: ``McpComplianceTransport`` makes the parsed text the ``structuredContent``, which the TS SDK 1.23
#: it embeds refuses ("expected record"); its model reads that error, not the text.
TEXT_PARSED_AS_STRUCTURED = "text_parsed_as_structured"

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


def _object_without_properties(tool: JSON) -> bool:
    """The OpenAI API's function parameters ("object schema missing properties"): a node whose
    ``type`` is ``object`` (or a type array holding it) must have a ``properties`` object."""
    for node in schema_nodes(_input_schema(tool)):
        kind = node.get("type")
        if (kind == "object" or (isinstance(kind, list) and "object" in kind)) and not isinstance(
            node.get("properties"), dict
        ):
            return True
    return False


def _legacy_tuple(tool: JSON) -> bool:
    """JSON Schema 2020-12 (the dialect the Anthropic API and google-genai read): ``items`` is one
    schema (an object or a boolean); an array of schemas there fails the 2020-12 metaschema."""
    return any(isinstance(node.get("items"), list) for node in schema_nodes(_input_schema(tool)))


def _never(arm: JSON) -> bool:
    """An arm no value matches, as JSON Schema spells it: ``false``, or a schema holding only
    ``not`` of a schema every value matches (``{}`` or ``true``)."""
    return arm is False or (isinstance(arm, dict) and set(arm) == {"not"} and arm["not"] in ({}, True))


def _never_branch(tool: JSON) -> bool:
    """Kimi, OpenAI strict and Gemini take no ``not``: an ``anyOf`` arm that is a never schema."""
    for node in schema_nodes(_input_schema(tool)):
        arms = node.get("anyOf")
        if isinstance(arms, list) and any(_never(arm) for arm in arms):
            return True
    return False


def _instance_of(value: JSON, kind: str) -> bool:
    """JSON Schema 2020-12 §6.1.1 ``type``: whether ``value`` is of the JSON type named ``kind``
    (an integer is a number; a number with a zero fractional part is an integer)."""
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return not isinstance(value, bool) and (
            isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        )
    if kind == "number":
        return not isinstance(value, bool) and isinstance(value, (int, float))
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return True  # a name that is no JSON type: type_names' fault, not this one


def _enum_type_conflict(tool: JSON) -> bool:
    """The OpenAI API's "enum ... does not match type": a node whose ``type`` (a name or an array of
    names) and non-empty ``enum`` have no value in common, so the node accepts no value at all."""
    for node in schema_nodes(_input_schema(tool)):
        kind, values = node.get("type"), node.get("enum")
        kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else None
        if kinds is None or not isinstance(values, list) or not values:
            continue
        if not any(_instance_of(value, name) for value in values for name in kinds if isinstance(name, str)):
            return True
    return False


#: The file signatures of the image types the Anthropic API takes (its vision docs: JPEG, PNG, GIF,
#: WebP), by media type: (offset, bytes) pairs that must all be there.
_SIGNATURES: tuple[tuple[str, tuple[tuple[int, bytes], ...]], ...] = (
    ("image/png", ((0, b"\x89PNG\r\n\x1a\n"),)),
    ("image/jpeg", ((0, b"\xff\xd8\xff"),)),
    ("image/gif", ((0, b"GIF87a"),)),
    ("image/gif", ((0, b"GIF89a"),)),
    ("image/webp", ((0, b"RIFF"), (8, b"WEBP"))),
)


def image_type(head: bytes) -> str | None:
    """The media type the first bytes of an image say it is (PNG, JPEG, GIF, WebP), else ``None``."""
    for media, parts in _SIGNATURES:
        if all(head[at : at + len(part)] == part for at, part in parts):
            return media
    return None


def _image_mime_mismatch(block: JSON) -> bool:
    """The Anthropic API's image rule ("the image was specified using the image/webp media type, but
    the image appears to be a image/png image"): an ``image`` block whose ``mimeType`` (parameters
    aside, any case) is not the type its bytes' signature names. Bytes of no known signature are
    not judged (an SVG is :data:`IMAGE_SVG`'s)."""
    if not isinstance(block, dict) or block.get("type") != "image":
        return False
    data, media = block.get("data"), block.get("mimeType")
    if not isinstance(data, str) or not isinstance(media, str):
        return False
    text = "".join(data[:64].split())
    try:
        head = base64.b64decode(text[: len(text) // 4 * 4])
    except (binascii.Error, ValueError):
        return False
    found = image_type(head)
    return found is not None and found != media.split(";", 1)[0].strip().lower()


#: The raster types whose header :func:`_header_size` reads (what the Anthropic API takes, and Codex).
_RASTER = frozenset({"image/png", "image/jpeg", "image/jpg", "image/gif", "image/webp"})


def _header_size(raw: bytes) -> tuple[int, int] | None:
    """Width and height from the header of a PNG (IHDR, the first chunk), GIF (the logical screen),
    JPEG (the first SOFn segment) or WebP (VP8, VP8L or VP8X) file; ``None`` when the bytes hold
    none of them, or a side of 0 (PNG spec 11.2.2, GIF89a 18, ITU T.81 B.2.2, RFC 9649)."""
    if raw[:8] == b"\x89PNG\r\n\x1a\n" and raw[12:16] == b"IHDR" and len(raw) >= 24:
        size = int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")
    elif raw[:6] in (b"GIF87a", b"GIF89a") and len(raw) >= 10:
        size = int.from_bytes(raw[6:8], "little"), int.from_bytes(raw[8:10], "little")
    elif raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        chunk = raw[12:16]
        if chunk == b"VP8 " and len(raw) >= 30 and raw[23:26] == b"\x9d\x01\x2a":
            size = int.from_bytes(raw[26:28], "little") & 0x3FFF, int.from_bytes(raw[28:30], "little") & 0x3FFF
        elif chunk == b"VP8L" and len(raw) >= 25 and raw[20] == 0x2F:
            bits = int.from_bytes(raw[21:25], "little")
            size = (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        elif chunk == b"VP8X" and len(raw) >= 30:
            size = int.from_bytes(raw[24:27], "little") + 1, int.from_bytes(raw[27:30], "little") + 1
        else:
            return None
    elif raw[:2] == b"\xff\xd8":
        at = 2
        while at + 4 <= len(raw):
            if raw[at] != 0xFF:
                return None
            marker = raw[at + 1]
            if marker == 0xFF:  # fill byte
                at += 1
                continue
            length = int.from_bytes(raw[at + 2 : at + 4], "big")
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                if at + 9 > len(raw):
                    return None
                size = int.from_bytes(raw[at + 7 : at + 9], "big"), int.from_bytes(raw[at + 5 : at + 7], "big")
                break
            at += 2 + length
        else:
            return None
    else:
        return None
    return size if size[0] > 0 and size[1] > 0 else None


def _js_falsy(value: JSON) -> bool:
    """JavaScript's ``!value`` for a JSON value (``{}`` and ``[]`` are true there)."""
    return value is None or value is False or value == "" or (type(value) in (int, float) and value == 0)


def _no_constant(name: str) -> JSON:
    raise ValueError(name)  # NaN, Infinity: no JSON for JSON.parse


def _text_parsed_as_structured(result: JSON) -> bool:
    """Gemini CLI 0.61.0's ``McpComplianceTransport.fixStructuredContent`` (``@google/gemini-cli-core``
    ``tools/mcp-compliance-transport.js``): a result whose ``structuredContent`` is falsy in JavaScript
    and whose first content block is a text ``JSON.parse`` reads gets that value as its
    ``structuredContent``; its TS SDK 1.23 takes only an object there."""
    if not isinstance(result, dict) or not _js_falsy(result.get("structuredContent")):
        return False
    content = result.get("content")
    if not isinstance(content, list) or not content or not isinstance(content[0], dict):
        return False
    first = content[0]
    if first.get("type") != "text" or not isinstance(first.get("text"), str):
        return False
    try:
        parsed = json.loads(first["text"], parse_constant=_no_constant)
    except ValueError:
        return False
    return not isinstance(parsed, dict)


def _image_undecodable(block: JSON) -> bool:
    """Claude Code 2.1.332's and Codex 0.171.0's image check (real runs): an ``image`` block whose
    ``mimeType`` is a raster type they take (PNG, JPEG, GIF, WebP), or whose bytes start as one,
    and whose base64 ``data`` does not decode to a header giving its width and height. ``data``
    that is no base64 is not judged (``media_data``'s)."""
    if not isinstance(block, dict) or block.get("type") != "image" or not isinstance(block.get("data"), str):
        return False
    try:
        raw = base64.b64decode("".join(block["data"].split()), validate=True)
    except (binascii.Error, ValueError):
        return False
    media = block.get("mimeType")
    declared = media.split(";", 1)[0].strip().lower() if isinstance(media, str) else ""
    if declared not in _RASTER and image_type(raw[:16]) is None:
        return False
    return _header_size(raw) is None


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
            "an open 2020-12 tuple (`prefixItems` without `items`) gets `items: {}` (the same values); a closed one"
            " (`items: false`) gets `items: {anyOf: [each position's schema]}`, `maxItems` its length and the"
            " positions in its description (the same values for a 2020-12 reader); other item-less arrays get"
            " `items: {}` for every client (`schema_shape`)",
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
        Constraint(
            OBJECT_PROPERTIES,
            "model_schemas",
            "tool",
            'an inputSchema node of type `"object"` without `properties`',
            "an object schema without `properties` gets `properties: {}` (the same values: `properties` constrains"
            " only the members it names)",
            False,
            _object_without_properties,
        ),
        Constraint(
            LEGACY_TUPLE,
            "model_schemas",
            "tool",
            "a draft-07 tuple (`items` holding an array of schemas) in an inputSchema read as 2020-12",
            "a draft-07 tuple `items: [A, B]` becomes `prefixItems: [A, B]` and `items` takes `additionalItems`"
            " (`{}` when there is none: the same values as 2020-12 reads them)",
            False,
            _legacy_tuple,
        ),
        Constraint(
            NEVER_BRANCH,
            "model_schemas",
            "tool",
            'an `anyOf` arm nothing matches (`{"not": {}}`, `false`)',
            "an `anyOf` arm nothing matches is dropped (the same values); an `anyOf` left with one arm is merged"
            " into its node where that reads the same",
            False,
            _never_branch,
        ),
        Constraint(
            ENUM_TYPE,
            "model_schemas",
            "tool",
            "an `enum` none of whose values is of the node's `type`",
            "an `enum` none of whose values is of the node's `type` moves onto `items` (an array node whose"
            " items take those values), else into the `description`",
            False,
            _enum_type_conflict,
        ),
        Constraint(
            IMAGE_MIME,
            "host_content",
            "block",
            "an image block whose `mimeType` is not the type of its bytes",
            "an image block's `mimeType` becomes the type its bytes' signature names (PNG, JPEG, GIF, WebP), the"
            " declared one kept in the block's `_meta`",
            False,
            _image_mime_mismatch,
        ),
        Constraint(
            IMAGE_UNDECODABLE,
            "host_content",
            "block",
            "a PNG, JPEG, GIF or WebP image block whose bytes hold no header giving its size",
            "an image whose bytes hold no header giving its size becomes a text block naming it, with its"
            " data as a `data:` URI (within `mirror_max_bytes`), the original block kept in the block's `_meta`",
            False,
            _image_undecodable,
        ),
        Constraint(
            TEXT_PARSED_AS_STRUCTURED,
            "host_content",
            "result",
            "a result without `structuredContent` whose first content block is text holding JSON that is no"
            " object (`[]`, `42`, `null`)",
            "for a tool that declares no `outputSchema`, the result gets `structuredContent: {result: <that"
            " value>}` (the host reads `content`, which stays as it came)",
            False,
            _text_parsed_as_structured,
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


_GEMINI_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]{0,63}")


def _argument_objects(schema: JSON) -> Iterator[dict[str, JSON]]:
    """The schema nodes of an inputSchema that describe an argument's own place: the root, each
    node under ``properties`` and ``items`` (one schema) of such a node, and the arms of an
    ``anyOf``/``oneOf``/``allOf`` of such a node (the same place, another shape)."""
    stack: list[JSON] = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield node
        members = node.get("properties")
        if isinstance(members, dict):
            stack.extend(members.values())
        if isinstance(node.get("items"), dict):
            stack.append(node["items"])
        for key in ("anyOf", "oneOf", "allOf"):
            arms = node.get(key)
            if isinstance(arms, list):
                stack.extend(arms)


def _property_key_gemini(tool: JSON) -> bool:
    """The Gemini API's parameter names (google-genai ``FunctionDeclaration.parameters``: "must start
    with a letter or an underscore and must only contain chars a-z, A-Z, 0-9, or underscores with a
    maximum length of 64"), checked on the names of every argument's place: the root's
    ``properties``, a nested object's, an item object's (the model writes each of them as a name)."""
    for node in _argument_objects(_input_schema(tool)):
        members = node.get("properties")
        if isinstance(members, dict) and any(_GEMINI_NAME.fullmatch(key) is None for key in members):
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
        "an argument's `enum` of numbers, booleans or `null` becomes the same values as strings (`type: string`,"
        " the original type in the description); a call's string argument is sent upstream as the value it"
        " stands for",
        True,
        _enum_non_string,
    ),
)

#: The Gemini API's parameter names (appended to :data:`CONSTRAINTS`; ``host_schemas`` renames them,
#: as it does the Anthropic API's property keys).
GEMINI_PROPERTY_KEY = Constraint(
    PROPERTY_KEY_GEMINI,
    "host_schemas",
    "tool",
    "an inputSchema property name outside ^[a-zA-Z_][a-zA-Z0-9_]{0,63}$ at an argument's place",
    "an inputSchema property name outside `^[a-zA-Z_][a-zA-Z0-9_]{0,63}$` (at the root, in a nested object,"
    " in an item object, in an `anyOf` arm) is advertised under a valid one and called upstream by its own",
    True,
    _property_key_gemini,
)

CONSTRAINTS = {**CONSTRAINTS, **{c.key: c for c in GEMINI_CONSTRAINTS}, PROPERTY_KEY_GEMINI: GEMINI_PROPERTY_KEY}
