"""The ``tools/list`` rules' gates (``mcp_normalizer.engine.rules.scan``): a gate closes only when
its rule would change nothing, so a tool with nothing to repair costs substring searches, not
schema walks, and nothing a client receives changes.

Held two ways, over generated tools (every keyword a gate looks for, at every depth, beside the
values the field sends: decimals, huge integers, unicode, escapes, nulls, keys spelled like
keywords, descriptions that quote them) and over the tools of the fault corpus: each gate alone
against its rule, and the whole list path with gates against the same path without them (the
tool emitted, the records, the catalog entry), for every client profile the rules tell apart.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.engine.lessons import LessonBook
from mcp_normalizer.engine.normalize import ListedTool, Listing, Normalizer, _ToolStep
from mcp_normalizer.engine.rules import TOOL_RULES, ToolContext
from mcp_normalizer.engine.rules.clients import CONFORMANCE, PYTHON_SDK, UNKNOWN, ClientProfile, profile_for
from mcp_normalizer.engine.rules.host_profiles import HOSTS
from mcp_normalizer.engine.rules.learned import NOTHING_LEARNED
from mcp_normalizer.engine.rules.scan import WALK_DEPTH, ToolScan
from mcp_normalizer.wire.jsoncodec import Codec, Raw, fingerprint
from mcp_normalizer.wire.pointer import PointerPattern

from .support import load_cases

pytestmark = pytest.mark.pure

CLIENTS: list[ClientProfile] = [
    UNKNOWN,
    profile_for({"name": PYTHON_SDK, "version": "2.3.0"}),
    profile_for({"name": CONFORMANCE, "version": "1.0.0"}),
    *(profile_for({"name": host.client_names[0]}) for host in HOSTS),
]
ERAS = [None, "2025-03-26", "2025-06-18", "2025-11-25"]
CONFIGS = [
    NormalizerConfig(),
    NormalizerConfig.from_mapping({"tools": {"t": {"nullable": ["/a", "/rows/*/label"], "relax": ["/b"]}}}),
    dataclasses.replace(NormalizerConfig(), report_only=True),
]

#: Property names as servers write them, and as keywords are spelled.
NAMES = st.sampled_from(
    ["a", "b", "rows", "label", "caf\u00e9", "x y", "nullable", "$ref", "items", "format", "\U0001f600"]
)
STRINGS = st.sampled_from(
    [
        "",
        "date-time",
        "array",
        'r\u00e9gion \u2014 "q"\n',
        '"$ref":"#/$defs/a"',
        '"nullable":true',
        "\\u0024ref",
        "true",
        ":false",
    ]
)
VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.sampled_from([12.5, 2.5e-3, -0.0, 1e300]),
        STRINGS,
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=6,
)
LEAVES = st.one_of(
    st.booleans(),
    st.just({}),
    st.sampled_from(
        [
            {"type": "string"},
            {"type": "string", "nullable": True},
            {"type": "number", "minimum": 12.5},
            {"type": ["string", "null"]},
            {"type": "array"},
            {"type": "string", "format": "date-time"},
            {"type": "string", "format": "date"},
            {"type": "string", "format": "email"},
            {"$ref": "#/$defs/a"},
            {"$ref": "#/definitions/a"},
            {"$ref": "#"},
            {"$ref": "https://example.com/remote.json"},
            {"$ref": "#missing"},
            {"enum": ["a", None, 12.5]},
            {"const": 123456789012345678901234},
            {"type": "object"},
        ]
    ),
)
SCHEMAS = st.recursive(
    LEAVES,
    lambda inner: st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["object", "array", "string", ["array", "null"], ["object", "null"]]),
            "properties": st.one_of(st.dictionaries(NAMES, inner, max_size=3), st.none(), st.just([])),
            "required": st.one_of(st.lists(NAMES, max_size=2, unique=True), st.none()),
            "additionalProperties": inner,
            "items": st.one_of(inner, st.lists(inner, max_size=2)),
            "prefixItems": st.lists(inner, min_size=1, max_size=2),
            "additionalItems": inner,
            "not": inner,
            "anyOf": st.lists(inner, min_size=1, max_size=3),
            "oneOf": st.lists(inner, min_size=1, max_size=2),
            "allOf": st.lists(inner, min_size=1, max_size=2),
            "$defs": st.dictionaries(st.sampled_from(["a", "Instant", "java.time.LocalDate"]), inner, max_size=2),
            "definitions": st.dictionaries(st.sampled_from(["a", "timestamp"]), inner, max_size=2),
            "nullable": st.booleans(),
            "format": st.sampled_from(["date-time", "date", "time", "uri"]),
            "default": VALUES,
            "examples": st.lists(VALUES, max_size=2),
            "description": STRINGS,
            "$anchor": st.just("missing"),
        },
    ),
    max_leaves=14,
)
ROOTS = st.one_of(
    SCHEMAS,
    st.builds(
        lambda schema, dialect: {**schema, "$schema": dialect} if isinstance(schema, dict) else schema,
        SCHEMAS,
        st.sampled_from(
            [
                "http://json-schema.org/draft-07/schema#",
                "http://json-schema.org/draft-04/schema#",
                "https://json-schema.org/draft/2020-12/schema",
            ]
        ),
    ),
)
TOOLS: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"name": st.sampled_from(["t", "many.tool_000001", "bad name!", "caf\u00e9"])},
    optional={
        "description": STRINGS,
        "inputSchema": st.one_of(ROOTS, st.none(), st.just([]), st.just("object")),
        "outputSchema": st.one_of(ROOTS, st.none()),
        "_meta": st.one_of(
            st.just({"io.example/ok": 1, "_fastmcp": {"tags": []}}), st.just({"dev.x/y": None}), st.just("meta")
        ),
        "annotations": st.just({"readOnlyHint": True}),
    },
)


def _decoded(tool: Any) -> Any:
    """``tool`` as the proxy reads it off the wire (the codec, numbers keeping their spelling)."""
    return Codec().loads(json.dumps(tool, ensure_ascii=False).encode())


class Ungated(Normalizer):
    """The normalizer with every gate open: each rule's hook runs on every tool, as before gates."""

    def _tool_plan(self, tool: str) -> tuple[_ToolStep, ...]:
        return tuple((hook, None, mode) for hook, _, mode in super()._tool_plan(tool))


