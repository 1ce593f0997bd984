"""Rule ``gemini_schemas``: input schemas the Gemini API refuses, made ones it takes, for the
clients whose tools go to it alone.

Fault kind ``host_content`` (a model API refuses what the spec allows; :mod:`~.host_profiles`). The
repairs run for a client whose model API family is ``gemini``: Gemini CLI (``hosts.toml``), or a
client or a tool a setting names the family for (``[normalizer] model_api``, ``[clients."NAME"]``,
``[tools."NAME"]``; :func:`~.clients.resolve_model_api`). Every other client gets the server's bytes.
Each key is one of :mod:`~.host_faults`, whose oracle judges the output:

- ``dollar_schema_gemini``: every ``$schema`` of the ``inputSchema`` is removed (a dialect marker:
  the same values are accepted). The Gemini API refuses it in ``parameters`` ('Unknown name
  "$schema"') and in ``parametersJsonSchema`` (GetStream/Vision-Agents PR #513). Gemini CLI 0.61.0
  sends the server's schema as ``parametersJsonSchema`` with one change of its own (a two-type
  ``["T", "null"]`` becomes ``type: T, nullable: true``; ``@google/gemini-cli-core``
  ``tools/mcp-client.js`` ``discoverTools``), so none of these keys is handled by the host itself.
  (An explicit 2020-12 ``$schema`` at the root is already dropped for most clients by
  ``schema_dialect``; a draft-07 one, zod-to-json-schema's, is not.)
- ``anyof_arm_keyword_gemini``: an ``anyOf`` arm's ``const`` becomes ``enum: [value]`` (the same
  values); its ``additionalProperties`` is removed and written into the arm's ``description``
  ("other properties: {...}", or "no other properties" for ``false``; ``true`` is the default).
- ``required_undefined_gemini``: names a node's ``required`` lists without defining them in its
  ``properties`` are dropped from it and written into its ``description`` ("also required: ...").
- ``enum_non_string``: an ``enum`` of numbers, booleans and ``null`` (strings among them too) at an
  argument's place (the root's ``properties``, their ``properties`` and ``items``, at any depth)
  becomes the same values as strings, each spelled as the server's listing wrote it (``2``,
  ``true``, ``null``, ``1.50``, ``1e-7``; as
  :func:`spell` writes it where the listing's text is not at hand), with ``type:
  "string"`` and the original type in the ``description``. The model then sends the string; a
  ``tools/call`` from such a client has each string argument at such a place that spells one of
  the values sent upstream as that value (the string's own text, a JSON number or boolean, spelled
  as the server's listing spelled it, ``1.50`` stays ``1.50``:
  :func:`convert_arguments`, run by :mod:`mcp_normalizer.engine.request_rewrite`); any other
  value passes as it came. This repair changes the form of the arguments, so it runs only where
  the family is known to be ``gemini``. The places and values are kept in the tool's
  ``_meta["dev.mcp-normalizer/enum-arguments"]`` (argument pointer -> the values), which the
  catalog reads. An ``anyOf``/``oneOf`` arm is the place of its node: an enum in an arm (a const
  arm's one-value enum too, or an enum of an arm's nested object) is converted when no other arm
  of the same combinator, as the server wrote it, may take one of its strings as a string at the
  same place (:func:`may_take`: another arm's ``type`` without ``string``, its ``enum`` or
  ``const`` without the string, an object or array shape the place cannot be in). The call's
  string then can only stand for the arm's value, and is converted back as above. Where another
  arm may take it (``anyOf: [{enum: [12.5]}, {type: string}]``: a ``"12.5"`` could be either), the
  conversion back could not be decided losslessly: the enum is left as the server wrote it, the
  key's oracle still fires, and rule ``withhold_tools`` withholds the tool from that host alone
  (every other tool listed, every other client given it unchanged). So is an enum where two
  different values share a spelling (``"1"`` and ``1``, ``"null"`` and ``null``: a call's string
  could stand for either; a value listed twice is one value). An enum under ``allOf``, ``$defs`` or
  ``additionalProperties`` is left too, as is one holding an object or an array.

Property names the Gemini API refuses are renamed by rule ``host_schemas`` (which runs first: the
enum places are written in the names the client is shown).

What the repair replaced is kept in the tool's ``_meta["dev.mcp-normalizer/original-keywords"]``
(pointer into the tool -> the node as this rule got it).
"""

