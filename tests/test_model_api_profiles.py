"""Each model-API family takes every tool the proxy lists for its hosts (issue 39, must-show).

One upstream serves every tool of ``../shared/cases/public.json`` and one fixture tool for each
``tools/list`` kind of ``cases/faults.md`` "Kinds from the autumn-2026 reports" (built from the
descriptions: decimals, exponents, unicode). For each family a real client lists the tools through
the proxy as a host of that family (``clientInfo``: Claude Code for ``anthropic``, Codex for
``openai``, which sends MCP tools with ``strict: false``, Gemini CLI for ``gemini``), or, for
``openai-strict``, as ``openai-agents`` does (its own MCP client, then ``MCPUtil.to_function_tool``
with ``convert_schemas_to_strict``: strict where the schema allows it, its non-strict fallback
elsewhere), through a proxy whose ``[normalizer] model_api = "openai-strict"`` names the family of
a client no host profile names (openai-agents sends the SDK's ``clientInfo``, ``mcp``; without the
setting it gets no model API's repair); the family's judge (:mod:`tests.model_api_judges`, from the
real converters and the APIs' published rules) then judges every tool. Directly, without the
proxy, the same judges refuse the fixtures the reports say they do.

A tool the proxy withholds from a host (missing from that host's listing) counts as not refused
only when the family refuses the server's own tool and every tool the family takes is listed (one
bad tool never costs the others). :data:`KNOWN_REFUSED` lists the tools a family still refuses
through the proxy today, each with its kind; those cases are ``xfail(strict=True)``, so the list
stays exact: a repair that lands makes its entry fail until it is removed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from mcp_normalizer.config import NormalizerConfig, Settings
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning

from .model_api_judges import JUDGES, strict_conversion
from .support import CASES_FILE, load_cases, proxy_for, serve

#: The hosts whose clientInfo each family's listing is asked with (hosts.toml ``client_names``; the
#: versions run in reference/hosts-in-the-loop.md). ``openai-strict`` lists with openai-agents' client.
HOSTS: dict[str, tuple[str, str] | None] = {
    "anthropic": ("claude-code", "2.1.332"),
    "openai": ("codex-mcp-client", "0.171.0"),
    "openai-strict": None,
    "gemini": ("gemini-cli-mcp-client", "0.61.0"),
}
FAMILIES = tuple(HOSTS)
ORIGINAL_NAME = "dev.mcp-normalizer/original-name"


def _object(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, **extra}


#: One tool per ``tools/list`` kind of faults.md "Kinds from the autumn-2026 reports" (the kind is
#: the tool's name, after ``autumn_``), each with that fault alone, with the families the reports
#: say refuse it ("who breaks").
AUTUMN: dict[str, tuple[dict[str, Any] | None, frozenset[str]]] = {
    "invalid_type_keyword": (
        _object(
            {
                "since": {"type": "date-time", "description": "d\u00e8s (ISO 8601)"},
                "limit": {"type": "int", "maximum": 500},
                "ratio": {"type": "float", "minimum": 1e-7, "maximum": 12.5},
                "meta": {"type": "mixed"},
            }
        ),
        frozenset({"anthropic", "gemini"}),
    ),
    "required_boolean": (
        _object(
            {
                "account": {"type": "string", "required": True, "description": "compte \u2116"},
                "note": {"type": "string", "required": False},
            }
        ),
        frozenset({"anthropic", "gemini", "openai-strict"}),
    ),
    "required_in_properties": (
        _object({"account": {"type": "string"}, "amount": {"type": "number"}, "required": ["account"]}),
        frozenset({"anthropic", "gemini"}),
    ),
    "enum_not_array": (
        _object({"currency": {"type": "string", "enum": "EUR"}, "kind": {"type": "string", "enum": None}}),
        frozenset({"anthropic"}),
    ),
    "enum_type_conflict": (
        _object({"tags": {"type": "array", "items": {"type": "string"}, "enum": ["caf\u00e9", "th\u00e9"]}}),
        frozenset({"openai", "openai-strict"}),
    ),
    "legacy_tuple_items": (
        _object(
            {
                "pair": {
                    "type": "array",
                    "items": [{"type": "string"}, {"type": "number", "minimum": 0.5}],
                    "additionalItems": False,
                }
            }
        ),
        frozenset({"anthropic", "gemini", "openai"}),
    ),
    "enum_non_string": (
        _object(
            {
                "level": {"type": "integer", "enum": [1, 2, 3]},
                "ratio": {"type": "number", "enum": [0.5, 12.5, 1e-7]},
                "strict": {"type": "boolean", "enum": [True, False]},
                "label": {"type": "string", "enum": ["\u00e9t\u00e9", "hiver"]},
            },
            required=["level"],
        ),
        frozenset({"gemini"}),
    ),
    "input_schema_missing": (None, frozenset(FAMILIES)),  # (inputSchema: null)
    "object_without_properties": (
        _object({"filter": {"type": "object", "description": "any filter (Go SDK `any`)"}, "q": {"type": "string"}}),
        frozenset({"openai", "openai-strict"}),
    ),
    "never_branch_anyof": (
        _object({"value": {"anyOf": [{"not": {}}, {"type": "string", "maxLength": 64}]}}),
        frozenset({"openai-strict", "gemini"}),
    ),
}


def autumn_tool(kind: str) -> dict[str, Any]:
    """The fixture tool of ``kind`` (named ``autumn_<kind>``: a name every API takes)."""
    return {"name": f"autumn_{kind}", "description": f"fixture: {kind} (\u00e9\u2713)", "inputSchema": AUTUMN[kind][0]}


def public_tools() -> list[dict[str, Any]]:
    """Every case's tool of public.json, in case order; a name already taken by a different tool
    gets a ``_2`` suffix (two cases share ``search`` and ``get_item``), the same tool is served once."""
    if not CASES_FILE.exists():
        return []
    tools: dict[str, dict[str, Any]] = {}
    for case in json.loads(CASES_FILE.read_text(encoding="utf-8")):
        tool = case["tool"]
        name = tool["name"]
        while name in tools and tools[name] != tool:
            name += "_2"
        tools[name] = {**tool, "name": name}
    return list(tools.values())


#: A spec-valid tool written with field data: unicode and punctuated property names, decimals,
#: exponents, integers past 64 bits, nulls at depth (defaults and examples). No autumn-2026 fault;
#: Anthropic refuses its top-level keys (claude-code#4668), Gemini its parameter names (Vertex AI).
FIELD_DATA = {
    "name": "ledger_field_data",
    "description": "Entries (caf\u00e9 \u2014 \u20ac 12.50)",
    "inputSchema": {
        "type": "object",
        "properties": {
            "\u00e9tiquette": {"type": "string", "default": "caf\u00e9 cr\u00e8me"},
            "page size": {"type": "integer", "minimum": 1, "maximum": 123456789012345678901234},
            "ratio": {"type": "number", "minimum": 1e-7, "maximum": 12.5, "multipleOf": 2.5e-3},
            "filter": {
                "type": "object",
                "properties": {
                    "\u540d\u524d": {"type": ["string", "null"], "default": None},
                    "window": {
                        "type": "object",
                        "properties": {"since": {"type": ["string", "null"], "format": "date-time"}},
                        "examples": [{"since": None}],
                    },
                },
            },
        },
        "required": ["\u00e9tiquette"],
    },
}
FIELD_DATA_REFUSED_DIRECTLY = frozenset({"anthropic", "gemini"})


def upstream_tools() -> list[dict[str, Any]]:
    """Every tool the upstream serves: the public cases', the autumn fixtures and :data:`FIELD_DATA`."""
    return [*public_tools(), *(autumn_tool(kind) for kind in AUTUMN), FIELD_DATA]