def _same(gated: Listing, plain: Listing) -> None:
    assert fingerprint(gated.tool) == fingerprint(plain.tool)
    assert gated.records == plain.records and gated.fault == plain.fault
    if plain.entry is None:
        assert gated.entry is None
        return
    assert gated.entry is not None
    assert gated.entry.name == plain.entry.name
    assert fingerprint(gated.entry.output_schema) == fingerprint(plain.entry.output_schema)
    assert [p.text for p in gated.entry.nullable] == [p.text for p in plain.entry.nullable]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tool=TOOLS, client=st.sampled_from(CLIENTS), era=st.sampled_from(ERAS), declared=st.booleans())
@example(  # a boolean that is not a list's first entry: only a comma before it
    tool={"name": "t", "inputSchema": {"type": "object", "anyOf": [{"type": "object"}, True]}},
    client=UNKNOWN,
    era=None,
    declared=False,
)
@example(  # an empty properties array, in the outputSchema (never walked for arrays)
    tool={"name": "t", "inputSchema": {"type": "object"}, "outputSchema": {"properties": []}},
    client=UNKNOWN,
    era=None,
    declared=False,
)
def test_a_closed_gate_means_its_rule_changes_nothing(
    tool: Any, client: ClientProfile, era: Any, declared: bool
) -> None:
    tool = _decoded(tool)
    nullable = (PointerPattern.parse("/a"), PointerPattern.parse("/rows/*/label")) if declared else ()
    ctx = ToolContext(era, NormalizerConfig().settings, nullable=nullable, client=client)
    scan = ToolScan(tool)
    for rule in TOOL_RULES:
        if rule.tool_gate is not None and rule.on_tool is not None and not rule.tool_gate(scan, ctx):
            assert rule.on_tool(tool, ctx) is None, rule.name


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tool=TOOLS, client=st.sampled_from(CLIENTS), era=st.sampled_from(ERAS), config=st.sampled_from(CONFIGS))
def test_the_list_path_with_gates_emits_what_it_emits_without(
    tool: Any, client: ClientProfile, era: Any, config: NormalizerConfig
) -> None:
    tool = _decoded(tool)
    _same(Normalizer(config).list_tool(tool, 0, era, client), Ungated(config).list_tool(tool, 0, era, client))


