"""The README stays true: its rule reference names every rule with its default, and nothing else."""

from __future__ import annotations

import re

import pytest

from mcp_normalizer.rules import RULES

from .support import ROOT

pytestmark = pytest.mark.pure


def test_the_rule_reference_lists_every_rule_and_its_default() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("| rule | fault kind", 1)[1].split("\n\n", 1)[0]
    rows = {m[1]: m[2] for m in re.finditer(r"^\| `([a-z_]+)` \|[^|]*\| ([^|]*) \|", table, re.MULTILINE)}
    assert set(rows) == {rule.name for rule in RULES}
    for rule in RULES:
        default = rows[rule.name].strip("* ").split(",")[0].split(" (")[0]
        assert default == rule.default.value, (rule.name, rows[rule.name])
