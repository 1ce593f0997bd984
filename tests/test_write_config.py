"""``check --write-config``'s rule file (pure): valid TOML whatever the tool names, one table per
tool with every declaration its findings ask for, a base rule file copied first and never
contradicted. The round trip on the corpus is in ``tests/test_corpus.py``."""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_normalizer.check.auditor import NOT_REPAIRED, Finding
from mcp_normalizer.check.faults import KINDS
from mcp_normalizer.check.write_config import rule_file
from mcp_normalizer.engine.schema import Violation
from mcp_normalizer.engine.suggest import for_missing_structured, for_violations
from mcp_normalizer.errors import CheckError

from .support import PROPERTY

pytestmark = pytest.mark.pure


def _finding(tool: str, fix: str, repair: str = NOT_REPAIRED) -> Finding:
    kind = KINDS["unrepaired"]
    return Finding(tool, "tools/call", "conformance", ("/structuredContent",), "r", kind, repair, fix=fix)


@PROPERTY
@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=4, unique=True))
def test_the_written_rule_file_is_toml_declaring_every_tool_once_whatever_its_name(names: list[str]) -> None:
    findings = [_finding(name, for_missing_structured(name)) for name in names for _ in range(2)]
    findings += [
        _finding(name, for_violations(name, {"a": None}, [Violation(("a",), "type", ("properties", "a", "type"))]))
        for name in names
    ]
    written = rule_file(findings, "http://127.0.0.1:9/mcp")
    declared = tomllib.loads(written)["tools"]
    assert list(declared) == names
    assert all(table == {"nullable": ["/a"], "drop_output_schema": True} for table in declared.values())
    assert all(line.startswith("#") or not line or line[0] in "[dn" for line in written.splitlines())


def test_a_base_rule_file_is_copied_and_a_tool_it_declares_is_refused() -> None:
    base = '[normalizer]\nproblem_meta_key = "x/problem"\n[tools."a"]\nrelax = ["/b"]\n'
    written = rule_file([_finding("c", for_missing_structured("c"))], "u", base)
    assert tomllib.loads(written) == {
        **tomllib.loads(base),
        "tools": {"a": {"relax": ["/b"]}, "c": {"drop_output_schema": True}},
    }
    with pytest.raises(CheckError, match='"a"'):
        rule_file([_finding("a", for_missing_structured("a"))], "u", base)
    default = rule_file([_finding("a", "", repair="dropped null optional members")], "u")
    assert tomllib.loads(default) == {} and "repaired by default" in default
