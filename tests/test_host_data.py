"""The host and model-API facts (``mcp_normalizer/hosts.toml``, issue 39): packaged data validated at
load, its constraint keys a closed set, each key with one repair, an oracle written apart from the
repair, and a test here: the oracle finds the fault in a fixture and not in what the real rule makes
of it for a host that refuses it, while a client that is no host gets the fixture as it was."""

from __future__ import annotations

import ast
import base64
import tomllib
from typing import Any

import orjson
import pytest

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.engine import host_tables
from mcp_normalizer.engine.audit import AuditLog
from mcp_normalizer.engine.exchange import Exchange
from mcp_normalizer.engine.normalize import Normalizer
from mcp_normalizer.engine.rules import RULES_BY_NAME
from mcp_normalizer.engine.rules.clients import profile_for
from mcp_normalizer.engine.rules.gemini_schemas import ENUM_ARGUMENTS_KEY
from mcp_normalizer.engine.rules.host_faults import (
    ANYOF_ARM_KEYWORD,
    ARRAY_ITEMS,
    CONSTRAINTS,
    ENUM_NON_STRING,
    ENUM_TYPE,
    IMAGE_MIME,
    IMAGE_SVG,
    IMAGE_UNDECODABLE,
    LEGACY_TUPLE,
    NEVER_BRANCH,
    OBJECT_PROPERTIES,
    PROPERTY_KEY,
    PROPERTY_KEY_GEMINI,
    REQUIRED_UNDEFINED,
    RESOURCE_LINK,
    SCHEMA_KEYWORD,
    STRUCTURED_NOT_OBJECT,
    TEXT_PARSED_AS_STRUCTURED,
    TOOL_NAME,
    TYPE_BESIDE_ANYOF,
)
from mcp_normalizer.engine.rules.host_profiles import HOSTS, MODEL_APIS, PROFILES, Host, host_for, load
from mcp_normalizer.engine.scopes import ScopeStore
from mcp_normalizer.engine.transform import ResponseTransformer
from mcp_normalizer.errors import ConfigError
from mcp_normalizer.wire.jsonrpc import inspect_request

from .support import JSON_HEADERS, ROOT, feed_all

pytestmark = pytest.mark.pure

ERA = "2025-11-25"
#: The era where a non-object structuredContent is valid (a result fault judged there).
MODERN = "2026-07-28"
SVG = '<svg xmlns="http://www.w3.org/2000/svg"><text>caf\u00e9</text></svg>'

