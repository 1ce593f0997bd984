"""Known servers, fixed by default: the interventions table (``interventions.toml``, data in the package).

Some published servers send faults no rule can repair from the wire alone: the repair needs a
declaration (a place that is nullable, a schema to drop), which a user who has no rule file does not
have. Like a browser's site interventions or the kernel's device quirks, the table holds such
declarations for servers whose faults are known from public reports, each matched by what the tool
says of itself, never by a generic name alone::

    [[intervention]]
    id = "protean-legacy-runtime-scope"
    tool = "protean.list_runtimes"            # the tool's name, exactly
    string_at = ["/runtimes/*/scope"]         # ... and its outputSchema declares these places a
                                              # non-nullable string (or:)
    definition = "<32 hex digits>"            # ... and definition_digest(tool) is this
    nullable = ["/runtimes/*/scope"]          # the declaration applied: nullable, relax,
                                              # drop_output_schema (as in [tools."X"])
    summary = "..."                           # what the server does, one line
    author_fix = "..."                        # what the server's author should change
    source = "..."                            # report, PR or source file
    date = "2026-12-03"                       # when the entry was established

An entry applies to a tool when every condition it names holds; it needs at least one condition
beyond the name. What it declares adds to the user's ``[tools."X"]`` declaration (nullable and
relaxed places are joined; ``drop_output_schema`` is set when either sets it), and the user's rule
modes (``[rules]``, ``[tools."X"] rules``) decide whether the rules run at all. ``[normalizer]
interventions = false`` turns the table off. Pure: no I/O beyond reading the packaged table once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import orjson

from ..errors import ConfigError
from ..keys import only, pointers
from ..types import JSON, JSONObject
from ..wire.pointer import PointerPattern
from .rules.schemas import widen_at

_DIGEST = re.compile(r"[0-9a-f]{32}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def definition_digest(tool: Mapping[str, Any]) -> str:
    """The digest an entry's ``definition`` names: 32 hex digits of BLAKE2b over the tool's
    ``name``, ``inputSchema`` and ``outputSchema`` as canonical JSON (keys sorted; descriptions of
    the tool itself, ``title``, ``annotations`` and ``_meta`` left out, so a reworded tool still matches
    while another shape does not)."""
    shape = {key: tool.get(key) for key in ("name", "inputSchema", "outputSchema")}
    return hashlib.blake2b(orjson.dumps(shape, option=orjson.OPT_SORT_KEYS), digest_size=16).hexdigest()


def _is_plain_string(node: JSON) -> bool:
    """Whether schema ``node`` says "a string, never null"."""
    if not isinstance(node, dict) or node.get("nullable") is True:
        return False
    if node.get("type") != "string":
        return False
    return "enum" not in node or None not in (node["enum"] if isinstance(node["enum"], list) else ())


def declares_string(schema: JSON, pattern: PointerPattern) -> bool:
    """Whether ``schema`` (an ``outputSchema``) reaches ``pattern`` and declares a non-nullable
    string at every place it does (through ``properties``, ``items``, combinators and local
    ``$ref``s, as :func:`~mcp_normalizer.engine.rules.schemas.widen_at` walks them)."""
    seen: list[bool] = []

    def probe(node: JSON) -> JSON:
        seen.append(_is_plain_string(node))
        return node

    widen_at(schema, pattern.segments, probe)
    return bool(seen) and all(seen)


@dataclass(frozen=True, slots=True)
class Intervention:
    """One entry of the table (the module docstring gives its TOML form).

    Attributes:
        id: a stable name, for logs, ``check`` and the docs.
        tool: the tool name it concerns, exactly.
        string_at: places the tool's ``outputSchema`` must declare a non-nullable string.
        definition: :func:`definition_digest` the tool must have, ``None`` when not matched by digest.
        nullable, relax, drop_output_schema: the declaration applied (as ``[tools."X"]`` declares).
        summary, author_fix, source, date: what the server does, what its author should change,
            where the fault is reported, when the entry was established (``YYYY-MM-DD``).
    """

    id: str
    tool: str
    string_at: tuple[PointerPattern, ...]
    definition: str | None
    nullable: tuple[PointerPattern, ...]
    relax: tuple[PointerPattern, ...]
    drop_output_schema: bool
    summary: str
    author_fix: str
    source: str
    date: str

    def matches(self, tool: JSONObject) -> bool:
        """Whether this entry applies to ``tool`` (a ``tools/list`` member whose ``name`` is :attr:`tool`)."""
        if tool.get("name") != self.tool:
            return False
        if self.definition is not None and definition_digest(tool) != self.definition:
            return False
        schema = tool.get("outputSchema")
        return all(declares_string(schema, place) for place in self.string_at)

    @property
    def label(self) -> str:
        """How log lines and ``check`` name it: ``intervention <id> (<source>)``."""
        return f"intervention {self.id} ({self.source})"


@dataclass(frozen=True, slots=True)
class Interventions:
    """The table, by tool name.

    Attributes:
        by_tool: the entries of each tool name, in the table's order.
    """

    by_tool: Mapping[str, tuple[Intervention, ...]]

    def for_tool(self, tool: JSONObject) -> tuple[Intervention, ...]:
        """The entries that apply to ``tool`` (a ``tools/list`` member), in the table's order."""
        name = tool.get("name")
        found = self.by_tool.get(name) if isinstance(name, str) else None
        return tuple(entry for entry in found if entry.matches(tool)) if found else ()

    @property
    def entries(self) -> tuple[Intervention, ...]:
        """Every entry, in the table's order."""
        return tuple(entry for group in self.by_tool.values() for entry in group)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str) -> Interventions:
        """Read a decoded table.

        Raises:
            ConfigError: an unknown key, a missing or malformed field, an entry with no condition
                beyond its name, a repeated id.
        """
        only(data, {"intervention"}, source)
        raw = data.get("intervention", [])
        if not isinstance(raw, list):
            raise ConfigError(f"{source}: intervention must be an array of tables")
        by_tool: dict[str, list[Intervention]] = {}
        ids: set[str] = set()
        for index, table in enumerate(raw):
            entry = _entry(table, f"{source} intervention {index}")
            if entry.id in ids:
                raise ConfigError(f"{source}: intervention id {entry.id!r} is used twice")
            ids.add(entry.id)
            by_tool.setdefault(entry.tool, []).append(entry)
        return cls({name: tuple(group) for name, group in by_tool.items()})


