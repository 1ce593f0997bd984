"""The configuration that would repair what no default repair can: exact TOML for the operator.

A result that still fails its tool's ``outputSchema`` after every rule, or that lacks the
``structuredContent`` the schema asks for, is passed on unchanged and logged ``unrepaired``
(DESIGN section 3); ``check`` reports it. Both say which per-tool declaration would repair it
(``docs/configuration.md``): ``nullable`` for a ``null`` where the schema forbids one (the
schema is then advertised nullable there, and the value kept), ``relax`` for any other value the
schema rejects (the place advertised unconstrained), ``drop_output_schema`` for a tool that
never sends ``structuredContent``. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..types import JSON
from ..wire.jsoncodec import Raw, loads
from ..wire.pointer import format_pointer, resolve
from .schema import Violation


def toml_string(text: str) -> str | None:
    """``text`` as a one-line TOML basic string (``"..."``), every character that is not printable
    (controls, DEL, NEL, line and paragraph separators) escaped; ``None`` when TOML cannot hold it
    (a lone surrogate is no Unicode scalar value)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char.isprintable():
            out.append(char)
        else:
            code = ord(char)
            out.append(f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}")
    return '"' + "".join(out) + '"'


def _table(tool: str) -> str | None:
    name = toml_string(tool)
    return f"[tools.{name}]" if name is not None else None


def _place(violation: Violation) -> str:
    """The violation's place with every array index as ``*`` (any item: the fault is the item's kind)."""
    return format_pointer(tuple("*" if isinstance(step, int) else step for step in violation.path))


def for_violations(tool: str | None, structured: JSON | Raw, violations: Sequence[Violation]) -> str:
    """The TOML that repairs ``violations`` of ``structured`` (``""`` without a tool name)."""
    if tool is None or not violations:
        return ""
    if isinstance(structured, Raw):
        structured = loads(structured)
    nullable: list[str] = []
    relax: list[str] = []
    for violation in violations:
        found, value = resolve(structured, violation.path)
        place = _place(violation)
        target = nullable if found and value is None else relax
        if place and place not in target:
            target.append(place)
    table = _table(tool)
    if table is None:
        return ""
    lines = [table]
    for key, places in (("nullable", nullable), ("relax", relax)):
        spelled = [toml_string(place) for place in places]
        if places and None not in spelled:  # (a place TOML cannot hold: no declaration to print)
            lines.append(f"{key} = [" + ", ".join(str(text) for text in spelled) + "]")
    return "\n".join(lines) if len(lines) > 1 else ""


def for_missing_structured(tool: str | None) -> str:
    """The TOML that advertises ``tool`` without the ``outputSchema`` its results never meet."""
    table = _table(tool) if tool is not None else None
    return f"{table}\ndrop_output_schema = true" if table is not None else ""