def test_the_fault_corpus_tools_list_the_same_with_and_without_gates() -> None:
    tools = [_decoded(case["tool"]) for case in load_cases() if isinstance(case.get("tool"), dict)]
    assert len(tools) > 20
    changed = 0
    for tool in tools:
        for client in CLIENTS:
            for era in ERAS:
                gated = Normalizer(NormalizerConfig()).list_tool(tool, 0, era, client)
                _same(gated, Ungated(NormalizerConfig()).list_tool(tool, 0, era, client))
                changed += gated.tool is not tool
    assert changed  # (the corpus holds tools the rules repair: the comparison saw changes)


def test_a_tool_nested_past_the_walks_bound_opens_every_gate_and_is_still_a_fault() -> None:
    """Past :data:`WALK_DEPTH` the gates open, so the walk still refuses the tool as before (a
    ``fault`` record, the tool passed untouched), never a tool learned half read."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(WALK_DEPTH):
        schema = {"type": "object", "properties": {"a": schema}}
    tool = _decoded({"name": "deep", "inputSchema": {"type": "object"}, "outputSchema": schema})
    scan = ToolScan(tool)
    assert scan.whole is None and scan.has(b'$ref":') and scan.has_boolean()
    with pytest.raises(ValueError, match="not a scan token"):
        scan.has(b"anything")  # (a gate asking for what the scan never looks for is a bug, searchable or not)
    listing = Normalizer(NormalizerConfig()).list_tool(tool, 3, "2025-11-25")
    assert listing.fault and listing.tool is tool
    _same(listing, Ungated(NormalizerConfig()).list_tool(tool, 3, "2025-11-25"))


def test_a_clean_tool_opens_no_walking_gate() -> None:
    """What the gates are for: a tool with nothing to repair (the bench's, most of a real list)
    is not walked by any rule."""
    tool = _decoded(
        {
            "name": "many.tool_000001",
            "description": 'r\u00e9gion 1 \u2014 "q"\n',
            "inputSchema": {"type": "object", "properties": {"limit": {"maximum": 500}}},
            "outputSchema": {
                "type": "object",
                "properties": {"scope": {"type": "string"}, "price": {"type": "number", "minimum": 12.5}},
                "required": ["scope"],
            },
        }
    )
    scan = ToolScan(tool)
    ctx = ToolContext("2025-11-25", NormalizerConfig().settings)
    opened = [rule.name for rule in TOOL_RULES if rule.tool_gate is not None and rule.tool_gate(scan, ctx)]
    assert opened == []


# -- a tool listed without the rules (Normalizer._unchanged) ------------------------------------


class RulesAlways(Normalizer):
    """The normalizer with every tool through the rules (no listing without them)."""

    def _unchanged(self, text: Any, era: Any, client: ClientProfile, learned: Any) -> None:
        return None


def _text(tool: Any, style: str) -> bytes:
    """``tool`` as servers write it: compact, spaced and indented, or every non-ASCII escaped."""
    if style == "compact":
        return json.dumps(tool, ensure_ascii=False, separators=(",", ":")).encode()
    if style == "spaced":
        return json.dumps(tool, ensure_ascii=False, indent=1).encode()
    return json.dumps(tool).encode()


def _same_listed(fast: ListedTool, slow: ListedTool) -> None:
    assert fast.text == slow.text and fast.records == slow.records
    if slow.entry is None:
        assert fast.entry is None
        return
    assert fast.entry is not None
    assert fast.entry.name == slow.entry.name
    assert fingerprint(fast.entry.output_schema) == fingerprint(slow.entry.output_schema)
    assert [p.text for p in fast.entry.nullable] == [p.text for p in slow.entry.nullable]
    assert fast.entry.ui_resource_uri == slow.entry.ui_resource_uri
    # a tool listed without the rules has its property names unread: its argument map (for a
    # Claude host's calls) is fetched when such a call needs it (issue 37)
    assert fast.entry.arguments == (slow.entry.arguments if fast.entry.keys_read else None)
    assert fast.entry.digest() == slow.entry.digest()


CLEAN_NAMES = st.sampled_from(["a", "rows", "caf\u00e9", "x y", "\U0001f600", "items"])
#: Schemas with nothing a rule repairs, as most of a real list is (numbers, unicode, escapes).
CLEAN_SCHEMAS = st.recursive(
    st.sampled_from(
        [
            {"type": "string"},
            {"type": "number", "minimum": 12.5, "maximum": 1e300},
            {"type": "integer", "const": 123456789012345678901234},
            {"type": "string", "description": 'caf\u00e9 \u2014 "q"\n\\'},
            {"type": "string", "enum": ["a", "b"]},
            {"type": "array", "items": {"type": "string"}},
            {},
        ]
    ),
    lambda inner: st.builds(
        lambda properties, required: {"type": "object", "properties": properties, "required": required},
        st.dictionaries(CLEAN_NAMES, inner, max_size=3),
        st.lists(NAMES, max_size=2, unique=True),
    ),
    max_leaves=8,
)
#: What a rule does repair, one at a time, at a place drawn at random (a JSON pointer's steps).
FAULTS_SEEN: list[tuple[str, Any]] = [
    ("outputSchema", {"type": "string", "nullable": True}),
    ("outputSchema", {"type": "object", "additionalProperties": False}),
    ("outputSchema", {"type": "object", "properties": {"a": True}}),
    ("outputSchema", {"$ref": "#/$defs/a"}),
    ("outputSchema", {"type": "string", "format": "date-time"}),
    ("outputSchema", {"type": "array", "prefixItems": [{}], "items": False}),
    ("outputSchema", {"properties": None}),
    ("inputSchema", {"type": "array"}),
    ("inputSchema", {"type": ["array", "null"]}),
    ("inputSchema", {"required": None}),
    ("inputSchema", {"anyOf": [{"type": "object"}]}),
    ("_meta", {"_fastmcp": {"tags": []}}),
    ("_meta", {"io.example/ok": 12.5}),
    ("outputSchema", None),
    ("root", {"properties": {}}),
]
FAULTS = st.sampled_from(FAULTS_SEEN)


def _an_object(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "object"


@st.composite
def near_clean_tools(draw: st.DrawFn) -> dict[str, Any]:
    """A tool with nothing to repair, or with one fault placed in it."""
    tool: dict[str, Any] = {
        "name": draw(st.sampled_from(["t", "many.tool_000001", "caf\u00e9"])),
        "inputSchema": {"type": "object", "properties": draw(st.dictionaries(CLEAN_NAMES, CLEAN_SCHEMAS, max_size=2))},
    }
    if draw(st.booleans()):
        tool["outputSchema"] = draw(CLEAN_SCHEMAS.filter(_an_object))
    tool = copy.deepcopy(tool)  # (drawn values may be shared: the fault goes into a copy)
    if not draw(st.integers(0, 3)):
        return tool
    where, fault = draw(FAULTS)
    if where == "_meta":
        tool["_meta"] = fault
    elif where == "root":
        tool["outputSchema"] = fault
    elif fault is None or where not in tool:
        tool[where] = fault if fault is not None or where == "outputSchema" else {"type": "object"}
    else:
        node = tool[where]
        while isinstance(node.get("properties"), dict) and node["properties"] and draw(st.booleans()):
            node = node["properties"][draw(st.sampled_from(sorted(node["properties"])))]
        node.setdefault("properties", {})["f"] = fault
    return tool


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tool=st.one_of(near_clean_tools(), near_clean_tools(), TOOLS),
    client=st.sampled_from([*CLIENTS[:3], *CLIENTS[:3], *CLIENTS]),  # (host clients never take the fast way)
    era=st.sampled_from(ERAS),
    style=st.sampled_from(["compact", "spaced", "ascii"]),
    lessons=st.booleans(),
)
def test_a_tool_listed_without_the_rules_is_listed_as_the_rules_list_it(
    tool: Any, client: ClientProfile, era: Any, style: str, lessons: bool
) -> None:
    text = Raw(_text(tool, style))
    config = NormalizerConfig()
    fast = Normalizer(config, lessons=LessonBook(enabled=lessons)).list_tool_text(text, 0, era, client)
    slow = RulesAlways(config, lessons=LessonBook(enabled=lessons)).list_tool_text(text, 0, era, client)
    _same_listed(fast, slow)


CLEAN = {
    "name": "many.tool_000001",
    "description": 'r\u00e9gion 1 \u2014 "q"\n',
    "inputSchema": {"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "integer"}}}},
    "outputSchema": {
        "type": "object",
        "properties": {"price": {"type": "number", "minimum": 12.5}, "n": {"const": 123456789012345678901234}},
        "required": ["price"],
    },
}


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"description": "caf\u00e9"},
        {"outputSchema": {"type": "object", "properties": {}, "required": []}},
        {"inputSchema": {"type": "object", "properties": {"ids": {"type": ["array", "null"], "items": {}}}}},
    ],
)
def test_a_tool_with_nothing_to_repair_is_listed_without_the_rules(change: dict[str, Any]) -> None:
    """Not vacuous: the tools the fast way is for take it, whatever the spelling."""
    for style in ("compact", "spaced"):
        text = Raw(_text({**CLEAN, **change}, style))
        listed = Normalizer(NormalizerConfig())._unchanged(text, "2025-11-25", UNKNOWN, NOTHING_LEARNED)
        assert listed is not None and listed.text is None and listed.entry is not None


@pytest.mark.parametrize(
    "change",
    [
        {"outputSchema": {"type": "object", "properties": {"s": {"type": "string", "nullable": True}}}},
        {"outputSchema": {"type": "object", "additionalProperties": False}},  # (a boolean: the rules look)
        {"outputSchema": {"properties": {}}},  # no type: object at the root (object_root)
        {"outputSchema": None},
        {"inputSchema": {"type": "object", "properties": {"ids": {"type": "array"}}}},  # no items
        {"inputSchema": {"properties": {}}},  # no type at the root
        {"inputSchema": {"type": "object", "properties": None}},
        {"_meta": {"io.example/x": 1}},
        {"description": "\\u0024ref"},  # (an escape, written as text: only the backslash matters)
        {"outputSchema": {"type": "object", "$defs": {"a": {}}}},
        {"name": 12},
    ],
)
def test_a_tool_a_rule_may_change_goes_to_the_rules(change: dict[str, Any]) -> None:
    text = Raw(_text({**CLEAN, **change}, "spaced"))
    assert Normalizer(NormalizerConfig())._unchanged(text, "2025-11-25", UNKNOWN, NOTHING_LEARNED) is None
    declared = NormalizerConfig.from_mapping({"tools": {CLEAN["name"]: {"relax": ["/price"]}}})
    clean = Raw(_text(CLEAN, "compact"))
    assert Normalizer(declared)._unchanged(clean, "2025-11-25", UNKNOWN, NOTHING_LEARNED) is None


@pytest.mark.parametrize(("where", "fault"), FAULTS_SEEN)
@pytest.mark.parametrize("style", ["compact", "spaced"])
def test_each_fault_the_rules_repair_is_listed_as_they_list_it(where: str, fault: Any, style: str) -> None:
    """Each kind of fault, placed in a tool with nothing else to repair, at the root of its schema
    and one property down: listed the fast way or not, the client gets what the rules give."""
    for depth in (0, 1):
        tool: dict[str, Any] = copy.deepcopy(CLEAN)
        if where in ("_meta", "root"):
            tool["_meta" if where == "_meta" else "outputSchema"] = fault
        elif fault is None:
            tool[where] = None
        else:
            node = tool[where]["properties"]
            if depth:
                node = next(iter(node.values())).setdefault("properties", {})
            node["f"] = fault
        text = Raw(_text(tool, style))
        for client in CLIENTS[:3]:
            config = NormalizerConfig()
            fast = Normalizer(config).list_tool_text(text, 0, "2025-11-25", client)
            _same_listed(fast, RulesAlways(config).list_tool_text(text, 0, "2025-11-25", client))