TOOLS = upstream_tools()
BY_NAME = {tool["name"]: tool for tool in TOOLS}

#: What each family still refuses through the proxy today (``(family, tool name)``: why). Each entry
#: is an ``xfail(strict=True)`` case: when a repair lands, its entry fails until it is removed.
KNOWN_REFUSED: dict[tuple[str, str], str] = {}


# -- listing through the proxy ------------------------------------------------------------------


async def list_as(url: str, name: str, version: str) -> list[dict[str, Any]]:
    """``tools/list`` with the Python ``mcp`` client introducing itself as ``name`` ``version``
    (its ``clientInfo``); the tools as JSON."""
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import Implementation

    info = Implementation(name=name, version=version)
    async with httpx2.AsyncClient(timeout=60) as http:
        transport = streamable_http_client(url, http_client=http)
        async with transport as (read, write), ClientSession(read, write, client_info=info) as session:
            await session.initialize()
            result = await session.list_tools()
    return [tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in result.tools]


async def list_as_agents(url: str) -> list[dict[str, Any]]:
    """``tools/list`` as ``openai-agents`` 0.24.0 does it (``MCPServerStreamableHttp``: the Python
    ``mcp`` client with the SDK's own ``clientInfo``); the tools as JSON."""
    from agents.mcp import MCPServerStreamableHttp

    async with MCPServerStreamableHttp(params={"url": url, "timeout": 60}, client_session_timeout_seconds=60) as server:
        tools = await server.list_tools()
    return [tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in tools]


