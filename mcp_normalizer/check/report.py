"""The audit for people (a plain-text table, readable in any terminal) and for CI (JSON)."""

from __future__ import annotations

import re
import textwrap

from ..ops.logs import printable
from ..types import JSONObject
from ..wire.jsoncodec import dumps
from .auditor import Audit, Finding

_WIDTH = 100
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def as_json(audit: Audit, source: str, era: str | None, host: str | None = None) -> str:
    """The audit as one JSON document (``host``: the profile audited as, ``check --host``)::

    {"source": url or file, "era": "2025-11-25", "host": "codex" or null, "tools": [names], "calls": 3, "clean": false,
     "findings": [{"tool", "where", "rule", "kind", "pointers", "reason", "spec": {"rule", "section"},
                   "clients": [...], "repair", "author", "fix", "count"}], "notes": [...]}
    """
    document: JSONObject = {
        "source": source,
        "era": era,
        "host": host,
        "tools": list(audit.tools),
        "calls": audit.calls,
        "clean": not any(not finding.advisory for finding in audit.findings),
        "advisories": sum(finding.advisory for finding in audit.findings),
        "findings": [finding.as_json() for finding in audit.findings],
        "notes": list(audit.notes),
    }
    return dumps(printable(document)).decode()  # a lone surrogate in a server's name: escaped


def as_table(audit: Audit, source: str, era: str | None, host: str | None = None) -> str:
    """The audit as text: a header (naming the host audited as, if any), then per tool each fault
    with what it breaks and its repair."""
    lines = [
        f"mcp-normalizer check {source}" + (f" as host {host}" if host else ""),
        f"era {era or 'unknown'}, {_count(len(audit.tools), 'tool')} listed, {_count(audit.calls, 'result')} audited",
        "",
    ]
    by_tool: dict[str | None, list[Finding]] = {}
    for finding in audit.findings:
        by_tool.setdefault(finding.tool, []).append(finding)
    for tool, findings in by_tool.items():
        if tool is not None:
            lines.append(tool)
        elif all(finding.where == "tools/list" for finding in findings):
            lines.append("(the tool list as a whole)")
        else:
            lines.append("(not tied to a known tool)")
        for finding in findings:
            seen = f"  (x{finding.count})" if finding.count > 1 else ""
            pointers = " ".join(finding.pointers) or "/"
            lines.append(f"  {finding.where:<10}  {finding.rule:<26}  {pointers}{seen}")
            label = "advisory" if finding.advisory else "fault"
            lines += _field(label, f"{finding.kind.name}: {finding.reason}")
            lines += _field("breaks", f"{finding.spec} ({finding.kind.section})")
            lines += _field("clients", "; ".join(finding.clients))
            lines += _field("repair", finding.repair)
            if finding.author:
                lines += _field("author", finding.author)
            if finding.fix:
                lines.append(f"      {'fix:':<10}add to the config file:")
                lines += [" " * 16 + line for line in finding.fix.splitlines()]
        lines.append("")
    for note in audit.notes:
        lines.append(f"note: {note}")
    if audit.notes:
        lines.append("")
    advisories = sum(finding.advisory for finding in audit.findings)
    faults = len(audit.findings) - advisories
    tools = sum(tool is not None for tool in by_tool)
    if not audit.findings:
        lines.append("clean: no fault found")
    elif not faults:
        lines.append(f"no fault a supported client rejects; {_count(advisories, 'advisory', 'advisories')}")
    else:
        counted = _count(faults, "fault") + (
            f" and {_count(advisories, 'advisory', 'advisories')}" if advisories else ""
        )
        lines.append(counted + (f" in {_count(tools, 'tool')}" if tools else ""))
    return "\n".join(map(_safe, lines))


def _count(n: int, one: str, many: str | None = None) -> str:
    """``n`` and the noun, singular for one: ``1 result``, ``3 results``, ``2 advisories``."""
    return f"{n} {one if n == 1 else many or one + 's'}"


def _safe(line: str) -> str:
    """``line`` fit for a terminal: control characters (escape sequences a server could put in a
    tool name) and lone surrogates written as backslash escapes."""
    line = line.encode("utf-8", "backslashreplace").decode("utf-8")
    return _CONTROL.sub(lambda match: f"\\x{ord(match[0]):02x}", line)


def _field(name: str, text: str) -> list[str]:
    indent = " " * 16
    return textwrap.wrap(text, _WIDTH, initial_indent=f"      {name + ':':<10}", subsequent_indent=indent) or [""]