def named_in(text: str) -> Intervention | None:
    """The shipped entry whose :attr:`~Intervention.label` ``text`` holds (a rewrite's reason
    says which entry caused it), if any."""
    if "intervention " not in text:
        return None
    return next((entry for entry in shipped().entries if entry.label in text), None)


NONE = Interventions({})
_KEYS = {field.name for field in dataclasses.fields(Intervention)}


@cache
def shipped() -> Interventions:
    """The table shipped in the package (``mcp_normalizer/interventions.toml``), read once."""
    text = resources.files("mcp_normalizer").joinpath("interventions.toml").read_text(encoding="utf-8")
    return Interventions.from_mapping(tomllib.loads(text), "mcp_normalizer/interventions.toml")


def _text(table: Mapping[str, Any], key: str, where: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: {key} must be a non-empty string")
    return value


def _entry(table: object, where: str) -> Intervention:
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table")
    only(table, _KEYS, where)
    definition = table.get("definition")
    if definition is not None and (not isinstance(definition, str) or not _DIGEST.fullmatch(definition)):
        raise ConfigError(f"{where}: definition must be 32 lowercase hex digits (definition_digest)")
    drop = table.get("drop_output_schema", False)
    if not isinstance(drop, bool):
        raise ConfigError(f"{where}: drop_output_schema must be true or false")
    date = _text(table, "date", where)
    if not _DATE.fullmatch(date):
        raise ConfigError(f"{where}: date must be YYYY-MM-DD")
    entry = Intervention(
        id=_text(table, "id", where),
        tool=_text(table, "tool", where),
        string_at=pointers(table, "string_at", where),
        definition=definition,
        nullable=pointers(table, "nullable", where),
        relax=pointers(table, "relax", where),
        drop_output_schema=drop,
        summary=_text(table, "summary", where),
        author_fix=_text(table, "author_fix", where),
        source=_text(table, "source", where),
        date=date,
    )
    if not entry.string_at and entry.definition is None:
        raise ConfigError(f"{where}: an entry needs a condition beyond the tool name (string_at or definition)")
    if not (entry.nullable or entry.relax or entry.drop_output_schema):
        raise ConfigError(f"{where}: an entry must declare something (nullable, relax or drop_output_schema)")
    return entry