from __future__ import annotations

from collections.abc import Mapping

from ...errors import DecodeError
from ...types import JSON, JSONObject
from ...wire.jsoncodec import Raw, dumps, join_array, join_object, loads, split_array, split_object
from ...wire.pointer import Path, format_pointer
from .base import META_PREFIX, ORIGINAL_KEYWORDS_KEY, Rewrite, Rule, ToolContext, meta_of, with_original_values
from .host_faults import ANYOF_ARM_KEYWORD, ENUM_NON_STRING, REQUIRED_UNDEFINED, SCHEMA_KEYWORD
from .host_schemas import gemini_named
from .scan import ToolScan
from .schemas import map_schema

#: ``_meta`` key of a tool's enum places: argument pointer (``*``: any item) -> the original values.
ENUM_ARGUMENTS_KEY = META_PREFIX + "enum-arguments"
#: The keys this rule repairs.
KEYS = (SCHEMA_KEYWORD, ANYOF_ARM_KEYWORD, REQUIRED_UNDEFINED, ENUM_NON_STRING)
_ITEM = "*"
_NUMERIC = ("integer", "number", "boolean")


def spell(value: JSON) -> str:
    """``value`` (a number, a boolean or ``null``) as JSON writes it: ``true``, ``null``, ``2``,
    ``1.5``, ``1e-7`` (a float's shortest round-trip digits, its exponent without leading zeros)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    text = repr(value)
    mantissa, e, exponent = text.partition("e")
    if not e:
        return text
    sign = exponent[0] if exponent[:1] in ("+", "-") else ""
    return f"{mantissa}e{'-' if sign == '-' else '+'}{exponent.lstrip('+-').lstrip('0') or '0'}"


def _argument_place(path: Path) -> list[str] | None:
    """The argument place a schema node at ``path`` (in the ``inputSchema``) describes, as pointer
    segments (``*`` for an item), or ``None`` when it is no argument's own place. An ``anyOf`` or
    ``oneOf`` arm describes its node's place (:func:`_arm_steps` finds them)."""
    segments: list[str] = []
    index = 0
    while index < len(path):
        step = path[index]
        if step == "properties" and index + 1 < len(path) and isinstance(path[index + 1], str):
            name = path[index + 1]
            if name == _ITEM:
                return None  # (a property named "*" would read as any item)
            segments.append(str(name))
            index += 2
        elif step == "items" and segments:
            segments.append(_ITEM)
            index += 1
        elif step in _ARMS and index + 1 < len(path) and isinstance(path[index + 1], int):
            index += 2
        else:
            return None
    return segments or None


#: The combinators an argument's place goes through: the value is one arm's (``allOf``: all, so no
#: arm's values could be written another way alone).
_ARMS = ("anyOf", "oneOf")


def _arm_steps(path: Path) -> list[int]:
    """The positions in ``path`` (an argument place's, :func:`_argument_place`) of each ``anyOf`` or
    ``oneOf`` it goes through."""
    return [
        index
        for index, step in enumerate(path)
        if step in _ARMS
        and index + 1 < len(path)
        and isinstance(path[index + 1], int)
        and (index == 0 or path[index - 1] != "properties")
    ]


def _place_steps(path: Path) -> list[str | int]:
    """The ``properties``/name and ``items`` steps of ``path``, arms left out."""
    out: list[str | int] = []
    index = 0
    while index < len(path):
        step = path[index]
        if step == "properties" and index + 1 < len(path):
            out += [step, path[index + 1]]
            index += 2
        elif step in _ARMS and index + 1 < len(path) and isinstance(path[index + 1], int):
            index += 2
        else:
            out.append(step)
            index += 1
    return out