#: Per key: a block (for a result fault) or a tool (for a listing fault) that has the fault.
FIXTURES: dict[str, dict[str, Any]] = {
    IMAGE_SVG: {"type": "image", "data": base64.b64encode(SVG.encode()).decode(), "mimeType": "image/svg+xml"},
    RESOURCE_LINK: {"type": "resource_link", "uri": "ui://demo/view", "name": "view", "mimeType": "text/html"},
    TYPE_BESIDE_ANYOF: {
        "name": "find",
        "inputSchema": {
            "type": "object",
            "properties": {"q": {"type": "string", "anyOf": [{"minLength": 1}, {"format": "uri"}]}},
        },
    },
    TOOL_NAME: {"name": "weather.get", "inputSchema": {"type": "object"}},
    PROPERTY_KEY: {
        "name": "search",
        "inputSchema": {"type": "object", "properties": {"$filter": {"type": "string"}, "max results": {}}},
    },
    PROPERTY_KEY_GEMINI: {
        "name": "filter",
        "inputSchema": {
            "type": "object",
            "properties": {
                "page.size": {"type": "integer"},
                "where": {"type": "object", "properties": {"-x": {"type": "number"}, "caf\u00e9": {}}},
            },
        },
    },
    ARRAY_ITEMS: {
        "name": "pair",
        "inputSchema": {"type": "object", "properties": {"p": {"type": "array", "prefixItems": [{"type": "string"}]}}},
    },
    SCHEMA_KEYWORD: {
        "name": "draft7",
        "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {}},
    },
    ANYOF_ARM_KEYWORD: {
        "name": "unit",
        "inputSchema": {
            "type": "object",
            "properties": {"u": {"anyOf": [{"const": "\u00b0C"}, {"type": "object", "additionalProperties": False}]}},
        },
    },
    REQUIRED_UNDEFINED: {
        "name": "rows",
        "inputSchema": {
            "type": "object",
            "properties": {"r": {"type": "array", "items": {"type": "object", "properties": {}, "required": ["id"]}}},
        },
    },
    ENUM_NON_STRING: {
        "name": "level",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "number", "enum": [1, 2.5, 1e-7]}}},
    },
    TEXT_PARSED_AS_STRUCTURED: {"content": [{"type": "text", "text": ' [12.5, "\u6771\u4eac", null] '}]},
    STRUCTURED_NOT_OBJECT: {
        "content": [{"type": "text", "text": "two rows"}],
        "structuredContent": [{"id": 1, "prix": 12.5, "note": None}, {"id": 123456789012345678901, "prix": 1e-7}],
    },
    OBJECT_PROPERTIES: {
        "name": "describe",
        "inputSchema": {"type": "object", "properties": {"filter": {"type": "object", "description": '{"p": 12.5}'}}},
    },
    LEGACY_TUPLE: {
        "name": "move",
        "inputSchema": {
            "type": "object",
            "properties": {"to": {"type": "array", "items": [{"type": "number"}, {"type": "number"}]}},
        },
    },
    NEVER_BRANCH: {
        "name": "greet",
        "inputSchema": {"type": "object", "properties": {"who": {"anyOf": [{"not": {}}, {"type": "string"}]}}},
    },
    ENUM_TYPE: {
        "name": "paint",
        "inputSchema": {
            "type": "object",
            "properties": {"colours": {"type": "array", "items": {"type": "string"}, "enum": ["red", "gr\u00fcn"]}},
        },
    },
    IMAGE_MIME: {  # a 1x1 PNG declared as WebP
        "type": "image",
        "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
        "mimeType": "image/webp",
    },
    IMAGE_UNDECODABLE: {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},  # the PNG signature alone
}


