"""Every ``unrepaired`` line and ``check`` finding names the exact TOML that would repair it; the
TOML, added to the config, does (issue 13, section 3)."""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.engine.audit import AuditLog
from mcp_normalizer.engine.normalize import Normalizer, Outcome
from mcp_normalizer.engine.rules import RULES

from .support import PROPERTY, capture_rewrites

pytestmark = pytest.mark.pure

ERA = "2025-11-25"
RUNTIMES = {
    "name": "protean.list runtimes",  # a space: the table name must be quoted
    "inputSchema": {"type": "object"},
    "outputSchema": {
        "type": "object",
        "properties": {
            "runtimes": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "scope": {"type": "string"},
                        "state": {"enum": ["active", "retired"]},
                        "price": {"type": "number", "minimum": 0},
                    },
                    "required": ["scope", "state"],
                },
            }
        },
        "required": ["runtimes"],
    },
}
SCHEMALESS_TEXT = {"name": 'q"uoted', "inputSchema": {"type": "object"}, "outputSchema": RUNTIMES["outputSchema"]}


def call(config: NormalizerConfig, tool: dict[str, Any], result: dict[str, Any]) -> Outcome:
    """List ``tool`` and call it, as the proxy does: the result checked against what it advertised."""
    normalizer = Normalizer(config)
    entry = next(e for e in normalizer.tools_list({"tools": [tool]}, ERA).entries if e.name == tool["name"])
    return normalizer.tools_call(result, tool["name"], entry, ERA, 1000)


def with_fix(fix: str) -> NormalizerConfig:
    """The shipped config with ``fix`` added, as an operator would paste it into the file."""
    shipped = tomllib.loads(resources.files("mcp_normalizer").joinpath("normalizer.toml").read_text(encoding="utf-8"))
    added = tomllib.loads(fix)
    tools = {**shipped.get("tools", {}), **added["tools"]}
    return NormalizerConfig.from_mapping({**shipped, "tools": tools}, source="test")


def unrepaired(outcome: Outcome) -> list[Any]:
    return [r for r in outcome.records if r.event == "unrepaired"]


STATES = st.sampled_from(["active", "retired", "ACTIVE", "gone", None, 3, 12.5])
SCOPES = st.one_of(st.none(), st.text(max_size=6), st.integers(), st.floats(allow_nan=False, allow_infinity=False))


@PROPERTY
@given(rows=st.lists(st.fixed_dictionaries({"scope": SCOPES, "state": STATES}), min_size=1, max_size=5))
def test_the_printed_toml_repairs_the_result_it_was_printed_for(rows: list[dict[str, Any]]) -> None:
    result = {"content": [{"type": "text", "text": "rows"}], "structuredContent": {"runtimes": rows}}
    first = call(NormalizerConfig.shipped(), RUNTIMES, result)
    faults = unrepaired(first)
    if not faults:
        return  # the default rules repaired it (or it conformed)
    fix = faults[0].rewrite.fix
    assert fix.startswith('[tools."protean.list runtimes"]\n')
    again = call(with_fix(fix), RUNTIMES, result)
    assert not unrepaired(again), fix
    assert again.result["structuredContent"]["runtimes"] is not None


def test_a_tool_that_never_sends_structured_content_is_told_to_drop_its_schema() -> None:
    result = {"content": [{"type": "text", "text": "not json: 12.50"}]}
    faults = unrepaired(call(NormalizerConfig.shipped(), SCHEMALESS_TEXT, result))
    assert [f.rewrite.fix for f in faults] == ['[tools."q\\"uoted"]\ndrop_output_schema = true']
    assert tomllib.loads(faults[0].rewrite.fix) == {"tools": {'q"uoted': {"drop_output_schema": True}}}


@pytest.mark.parametrize("rule", [r.name for r in RULES])
def test_every_rule_name_is_a_valid_toml_key(rule: str) -> None:
    assert tomllib.loads(f"[rules]\n{rule} = 'on'\n") == {"rules": {rule: "on"}}


def test_a_null_and_an_unknown_enum_value_get_nullable_and_relax_and_are_then_repaired() -> None:
    rows = [{"scope": None, "state": "active", "price": 12.50}, {"scope": "eu", "state": "gone"}]
    result = {"content": [{"type": "text", "text": "rows"}], "structuredContent": {"runtimes": rows}}
    faults = unrepaired(call(NormalizerConfig.shipped(), RUNTIMES, result))
    fix = '[tools."protean.list runtimes"]\nnullable = ["/runtimes/*/scope"]\nrelax = ["/runtimes/*/state"]'
    assert [f.rewrite.fix for f in faults] == [fix]
    again = call(with_fix(fix), RUNTIMES, result)
    assert not unrepaired(again) and again.result["structuredContent"]["runtimes"] == rows
    with capture_rewrites() as log:  # the unrepaired log line carries it
        AuditLog("test").emit(faults[0], method="tools/call", jsonrpc_id=1, scope="s", era=ERA)
    assert [line["fix"] for line in log.lines] == [fix]