def _config(**changes: Any) -> NormalizerConfig:
    return dataclasses.replace(Settings(upstream="http://127.0.0.1:1/mcp").load_config(), **changes)


def _server() -> ScriptedServer:
    result = {"content": [{"type": "text", "text": "ok"}]}
    return ScriptedServer([ToolSpec(tool, returning(result)) for tool in TOOLS], response_mode="json")


@pytest.fixture(scope="module")
def listings() -> Iterator[dict[str, dict[str, dict[str, Any]]]]:
    """Per family, the tools its host lists through the proxy, by their upstream name."""
    load_cases()  # (skips, or fails under MCP_NORMALIZER_REQUIRE_SHARED, without ../shared)

    async def each(url: str) -> dict[str, list[dict[str, Any]]]:
        found: dict[str, list[dict[str, Any]]] = {}
        for family, host in HOSTS.items():
            found[family] = await list_as(url, *host) if host is not None else await list_as_agents(url)
        return found

    # openai-agents names no host (clientInfo ``mcp``): the operator names its family, globally
    # (``[normalizer] model_api``), which no client with a host profile takes
    with serve(_server()) as up, proxy_for(up + "/mcp", _config(model_api="openai-strict")) as px:
        listed = anyio.run(each, px + "/mcp")
    yield {
        family: {(tool.get("_meta") or {}).get(ORIGINAL_NAME, tool["name"]): tool for tool in tools}
        for family, tools in listed.items()
    }


def _refused_through(family: str, name: str, listing: dict[str, dict[str, Any]]) -> list[str]:
    """Why ``family`` refuses tool ``name`` as its host got it through the proxy (empty: taken, or
    withheld while the family refuses the server's own tool and every tool it takes is listed)."""
    judge = JUDGES[family]
    if name in listing:
        return judge.refused(listing[name])
    if not judge.refused(BY_NAME[name]):
        return ["withheld: the family takes the server's own tool, the proxy did not list it"]
    lost = [other for other in TOOLS if other["name"] not in listing and not judge.refused(other)]
    return [f"withheld, and with it tools the family takes: {[t['name'] for t in lost]}"] if lost else []


def _cases() -> Iterator[Any]:
    for family in FAMILIES:
        for tool in TOOLS:
            key = (family, tool["name"])
            marks = [pytest.mark.xfail(strict=True, reason=KNOWN_REFUSED[key])] if key in KNOWN_REFUSED else []
            yield pytest.param(family, tool["name"], id=f"{family}-{tool['name']}", marks=marks)


@pytest.mark.wire
@pytest.mark.parametrize(("family", "name"), list(_cases()))
def test_through_the_proxy_the_family_refuses_no_tool(
    family: str, name: str, listings: dict[str, dict[str, dict[str, Any]]]
) -> None:
    reasons = _refused_through(family, name, listings[family])
    assert not reasons, (family, name, reasons, listings[family].get(name))


@pytest.mark.wire
def test_every_tool_reaches_each_family_or_is_withheld_alone(listings: dict[str, dict[str, dict[str, Any]]]) -> None:
    for family, listing in listings.items():
        judge = JUDGES[family]
        missing = [tool["name"] for tool in TOOLS if tool["name"] not in listing]
        assert all(judge.refused(BY_NAME[name]) for name in missing), (family, missing)
        assert len(listing) + len(missing) == len(TOOLS), family


