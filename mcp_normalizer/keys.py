"""Settings declared once: a dataclass field made with :func:`setting` carries its default, its
kind, its lower bound and its one-line doc. From that one declaration come the key list the TOML
reader checks (:func:`read`), the ``MCP_NORMALIZER_<KEY>`` reader (:func:`from_env`: one parser for
every variable, with one set of boolean words) and the class's ``Attributes`` docs (:func:`documented`).

Kinds: ``bool``, ``int``, ``float``, ``str``, ``strlist`` (a TOML list of strings; in a variable,
comma-separated) and ``envlist`` (a TOML list of ``NAME=VALUE`` or ``NAME`` strings; in a variable, see
:func:`env_list`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from .errors import ConfigError
from .wire.pointer import PointerPattern

Kind = Literal["bool", "int", "float", "str", "strlist", "envlist"]
#: The ``field`` metadata entry that holds a :class:`Key`.
KEY = "mcp_normalizer.key"
ENV_PREFIX = "MCP_NORMALIZER_"
#: The words a variable may use for a boolean.
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")

_KIND_NAMES: dict[Kind, str] = {
    "bool": "true or false",
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "strlist": "a list of strings",
    "envlist": "a list of strings",
}
_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_KINDS_OF: dict[type, Kind] = {bool: "bool", int: "int", float: "float", str: "str", tuple: "strlist"}

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Key:
    """How one key is read.

    Attributes:
        kind: the value's kind (see the module docstring).
        doc: what the key does, for the generated docs.
        minimum: the smallest number allowed (``int``/``float``), ``None`` for no bound.
        exclusive: the minimum itself is not allowed.
        env: the variable that sets it, when not ``MCP_NORMALIZER_<KEY>``; ``""``: none.
    """

    kind: Kind
    doc: str
    minimum: float | None = 0.0
    exclusive: bool = False
    env: str | None = None

    def variable(self, name: str) -> str:
        """The environment variable of key ``name`` (``""``: it has none)."""
        return self.env if self.env is not None else ENV_PREFIX + name.upper()


def setting(
    default: T,
    doc: str,
    *,
    kind: Kind | None = None,
    minimum: float | None = 0.0,
    exclusive: bool = False,
    env: str | None = None,
) -> T:
    """A dataclass field declaring one key (``kind`` defaults to the default's type).

    Raises:
        TypeError: ``kind`` is not given and cannot be told from the default.
    """
    found = kind if kind is not None else _KINDS_OF.get(type(default))
    if found is None:
        raise TypeError(f"the kind of a setting with default {default!r} must be given")
    key = Key(found, doc, minimum, exclusive, env)
    field: T = dataclasses.field(default=default, metadata={KEY: key})
    return field


def spec(cls: type) -> dict[str, Key]:
    """The keys a dataclass declares with :func:`setting`, by field name, in declaration order."""
    return {f.name: f.metadata[KEY] for f in dataclasses.fields(cls) if KEY in f.metadata}


C = TypeVar("C", bound=type)


def documented(cls: C) -> C:
    """Class decorator: append the ``Attributes`` of the class's settings to its docstring."""
    lines = [f"        {name}: {key.doc}" for name, key in spec(cls).items()]
    cls.__doc__ = (cls.__doc__ or "").rstrip() + "\n\n    Attributes:\n" + "\n".join(lines) + "\n"
    return cls


def checked(value: Any, key: Key, where: str) -> Any:
    """``value`` as key ``key`` takes it (a ``float`` from an integer; a ``strlist`` as a tuple).

    Raises:
        ConfigError: the value has another kind, is not finite, or is below the minimum.
    """
    kind_ok = {
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, int | float) and not isinstance(value, bool),
        "str": isinstance(value, str),
        "strlist": isinstance(value, list | tuple) and all(isinstance(v, str) for v in value),
        "envlist": isinstance(value, list | tuple) and all(isinstance(v, str) for v in value),
    }[key.kind]
    if not kind_ok:
        raise ConfigError(f"{where} must be {_KIND_NAMES[key.kind]}")
    if key.kind == "float":
        value = float(value)
        if not math.isfinite(value):
            raise ConfigError(f"{where} must be a finite number")
    if key.kind in ("int", "float") and key.minimum is not None:
        if value < key.minimum or (key.exclusive and value == key.minimum):
            bound = "greater than" if key.exclusive else "at least"
            raise ConfigError(f"{where} must be {bound} {key.minimum:g}")
    return tuple(value) if key.kind in ("strlist", "envlist") else value


def only(table: Mapping[str, Any], allowed: set[str], where: str) -> None:
    """Refuse a key of ``table`` that is not ``allowed``.

    Raises:
        ConfigError: naming the first unknown key and the allowed ones.
    """
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")