def listed(tool: dict[str, Any], client: str) -> tuple[Any, set[str]]:
    """``tool`` as a ``tools/list`` response the proxy sends to ``client`` lists it (the stream's
    rules too: tool names are repaired there), and the rules that rewrote it."""
    normalizer = Normalizer(NormalizerConfig.shipped())
    info = inspect_request(b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}', [])
    assert info is not None
    exchange = Exchange(
        info.pending,
        ERA,
        "s",
        ScopeStore().state("s"),
        sole=info.sole,
        own_stream=True,
        client=profile_for({"name": client}),
    )
    rules: set[str] = set()
    audit = AuditLog("test").with_sink(lambda record, *_: rules.add(record.rewrite.rule))
    transformer = ResponseTransformer(exchange, normalizer, audit, slice_seconds=0)
    transformer.start(200, JSON_HEADERS)
    body = feed_all(transformer, orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": [tool]}}))
    return orjson.loads(body)["result"]["tools"][0], rules


def repaired(key: str, client: str) -> tuple[Any, set[str]]:
    """The fixture of ``key`` as the real engine hands it to ``client``, and the rules that rewrote it."""
    normalizer = Normalizer(NormalizerConfig.shipped())
    profile = profile_for({"name": client})
    fixture = FIXTURES[key]
    if CONSTRAINTS[key].subject == "tool":
        return listed(fixture, client)
    tool = {"name": "render", "inputSchema": {"type": "object"}}
    if CONSTRAINTS[key].subject == "result":  # (judged in the era where the spec allows it)
        entry = normalizer.tools_list({"tools": [tool]}, MODERN, profile).entries[0]
        outcome = normalizer.tools_call(fixture, "render", entry, MODERN, 200, client=profile)
        return outcome.result, {record.rewrite.rule for record in outcome.records}
    entry = normalizer.tools_list({"tools": [tool]}, ERA, profile).entries[0]
    result = {"content": [{"type": "text", "text": "here"}, fixture]}
    outcome = normalizer.tools_call(result, "render", entry, ERA, 200, client=profile)
    return outcome.result["content"][1], {record.rewrite.rule for record in outcome.records}


def refusing(key: str) -> Host:
    return next(host for host in HOSTS if key in host.faults)


def test_every_key_of_the_closed_set_has_a_fixture_a_repair_and_a_host_or_api_that_refuses_it() -> None:
    assert set(FIXTURES) == set(CONSTRAINTS)
    named = {key for host in HOSTS for key in host.faults} | {k for api in MODEL_APIS.values() for k in api.refuses}
    assert named == set(CONSTRAINTS)
    for constraint in CONSTRAINTS.values():
        assert constraint.rule in RULES_BY_NAME, constraint
    for api in MODEL_APIS.values():
        assert all(fact.rule in RULES_BY_NAME for fact in api.repaired_for_every_client), api.family


@pytest.mark.parametrize("key", sorted(CONSTRAINTS))
def test_the_oracle_finds_the_fault_and_the_repair_removes_it_for_the_host_alone(key: str) -> None:
    constraint = CONSTRAINTS[key]
    assert constraint.violates(FIXTURES[key])  # the oracle bites
    host = refusing(key)
    output, rules = repaired(key, host.client_names[0])
    assert not constraint.violates(output), (host.profile, output)
    assert constraint.rule in rules, (host.profile, rules)
    untouched, others = repaired(key, "mcp")  # a client that is no host
    assert constraint.violates(untouched) and constraint.rule not in others
    if constraint.subject == "tool":  # the model sends arguments in another form only where the key says
        fixture = FIXTURES[key]
        keys = set(fixture["inputSchema"].get("properties", {}))
        moved = output["name"] != fixture["name"] or set(output["inputSchema"].get("properties", {})) != keys
        moved = moved or ENUM_ARGUMENTS_KEY in output.get("_meta", {})  # values sent in another form
        assert moved == constraint.changes_arguments, (key, output)
    else:
        assert not constraint.changes_arguments


def test_the_oracles_import_none_of_the_repairs() -> None:
    path = ROOT / "mcp_normalizer" / "engine" / "rules" / "host_faults.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    modules |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not {m for m in modules if m and any(r in m for r in ("host_", "tool_names", "schema", "clients"))}


def test_each_host_names_its_model_api_what_its_model_reads_and_the_sources() -> None:
    families = {host.profile: host.model_api for host in HOSTS}
    assert families == {
        "claude-code": "anthropic",
        "claude-desktop": "anthropic",
        "claude-connectors": "anthropic",
        "codex": "openai",
        "chatgpt": "openai",
        "vscode": "user-chosen",
        "cursor": "user-chosen",
        "gemini-cli": "gemini",
        "kiro": "user-chosen",
    }
    assert set(MODEL_APIS) == {"anthropic", "openai", "openai-strict", "gemini"}
    assert PROFILES["gemini-cli"].reads == "content"
    assert {PROFILES[p].reads for p in ("claude-code", "codex", "vscode")} == {"structured_first"}
    for host in HOSTS:
        assert host.source and host.reads_source and all(host.faults.values()), host.profile
        for key in set(MODEL_APIS[host.model_api].refuses) if host.model_api in MODEL_APIS else ():
            assert key in host.faults  # a host refuses what its model API refuses
    for api in MODEL_APIS.values():
        facts = (*api.refuses_unrepaired, *api.repaired_for_every_client)
        assert api.source and all(api.refuses.values()) and all(f.source and f.what for f in facts)


def test_the_shipped_table_is_read_from_the_package() -> None:
    text = (ROOT / "mcp_normalizer" / "hosts.toml").read_text(encoding="utf-8")
    again = load(tomllib.loads(text))
    assert again.hosts == HOSTS and dict(again.model_apis) == dict(MODEL_APIS)
    assert host_for("claude-ai") is PROFILES["claude-desktop"]


def table(**changes: Any) -> dict[str, Any]:
    """A small valid table, with ``changes`` made to its one host (a value ``None`` removes the key)."""
    host: dict[str, Any] = {
        "title": "H",
        "client_names": ["h"],
        "source": "log",
        "model_api": "anthropic",
        "reads": "content",
        "reads_source": "run",
        "faults": {TOOL_NAME: "issue"},
    }
    host.update(changes)
    host = {key: value for key, value in host.items() if value is not None}
    api = {"title": "A", "source": "docs", "refuses": {IMAGE_SVG: "issue"}}
    return {"model_api": {"anthropic": api}, "host": {"h": host}}


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (table(faults={"svg": "issue"}), "host.h faults: unknown constraint key 'svg'"),
        (table(faults={TOOL_NAME: ""}), f"host.h faults.{TOOL_NAME}: the source must be"),
        (table(source=None), "host.h: source must be a non-empty string"),
        (table(reads_source=" "), "host.h: reads_source must be a non-empty string"),
        (table(model_api="mistral"), "host.h: unknown model_api 'mistral'"),
        (table(reads="text"), "host.h: reads must be one of"),
        (table(versions={TOOL_NAME: {"fixed_in": "next", "source": "s"}}), "fixed_in 'next' is no version"),
        (table(versions={TOOL_NAME: {"fixed_in": "1.0"}}), f"host.h versions.{TOOL_NAME}: source must be"),
        (table(versions={ARRAY_ITEMS: {"source": "s"}}), "the host does not refuse 'array_without_items'"),
        (table(color="red"), "host.h: unknown key 'color'"),
        (table(client_names=[]), "host.h: client_names must be"),
        ({"hosts": {}}, "unknown key 'hosts'"),
        (table(validates_structured="no"), "host.h: validates_structured must be true or false"),
        (table(validates_structured=False), "host.h: validates_structured_source must be a non-empty string"),
        (table(validates_structured_source="s"), "host.h: validates_structured_source without validates_structured"),
    ],
)
def test_a_table_that_breaks_a_rule_is_refused_naming_the_entry_and_the_key(data: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=None) as error:
        load(data, "t")
    assert says in str(error.value)