@pytest.mark.wire
def test_without_the_setting_openai_agents_gets_no_model_api_repair() -> None:
    """No host profile and no setting: openai-agents (clientInfo ``mcp``) gets the repairs every
    client gets (an ``inputSchema: null``, which its SDK client refuses with the whole list), none of
    a model API's: the tool names and the autumn-2026 schemas as the server wrote them, which the
    strict family refuses."""
    load_cases()
    with serve(_server()) as up, proxy_for(up + "/mcp") as px:
        through = {tool["name"]: tool for tool in anyio.run(list_as_agents, px + "/mcp")}
    assert "session.pause" in through  # (its `properties: null` repaired, as for every client; its name not)
    for name in ("session.pause", "autumn_object_without_properties", "autumn_never_branch_anyof"):
        assert name == "session.pause" or through[name] == BY_NAME[name], name
        assert JUDGES["openai-strict"].refused(through[name]), name


@pytest.mark.wire
def test_openai_agents_keeps_strict_every_tool_the_server_wrote_strict(
    listings: dict[str, dict[str, dict[str, Any]]],
) -> None:
    """Strict where the schema allows it: a tool openai-agents converts to strict from the server's
    own bytes (and OpenAI takes) is strict through the proxy too."""
    listing = listings["openai-strict"]
    for tool in TOOLS:
        direct = strict_conversion(tool)
        if direct.strict and not JUDGES["openai-strict"].refused(tool) and tool["name"] in listing:
            assert strict_conversion(listing[tool["name"]]).strict, tool["name"]


# -- directly: the judges bite where the reports say ------------------------------------------------


def _direct_cases() -> Iterator[Any]:
    for kind, (_, families) in AUTUMN.items():
        for family in sorted(families):
            yield pytest.param(kind, family, id=f"{kind}-{family}")


@pytest.mark.pure
@pytest.mark.parametrize(("kind", "family"), list(_direct_cases()))
def test_directly_the_family_refuses_the_kind_the_reports_say(kind: str, family: str) -> None:
    assert JUDGES[family].refused(autumn_tool(kind)), (kind, family)


@pytest.mark.pure
def test_directly_the_families_refuse_the_public_cases_the_reports_name() -> None:
    """The public cases' tools the families refuse as the server wrote them (reports quoted in each
    judge): an object without properties in ``items`` (OpenAI), a draft-07 ``$schema`` (Gemini),
    ``properties: null`` and ``properties: []`` (every family)."""
    tools = {tool["name"]: tool for tool in public_tools()}
    if not tools:
        load_cases()
    refused = {(family, name) for name, tool in tools.items() for family in FAMILIES if JUDGES[family].refused(tool)}
    assert {("openai", "perplexity_ask"), ("gemini", "read_text_file")} <= refused
    for name in ("session.pause", "shopware-toolsets-list"):
        assert {(family, name) for family in FAMILIES} <= refused, name


@pytest.mark.pure
def test_every_family_takes_a_clean_tool_and_refuses_field_data_where_its_rules_say() -> None:
    """The judges are no blanket refusal: a clean tool with decimals and nulls at depth passes each;
    the field-data tool's names are refused by the families whose rules name them."""
    clean = {
        "name": "rates_get",
        "description": "caf\u00e9 \u2713",
        "inputSchema": {
            "type": "object",
            "properties": {
                "currency": {"type": "string", "enum": ["EUR", "\u00a5"]},
                "amount": {"type": "number", "minimum": 1e-7, "maximum": 12.5},
                "count": {"type": "integer", "maximum": 123456789012345678901234},
                "at": {"type": ["string", "null"], "default": None},
            },
            "required": ["currency"],
        },
    }
    for family in FAMILIES:
        assert not JUDGES[family].refused(clean), family
        assert bool(JUDGES[family].refused(FIELD_DATA)) == (family in FIELD_DATA_REFUSED_DIRECTLY), family
    assert strict_conversion(clean).strict  # openai-agents sends it strict


@pytest.mark.pure
def test_the_fixtures_are_refused_for_their_kind_alone() -> None:
    """Each fixture carries its fault alone: a family the reports do not name for the kind takes it,
    except where the family's own published rules refuse the same fault (kept explicit here)."""
    also = {
        # google-genai's JSONSchema model takes no scalar enum (a ValidationError)
        ("enum_not_array", "gemini"),
        # Codex's tool spec refuses a draft-07 tuple (hosts.toml host.codex), which openai-agents sends as is
        ("legacy_tuple_items", "openai-strict"),
    }
    for kind, (_, families) in AUTUMN.items():
        for family in FAMILIES:
            if family not in families and (kind, family) not in also:
                assert not JUDGES[family].refused(autumn_tool(kind)), (kind, family)