def _types(node: JSONObject) -> list[JSON] | None:
    kind = node.get("type")
    return [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else None


def may_take(schema: JSON, steps: list[str | int], text: str) -> bool:
    """Whether ``schema`` may accept the string ``text`` at the place ``steps`` (``properties``/name
    and ``items`` steps) leads to: ``False`` only where it surely does not (the place cannot be
    there, a ``type`` without ``string``, an ``enum`` or ``const`` without ``text``); anything this
    does not read (``$ref``, ``not``, ``if``, ``patternProperties``, a tuple) may accept it."""
    if schema is False:
        return False
    if not isinstance(schema, dict):
        return True
    if any(key in schema for key in ("$ref", "$dynamicRef", "not", "if")):
        return True
    for key in _ARMS:
        arms = schema.get(key)
        if isinstance(arms, list) and not any(may_take(arm, steps, text) for arm in arms):
            return False
    arms = schema.get("allOf")
    if isinstance(arms, list) and not all(may_take(arm, steps, text) for arm in arms):
        return False
    kinds = _types(schema)
    if steps:
        if steps[0] == "properties":
            if kinds is not None and "object" not in kinds:
                return False
            name, members = steps[1], schema.get("properties")
            if isinstance(members, dict) and name in members:
                return may_take(members[name], steps[2:], text)
            if "patternProperties" in schema:
                return True
            extra = schema.get("additionalProperties", True)
            return may_take(extra, steps[2:], text)
        if kinds is not None and "array" not in kinds:
            return False
        items = schema.get("items", True)
        return True if isinstance(items, list) or "prefixItems" in schema else may_take(items, steps[1:], text)
    if "const" in schema:
        return bool(schema["const"] == text)
    values = schema.get("enum")
    if isinstance(values, list):
        return text in values
    return kinds is None or "string" in kinds


def _described(node: JSONObject, note: str) -> str:
    description = node.get("description")
    return f"{description} ({note})" if isinstance(description, str) and description else note[:1].upper() + note[1:]


def _listed_enum(listed: bytes | None, path: Path) -> list[bytes] | None:
    """The texts of the ``enum`` values of the ``inputSchema`` node at ``path`` as ``listed`` (the
    tool's JSON text) writes them, or ``None`` when the text has no such node."""
    if listed is None:
        return None
    try:
        node: bytes = bytes(split_object(listed)["inputSchema"])
        for step in path:
            node = bytes(split_object(node)[step] if isinstance(step, str) else split_array(node)[step])
        return [bytes(item) for item in split_array(split_object(node)["enum"])]
    except (DecodeError, KeyError, IndexError):
        return None


def _spellings(values: list[JSON], texts: list[bytes] | None) -> list[str]:
    """Each of ``values`` as a string: a string as it is; a number or boolean as the listed text
    wrote it, when that text is the value (``1.50``, ``1E-7``), else as :func:`spell` writes it."""
    out: list[str] = []
    for index, value in enumerate(values):
        if isinstance(value, str):
            out.append(value)
            continue
        text = texts[index] if texts is not None and len(texts) == len(values) else None
        try:
            same = text is not None and type(loads(text)) is type(value) and loads(text) == value
        except DecodeError:
            same = False
        out.append(text.decode("ascii") if same and text is not None and text.isascii() else spell(value))
    return out


class _Walk:
    """One tool's walk: the repairs its client needs, what each replaced, the enum places."""

    __slots__ = ("enums", "kept", "listed", "needs", "original", "touched")

    def __init__(self, original: JSON, needs: frozenset[str], listed: bytes | None = None) -> None:
        self.original = original
        self.needs = needs
        self.listed = listed
        self.kept: dict[str, JSON] = {}
        self.enums: dict[str, list[str]] = {}
        self.touched: list[str] = []

    def _original_at(self, path: Path) -> JSON:
        node: JSON = self.original
        for step in path:
            if isinstance(node, dict) and isinstance(step, str):
                node = node.get(step)
            elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
                node = node[step]
            else:
                return None
        return node

    def fix(self, node: JSONObject, path: Path) -> JSON:
        out = node
        if SCHEMA_KEYWORD in self.needs and "$schema" in out:
            out = {k: v for k, v in out.items() if k != "$schema"}
        if ANYOF_ARM_KEYWORD in self.needs and isinstance(out.get("anyOf"), list):
            arms = [_arm(arm) for arm in out["anyOf"]]
            if ENUM_NON_STRING in self.needs:  # (a const arm's enum, made here after its own visit)
                arms = [
                    self._enum(arm, (*path, "anyOf", index)) if isinstance(arm, dict) and arm is not old else arm
                    for index, (arm, old) in enumerate(zip(arms, out["anyOf"], strict=True))
                ]
            if any(new is not old for new, old in zip(arms, out["anyOf"], strict=True)):
                out = {**out, "anyOf": arms}
        if REQUIRED_UNDEFINED in self.needs:
            out = _required(out)
        if ENUM_NON_STRING in self.needs:
            out = self._enum(out, path)
        if out is not node:
            pointer = format_pointer(("inputSchema", *path))
            if {k: v for k, v in out.items() if k != "$schema"} == {k: v for k, v in node.items() if k != "$schema"}:
                self.kept[pointer + "/$schema"] = node["$schema"]  # only the dialect marker went
                self.touched.append("/inputSchema" + format_pointer((*path, "$schema")))
            else:
                self.kept[pointer] = self._original_at(path) if path else self.original
                self.touched.append("/inputSchema" + format_pointer(path))
        return out

    def _enum(self, node: JSONObject, path: Path) -> JSONObject:
        values = node.get("enum")
        if not isinstance(values, list) or all(isinstance(v, str) for v in values):
            return node
        if not all(v is None or isinstance(v, str | int | float) for v in values):
            return node  # an object, an array: not repaired
        place = _argument_place(path)
        if place is None:
            return node
        strings = _spellings(values, _listed_enum(self.listed, path))
        meant: dict[str, JSON] = {}
        for text, value in zip(strings, values, strict=True):
            if text in meant and not (type(meant[text]) is type(value) and meant[text] == value):
                return node  # two values one spelling ("1" and 1, "null" and null): no way back
            meant[text] = value
        texts = [text for text, v in zip(strings, values, strict=True) if not isinstance(v, str)]
        if self._shared(path, texts):
            return node  # another arm may take the same string: no way to tell which was meant
        kinds = sorted({_kind(v) for v in values if not isinstance(v, str)})
        kind = node.get("type")
        if isinstance(kind, list):
            new_kind: JSON = list(dict.fromkeys("string" if k in _NUMERIC else k for k in kind))
        else:
            new_kind = "string"
        out = {**node, "type": new_kind, "enum": strings}
        default = node.get("default")
        if "default" in node and not isinstance(default, str) and default in values:
            out["default"] = strings[values.index(default)]
        out["description"] = _described(node, f"{' or '.join(kinds)}, written as a string")
        known = self.enums.setdefault(format_pointer(place), [])
        known += [text for text in dict.fromkeys(texts) if text not in known]
        return out

    def _shared(self, path: Path, texts: list[str]) -> bool:
        """Whether an ``anyOf``/``oneOf`` arm other than the one ``path`` goes through may take one
        of ``texts`` as a string at the same place (as the server wrote the arms)."""
        for at in _arm_steps(path):
            arms = self._original_at(path[: at + 1])
            if not isinstance(arms, list):
                return True  # (not as the server wrote it: no sure answer)
            steps = _place_steps(path[at + 2 :])
            others = [arm for index, arm in enumerate(arms) if index != path[at + 1]]
            if any(may_take(arm, steps, text) for arm in others for text in texts):
                return True
        return False


def _kind(value: JSON) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return "integer" if isinstance(value, int) else "number"


def _arm(arm: JSON) -> JSON:
    """An ``anyOf`` arm without ``const`` (as a one-value ``enum``) or ``additionalProperties`` (in
    its description)."""
    if not isinstance(arm, dict) or ("const" not in arm and "additionalProperties" not in arm):
        return arm
    out = dict(arm)
    if "const" in out:
        value = out.pop("const")
        enum = out.get("enum")
        if not isinstance(enum, list) or value in enum:
            out["enum"] = [value]
    if "additionalProperties" in out:
        extra = out.pop("additionalProperties")
        if extra is False:
            out["description"] = _described(arm, "no other properties")
        elif extra is not True:
            try:
                text = dumps(extra).decode("utf-8")
            except DecodeError:
                text = repr(extra)
            out["description"] = _described(arm, f"other properties: {text}")
    return out


def _required(node: JSONObject) -> JSONObject:
    required = node.get("required")
    if not isinstance(required, list):
        return node
    members = node.get("properties")
    defined = members if isinstance(members, dict) else {}
    missing = [name for name in required if isinstance(name, str) and name not in defined]
    if not missing:
        return node
    kept = [name for name in required if not (isinstance(name, str) and name not in defined)]
    out = {k: v for k, v in node.items() if k != "required"}
    if kept:
        out["required"] = kept
    out["description"] = _described(node, "also required: " + ", ".join(missing))
    return out


def _needs(ctx: ToolContext) -> frozenset[str]:
    return frozenset(key for key in KEYS if ctx.client.host_needs(key))


def _repair(tool: JSONObject, ctx: ToolContext) -> tuple[JSONObject, Rewrite] | None:
    needs = _needs(ctx)
    schema = tool.get("inputSchema")
    if not needs or not isinstance(schema, dict):
        return None
    walk = _Walk(schema, needs, ctx.listed)
    new, _ = map_schema(schema, walk.fix)
    if new is schema:
        return None
    out = with_original_values({**tool, "inputSchema": new}, walk.kept, ORIGINAL_KEYWORDS_KEY)
    if walk.enums:
        meta = meta_of(out)
        meta[ENUM_ARGUMENTS_KEY] = dict(walk.enums)
        out = {**out, "_meta": meta}
    sources = "; ".join(dict.fromkeys(ctx.client.fault_source(key) for key in sorted(needs))) or "hosts.toml"
    why = f"made the inputSchema one the Gemini API takes ({sources}), for {ctx.client.title}"
    return out, Rewrite("gemini_schemas", "made a schema the Gemini API takes", tuple(walk.touched), why)


def _may_repair(scan: ToolScan, ctx: ToolContext) -> bool:
    client = ctx.client
    if not client.host_faults:
        return False
    return (
        (client.host_needs(SCHEMA_KEYWORD) and scan.schema_has("inputSchema", b'"$schema":'))
        or (client.host_needs(ANYOF_ARM_KEYWORD) and scan.schema_has("inputSchema", b'"anyOf":'))
        or (client.host_needs(REQUIRED_UNDEFINED) and scan.schema_has("inputSchema", b'"required":'))
        or (client.host_needs(ENUM_NON_STRING) and scan.schema_has("inputSchema", b'"enum":'))
    )


def enum_arguments(tool: JSONObject) -> dict[str, tuple[str, ...]] | None:
    """The enum places of an advertised tool (argument pointer -> the strings that stand for a
    number or a boolean, each that value's JSON text): those this rule left in its ``_meta``
    (listed to a client whose family is ``gemini``), else those it would give the tool's own
    ``inputSchema`` (listed to another client: its enums are the server's), spelled as
    :func:`spell` writes them; ``None`` when there are none. A call from a ``gemini`` client is
    converted by them, whichever client listed the tool last."""
    meta = tool.get("_meta")
    found = meta.get(ENUM_ARGUMENTS_KEY) if isinstance(meta, dict) else None
    if isinstance(found, dict) and found:
        places = {
            place: tuple(text for text in texts if isinstance(text, str))
            for place, texts in found.items()
            if isinstance(texts, list)
        }
        return places or None
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict) or not _non_string_enum(schema):
        return None
    named = gemini_named(tool)  # (the names a gemini client is shown: the places are written in them)
    walk = _Walk(named, frozenset({ENUM_NON_STRING}))
    try:
        map_schema(named, walk.fix)
    except RecursionError:
        return None
    return {place: tuple(texts) for place, texts in walk.enums.items()} or None


