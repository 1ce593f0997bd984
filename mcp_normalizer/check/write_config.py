"""The rule file ``check --write-config FILE`` writes: every fix of an audit, each commented with
the finding and the spec rule behind it (pure: text in, text out).

What the defaults repair needs no line, only a comment (so the file says what the proxy will do);
what no default repair handles gets the per-tool declaration the finding suggests (``nullable``,
``relax``, ``drop_output_schema``: :mod:`mcp_normalizer.engine.suggest`), merged per tool, so the proxy
started with the file makes the same audit come out clean. A base rule file (``--config``) is
copied first, verbatim; a tool it declares already is never declared twice (that would be invalid
TOML): :class:`~mcp_normalizer.errors.CheckError` names it.
"""

from __future__ import annotations

import json
import textwrap
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..engine.suggest import toml_string
from ..errors import CheckError
from ..types import JSON
from .auditor import Finding

#: The declarations a finding's ``fix`` can hold, in the order they are written.
DECLARATIONS = ("nullable", "relax", "drop_output_schema")


@dataclass(slots=True)
class _Table:
    """One tool's declarations and the findings that asked for them."""

    values: dict[str, JSON] = field(default_factory=dict)
    why: list[str] = field(default_factory=list)

    def merge(self, declared: dict[str, JSON], reason: str) -> None:
        for key in DECLARATIONS:
            if key not in declared:
                continue
            value = declared[key]
            if isinstance(value, list):
                known = self.values.setdefault(key, [])
                assert isinstance(known, list)
                known += [item for item in value if item not in known]
            else:
                self.values[key] = value
        if reason not in self.why:
            self.why.append(reason)


def _comment(text: str) -> list[str]:
    """``text`` as comment lines (each line of it prefixed ``# ``; control characters escaped)."""
    out: list[str] = []
    for line in text.split("\n"):
        safe = line if line.isprintable() else line.encode("unicode_escape").decode("ascii")
        indent = " " * (len(safe) - len(safe.lstrip(" ")) + 2)
        wrapped = textwrap.wrap(safe, 100, initial_indent="# ", subsequent_indent="#" + indent, drop_whitespace=True)
        out += wrapped or ["#"]
    return out


def _describe(finding: Finding) -> str:
    where = " ".join(finding.pointers) or "/"
    return f"{finding.tool or '(the tool list)'}: {finding.kind.name} at {finding.where} {where}"


def _toml_value(value: JSON) -> str:
    """A declaration's value as TOML: a boolean, or a list of pointers (strings TOML can hold)."""
    if isinstance(value, list):
        return "[" + ", ".join(toml_string(item) or '""' for item in value if isinstance(item, str)) + "]"
    return "true" if value is True else "false"


def rule_file(findings: Iterable[Finding], source: str, base: str = "") -> str:
    """The rule file for ``findings`` of the server ``source`` (a URL, redacted), after ``base``.

    Raises:
        CheckError: ``base`` is not TOML, or declares a tool the findings need a declaration for.
    """
    try:
        declared = tomllib.loads(base).get("tools", {}) if base else {}
    except tomllib.TOMLDecodeError as exc:
        raise CheckError(f"--config is not TOML: {exc}") from None
    tables: dict[str, _Table] = {}
    by_default: list[str] = []
    unfixable: list[str] = []
    for finding in findings:
        line = f"{_describe(finding)}: {finding.spec} ({finding.kind.section})"
        author = f"  author fix: {finding.author}" if finding.author else ""
        if finding.fix:
            for tool, values in tomllib.loads(finding.fix).get("tools", {}).items():
                tables.setdefault(tool, _Table()).merge(values, line + ("\n" + author if author else ""))
        elif finding.repair.startswith("none"):
            unfixable += [line, f"  {finding.repair}", *([author] if author else [])]
        else:
            by_default += [line, f"  repaired by default: rule {finding.rule} ({finding.repair})"]
            by_default += [author] if author else []
    clash = sorted(set(tables) & set(declared))
    if clash:
        raise CheckError(
            "--config already declares "
            + ", ".join(json.dumps(name) for name in clash)
            + ": add the findings' declarations there by hand (check --format table shows them)"
        )
    out = _comment(f"Rule file written by `mcp-normalizer check --write-config` for {source}.")
    out += _comment("Start the proxy with it: mcp-normalizer --upstream URL --config THIS_FILE")
    if base:
        out += ["", *_comment("The rule file given with --config, as it was:"), base.rstrip("\n")]
    if by_default:
        out += ["", *_comment("Repaired by the proxy's defaults, nothing to declare:")]
        out += _comment("\n".join(by_default))
    if unfixable:
        out += ["", *_comment("No declaration repairs these:"), *_comment("\n".join(unfixable))]
    for tool, table in tables.items():
        out += ["", *_comment("\n".join(table.why)), f"[tools.{toml_string(tool)}]"]
        values = table.values
        out += [f"{key} = {_toml_value(values[key])}" for key in DECLARATIONS if key in values]
    if not tables and not base:
        out += ["", *_comment("Nothing to declare: the defaults repair every finding.")]
    return "\n".join(out) + "\n"