def test_the_model_api_entries_are_checked_too() -> None:
    data = table()
    data["model_api"]["anthropic"]["refuses"] = {"root_anyof": "issue"}
    with pytest.raises(ConfigError, match="model_api.anthropic refuses: unknown constraint key 'root_anyof'"):
        load(data)
    data = table()
    data["model_api"]["anthropic"]["refuses_unrepaired"] = [{"what": "enum on numbers"}]
    with pytest.raises(ConfigError, match="model_api.anthropic refuses_unrepaired 0: source must be"):
        load(data)


def test_a_client_name_two_hosts_claim_is_refused() -> None:
    data = table()
    data["host"]["g"] = {**data["host"]["h"], "title": "G"}
    with pytest.raises(ConfigError, match="host.g client_names: 'h' is host.h's too"):
        load(data)
    assert load(table()).hosts[0].faults == {IMAGE_SVG: "issue", TOOL_NAME: "issue"}  # the API's and its own


def test_a_table_changed_by_hand_is_put_back_and_a_missing_marker_is_named() -> None:
    text = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    edited = text.replace("| Cursor (`cursor`) | `cursor-vscode` |", "| Cursor (`cursor`) | `cursor` |")
    assert edited != text
    assert (
        host_tables.rendered(
            {
                **{path: (ROOT / path).read_text(encoding="utf-8") for path, _, _ in host_tables.TABLES},
                "docs/rules.md": edited,
            }
        )["docs/rules.md"]
        == text
    )
    with pytest.raises(ValueError, match="model-apis"):
        host_tables.splice(text.replace(host_tables.begin("model-apis"), ""), "model-apis", "| x |")