def pointers(table: Mapping[str, Any], key: str, where: str) -> tuple[PointerPattern, ...]:
    """The JSON pointer patterns listed at ``key`` of ``table`` (none when absent).

    Raises:
        ConfigError: the value is not a list of strings, or one is not a pointer pattern.
    """
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise ConfigError(f"{where} {key} must be a list of JSON pointers")
    try:
        return tuple(PointerPattern.parse(p) for p in value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def read(table: Mapping[str, Any], keys: Mapping[str, Key], where: str) -> dict[str, Any]:
    """The keys of a flat TOML table, checked against ``keys``.

    Raises:
        ConfigError: an unknown key, a value of the wrong kind or below its minimum.
    """
    only(table, set(keys), where)
    return {name: checked(value, keys[name], f"{where} {name}") for name, value in table.items()}


def parse_text(raw: str, key: Key, variable: str) -> Any:
    """The value of a variable's text for ``key``, checked like a file's.

    Raises:
        ConfigError: the text does not parse as the key's kind, or the value is out of range.
    """
    parsed: Any = raw
    text = raw.strip()
    try:
        if key.kind == "bool":
            if text.lower() not in TRUE_WORDS + FALSE_WORDS:
                raise ValueError
            parsed = text.lower() in TRUE_WORDS
        elif key.kind == "int":
            if not _INT.fullmatch(text):  # (int() also takes "1_000" and other scripts' digits)
                raise ValueError
            parsed = int(text)
        elif key.kind == "float":
            if not _FLOAT.fullmatch(text) and text.lower().lstrip("+-") not in ("nan", "inf", "infinity"):
                raise ValueError
            parsed = float(text)
        elif key.kind == "strlist":
            parsed = [part.strip() for part in raw.split(",") if part.strip()]
        elif key.kind == "envlist":
            parsed = env_list(raw, variable)
    except ValueError:
        raise ConfigError(f"{variable}={raw!r} must be {_KIND_NAMES[key.kind]}") from None
    return checked(parsed, key, variable)


def env_list(raw: str, variable: str) -> list[str]:
    """The ``NAME=VALUE`` (set) and ``NAME`` (passed through) items of a variable's text, in one of
    three forms, told apart by the text itself:

    - a JSON object, ``{"NAME": "VALUE", "OTHER": null}`` (``null``: pass ``OTHER`` through);
    - one item per line (a newline anywhere, a last one too): ``NAME=VALUE`` or ``NAME``; blank lines are skipped,
      the spaces around a line dropped, a value may hold commas;
    - else comma-separated ``NAME=VALUE`` items (the first form of this variable). An item without
      ``=`` is refused there: it is the tail of a value that held a comma, or a name to pass through,
      which only the two other forms can say.

    Raises:
        ConfigError: not a JSON object of strings or nulls; a comma-separated item without ``=``.
    """
    text = raw.strip()
    if text.startswith("{"):
        try:
            decoded = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{variable} starts with '{{' but is not a JSON object: {exc}") from None
        if not isinstance(decoded, dict) or not all(v is None or isinstance(v, str) for v in decoded.values()):
            raise ConfigError(f'{variable} must be a JSON object of names and string values: {{"NAME": "VALUE"}}')
        for name in decoded:
            if not name or "=" in name:
                raise ConfigError(f"{variable}: {name!r} is not a variable name (empty, or with '=' in it)")
        return [name if value is None else f"{name}={value}" for name, value in decoded.items()]
    if "\n" in raw:  # (a single item with a trailing newline too)
        return [line.strip() for line in text.split("\n") if line.strip()]
    items = [part.strip() for part in raw.split(",") if part.strip()]
    for item in items:
        if "=" not in item:
            raise ConfigError(
                f"{variable}: {item!r} is not NAME=VALUE; comma-separated items are NAME=VALUE each. For a value "
                "with a comma, or a variable passed through by NAME, give one item per line or a JSON object "
                '{"NAME": "VALUE"}'
            )
    return items


def from_env(env: Mapping[str, str], keys: Mapping[str, Key], skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The values the environment sets for ``keys`` (an empty variable sets nothing); keys in
    ``skip`` are not read (a flag set them).

    Raises:
        ConfigError: a value that does not parse or is out of range, naming the variable.
    """
    values: dict[str, Any] = {}
    for name, key in keys.items():
        variable = key.variable(name)
        raw = env.get(variable) if variable and name not in skip else None
        if raw:
            values[name] = parse_text(raw, key, variable)
    return values


def variables(*classes: type) -> set[str]:
    """Every environment variable the settings of ``classes`` read."""
    return {key.variable(name) for cls in classes for name, key in spec(cls).items() if key.variable(name)}