def _non_string_enum(schema: JSON) -> bool:
    """Whether some ``enum`` list in ``schema`` holds a value that is not a string (a data value
    shaped like a schema counts too: the caller only looks closer)."""
    stack: list[JSON] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            values = node.get("enum")
            if isinstance(values, list) and any(not isinstance(v, str) for v in values):
                return True
            stack.extend(v for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, dict | list))
    return False


def _segments(pointer: str) -> list[str]:
    return [s.replace("~1", "/").replace("~0", "~") for s in pointer.split("/")[1:]]


def convert_arguments(arguments: bytes | Raw, enums: Mapping[str, tuple[str, ...]]) -> bytes | None:
    """``arguments`` (a ``tools/call``'s arguments object, as sent) with each string at an enum
    place of ``enums`` (:func:`enum_arguments`) that is one of its texts written as that text (a
    JSON number or boolean, as the server's enum wrote it), every other byte as it came; ``None``
    when none is converted.

    Raises:
        DecodeError: ``arguments`` is not a JSON object.
    """
    text = bytes(arguments)
    changed = False
    for pointer, texts in enums.items():
        spellings = {spelled for spelled in texts if _is_json_scalar(spelled)}
        new = _convert(text, _segments(pointer), spellings)
        if new is not None:
            text, changed = new, True
    return text if changed else None


def _is_json_scalar(text: str) -> bool:
    """Whether ``text`` is the JSON text of a number, a boolean or ``null`` (what may be written
    unquoted)."""
    try:
        value = loads(text)
    except DecodeError:
        return False
    return (value is None or isinstance(value, int | float)) and text.strip() == text


def _convert(text: bytes, segments: list[str], spellings: set[str]) -> bytes | None:
    """``text`` (one JSON value) with the strings at ``segments`` that are in ``spellings``
    written as their text, or ``None`` when nothing there changes."""
    if not segments:
        if text[:1] != b'"':
            return None
        value = loads(text)
        return value.encode("ascii") if isinstance(value, str) and value in spellings else None
    head, rest = segments[0], segments[1:]
    if head == _ITEM:
        if text[:1] != b"[":
            return None
        items = split_array(text)
        out = [_convert(bytes(item), rest, spellings) for item in items]
        if all(new is None for new in out):
            return None
        return join_array([Raw(new) if new is not None else item for new, item in zip(out, items, strict=True)])
    if text[:1] != b"{":
        return None
    members = split_object(text)
    member = members.get(head)
    if member is None:
        return None
    new = _convert(bytes(member), rest, spellings)
    if new is None:
        return None
    return join_object({**members, head: Raw(new)})


RULE = Rule(
    "gemini_schemas",
    "host_content",
    "for a client whose tools go to the Gemini API (Gemini CLI, or a client or tool a model_api setting names"
    " gemini for): $schema removed, an anyOf arm's const made a one-value enum and its additionalProperties"
    " moved into its description, required names no property defines dropped (named in the description), and"
    " an argument's enum of numbers, booleans or null given as strings (calls sent upstream with the values); the"
    " originals kept in the tool's _meta",
    on_tool=_repair,
    tool_gate=_may_repair,
)
