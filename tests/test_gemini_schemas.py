"""The Gemini API's schema keys (issue 39, item 2) and the model-API family setting (item 1), on
the wire: a scripted upstream, the proxy, the Python ``mcp`` client naming itself as Gemini CLI
0.61.0 (``gemini-cli-mcp-client``), as Cursor (``cursor-vscode``, a host whose user picks the
model), or as the SDK (``mcp``).

Each key's oracle (:mod:`mcp_normalizer.engine.rules.host_faults`, written from the Gemini API's
published errors) flags the server's tool and passes the proxy's; the nodes replaced are in the
tool's ``_meta``; an argument's numeric or boolean ``enum`` reaches the client as strings and the
call's strings reach the upstream as the values, spelled as the enum spelled them (read from the
request bytes the upstream got). google-genai's own MCP converter (``_mcp_utils.mcp_to_gemini_tools``,
what a Gemini-backed Python host sends as ``parameters``) serializes the proxy's listing clean and
warns on the server's (its ``Schema.enum`` is a list of strings). A client whose family is not
gemini gets the server's bytes.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import orjson
import pytest

from mcp_normalizer.config import NormalizerConfig, Settings, rule_config
from mcp_normalizer.demo.upstream import ScriptedServer, ToolCall, ToolSpec
from mcp_normalizer.engine.rules.clients import profile_for, resolve_model_api
from mcp_normalizer.engine.rules.gemini_schemas import (
    ENUM_ARGUMENTS_KEY,
    convert_arguments,
    enum_arguments,
    may_take,
    spell,
)
from mcp_normalizer.engine.rules.host_faults import CONSTRAINTS, ENUM_NON_STRING, GEMINI_CONSTRAINTS
from mcp_normalizer.errors import ConfigError
from mcp_normalizer.types import Receive, Scope, Send

from .model_api_judges import JUDGES
from .support import HEADERS, proxy_for, serve

GEMINI = {"name": "gemini-cli-mcp-client", "version": "0.61.0"}
CURSOR = {"name": "cursor-vscode", "version": "1.0.0"}
SDK = {"name": "mcp", "version": "1.26.0"}
CLAUDE = {"name": "claude-code", "version": "2.1.332"}
KEPT = "dev.mcp-normalizer/original-keywords"
KEYS = [constraint.key for constraint in GEMINI_CONSTRAINTS]

FORECAST: dict[str, Any] = {
    "name": "forecast.query",
    "description": "Pr\u00e9visions m\u00e9t\u00e9o",
    "inputSchema": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "days": {"type": "integer", "enum": [1, 2, 7], "description": "days ahead"},
            "metric": {"type": "boolean", "enum": [True, False]},
            "step": {"type": "number", "enum": [1.5, 1e-7, 12.5]},
            "levels": {"type": "array", "items": {"type": "integer", "enum": [10, 20, -40]}},
            "unit": {
                "anyOf": [
                    {"const": "celsius"},
                    {"const": "fahrenheit"},
                    {"type": "object", "properties": {"kelvin": {"type": "number"}}, "additionalProperties": False},
                ]
            },
            "stations": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"id": {"type": "string"}},
                    "required": ["id", "r\u00e9gion"],
                },
            },
            "note": {"type": ["string", "null"]},
        },
        "required": ["days"],
    },
}
PLAIN: dict[str, Any] = {
    "name": "echo",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}
#: The request bytes of the ``enum`` values as the server's listing spells them.
SPELLED = {"days": b"2", "metric": b"true", "step": b"1e-7"}


class Recorder:
    """An ASGI wrapper around the scripted upstream that keeps each POST body as it came."""

    def __init__(self, app: Any, respell: dict[bytes, bytes] | None = None) -> None:
        self.app = app
        self.bodies: list[bytes] = []
        #: texts replaced in each response (same lengths): how another server spells its numbers
        self.respell = respell or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        self.bodies.append(body)
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def respelled(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                body = message.get("body", b"")
                for old, new in self.respell.items():
                    body = body.replace(old, new)
                message = {**message, "body": body}
            await send(message)

        await self.app(scope, replay, respelled if self.respell else send)

    def calls(self) -> list[dict[str, Any]]:
        """The ``tools/call`` bodies received, each with its raw ``arguments`` text."""
        found = []
        for body in self.bodies:
            message = json.loads(body)  # (exact big integers)
            if isinstance(message, dict) and message.get("method") == "tools/call":
                found.append({"message": message, "raw": body})
        return found


async def _answer(call: ToolCall) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": json.dumps(call.arguments, sort_keys=True)}]}


@contextmanager
def upstream(respell: dict[bytes, bytes] | None = None) -> Iterator[tuple[str, Recorder]]:
    server = ScriptedServer([ToolSpec(FORECAST, _answer), ToolSpec(PLAIN, _answer)], response_mode="json")
    recorder = Recorder(server, respell)
    with serve(recorder) as url:
        yield url + "/mcp", recorder


def config(**changes: Any) -> NormalizerConfig:
    return dataclasses.replace(Settings(upstream="http://127.0.0.1:1/mcp").load_config(), **changes)


async def session(url: str, info: dict[str, str], calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The Python ``mcp`` client naming itself ``info``: its tools (as JSON) and each call's text."""
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import Implementation

    out: dict[str, Any] = {"calls": []}
    async with httpx2.AsyncClient(timeout=30) as http:
        transport = streamable_http_client(url, http_client=http)
        async with (
            transport as (read, write),
            ClientSession(read, write, client_info=Implementation(name=info["name"], version=info["version"])) as s,
        ):
            await s.initialize()
            listed = await s.list_tools()
            out["mcp_tools"] = listed.tools
            out["tools"] = {
                tool.name: tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in listed.tools
            }
            for call in calls:
                result = await s.call_tool(call["name"], call["arguments"])
                out["calls"].append(result.content[0].text)  # type: ignore[union-attr]
    return out


async def raw_listing(url: str, info: dict[str, str]) -> bytes:
    """The ``tools/list`` response body a client naming itself ``info`` gets, as bytes."""
    async with httpx.AsyncClient(timeout=30) as http:
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info}
        first = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        response = await http.post(url, content=orjson.dumps(first), headers=HEADERS)
        headers = {**HEADERS, "mcp-protocol-version": "2025-11-25"}
        if "mcp-session-id" in response.headers:
            headers["mcp-session-id"] = response.headers["mcp-session-id"]
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        return (await http.post(url, content=orjson.dumps(body), headers=headers)).content


CALLS: list[dict[str, Any]] = [
    {
        "name": "forecast.query",
        "arguments": {"days": "2", "metric": "true", "step": "1e-7", "levels": ["20", "30"], "note": "7"},
    },
    {"name": "forecast.query", "arguments": {"days": "3", "step": "1.5", "levels": ["-40"]}},
    {"name": "echo", "arguments": {"text": "2"}},
]


def assert_repaired(tool: dict[str, Any]) -> None:
    """The proxy's tool: every Gemini oracle passes, the originals are in ``_meta``."""
    for key in KEYS:
        assert CONSTRAINTS[key].violates(FORECAST), key  # the server's tool has every fault
        assert not CONSTRAINTS[key].violates(tool), (key, tool["inputSchema"])
    schema, kept = tool["inputSchema"], tool["_meta"][KEPT]
    assert "$schema" not in schema
    assert kept["/inputSchema/$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["properties"]["days"] == {
        "type": "string",
        "enum": ["1", "2", "7"],
        "description": "days ahead (integer, written as a string)",
    }
    assert schema["properties"]["step"]["enum"] == ["1.5", "1e-7", "12.5"]
    assert schema["properties"]["levels"]["items"]["enum"] == ["10", "20", "-40"]
    assert kept["/inputSchema/properties/days"] == FORECAST["inputSchema"]["properties"]["days"]
    assert kept["/inputSchema/properties/metric"]["enum"] == [True, False]
    assert schema["properties"]["unit"]["anyOf"][:2] == [{"enum": ["celsius"]}, {"enum": ["fahrenheit"]}]
    assert schema["properties"]["unit"]["anyOf"][2]["description"] == "No other properties"
    assert kept["/inputSchema/properties/unit"] == FORECAST["inputSchema"]["properties"]["unit"]
    items = schema["properties"]["stations"]["items"]
    assert items["required"] == ["id"] and "r\u00e9gion" in items["description"]
    assert kept["/inputSchema/properties/stations/items"]["required"] == ["id", "r\u00e9gion"]
    assert schema["properties"]["note"] == {"type": ["string", "null"]}  # (Gemini CLI handles it itself)
    assert tool["_meta"][ENUM_ARGUMENTS_KEY]["/days"] == ["1", "2", "7"]


def assert_round_trip(recorder: Recorder, texts: list[str]) -> None:
    """The strings that spell an enum value reached the upstream as that value, spelled as the
    server's listing spelled it; every other value as the client sent it."""
    first, second, plain = recorder.calls()[-3:]
    raw = first["raw"]
    for name, spelled in SPELLED.items():
        assert b'"' + name.encode() + b'":' + spelled in raw, raw
    assert first["message"]["params"]["arguments"] == {
        "days": 2,
        "metric": True,
        "step": 1e-7,
        "levels": [20, "30"],  # 30 is no value of the enum: as sent
        "note": "7",  # no enum there
    }
    assert second["message"]["params"]["arguments"] == {
        "days": "3",  # not a value of the enum
        "step": 1.5,
        "levels": [-40],
    }
    assert plain["message"]["params"]["arguments"] == {"text": "2"}
    assert json.loads(texts[0])["step"] == 1e-7


@pytest.mark.wire
@pytest.mark.anyio
async def test_gemini_cli_gets_every_key_repaired_and_its_strings_reach_the_upstream_as_the_values() -> None:
    with upstream() as (url, recorder), proxy_for(url) as px:
        got = await session(px + "/mcp", GEMINI, CALLS)
    assert_repaired(got["tools"]["forecast.query"])
    assert got["tools"]["echo"] == PLAIN  # nothing to repair: as listed
    assert_round_trip(recorder, got["calls"])


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_number_reaches_the_upstream_spelled_as_the_servers_enum_spells_it() -> None:
    """A server that writes ``1E-7`` (the scripted one writes ``1e-7``): the client is offered
    ``"1E-7"``, and the upstream receives ``1E-7``; ``"1e-7"``, no string of the listing, goes as sent."""
    calls = [
        {"name": "forecast.query", "arguments": {"days": "7", "step": "1E-7"}},
        {"name": "forecast.query", "arguments": {"days": "7", "step": "1e-7"}},
    ]
    with upstream({b"1e-7": b"1E-7"}) as (url, recorder), proxy_for(url) as px:
        got = await session(px + "/mcp", GEMINI, calls)
    step = got["tools"]["forecast.query"]["inputSchema"]["properties"]["step"]
    assert step["enum"] == ["1.5", "1E-7", "12.5"]
    assert got["tools"]["forecast.query"]["_meta"][ENUM_ARGUMENTS_KEY]["/step"] == ["1.5", "1E-7", "12.5"]
    spelled, unlisted = recorder.calls()[-2:]
    assert b'"step":1E-7' in spelled["raw"] and spelled["message"]["params"]["arguments"]["step"] == 1e-7
    assert unlisted["message"]["params"]["arguments"] == {"days": 7, "step": "1e-7"}


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_big_integer_enum_reaches_the_upstream_exact() -> None:
    big = {"name": "ledger.pick", "inputSchema": {"type": "object", "properties": {"id": {"enum": [-1, 2**80 + 7]}}}}
    recorder = Recorder(ScriptedServer([ToolSpec(big, _answer)], response_mode="sse"))
    with serve(recorder) as url, proxy_for(url + "/mcp") as px:
        got = await session(px + "/mcp", GEMINI, [{"name": "ledger.pick", "arguments": {"id": str(2**80 + 7)}}])
    assert got["tools"]["ledger.pick"]["inputSchema"]["properties"]["id"]["enum"] == ["-1", str(2**80 + 7)]
    (call,) = recorder.calls()
    assert call["message"]["params"]["arguments"] == {"id": 2**80 + 7}


@pytest.mark.wire
@pytest.mark.anyio
async def test_an_enum_with_null_and_strings_reaches_gemini_as_strings_and_the_server_as_its_values() -> None:
    """An enum of mixed types (``null``, strings, numbers, a value listed twice): each value has one
    spelling no string of the enum has, so the model is offered ``"null"``, ``"12.5"``, ``"29"`` and
    the strings, and a call's ``"null"`` reaches the server as ``null``, ``"12.5"`` as ``12.5``,
    ``"caf\u00e9"`` as it came, and a string of no value (``"nul"``) as it came. An enum where two
    values share a spelling (``"null"`` and ``null``) stays, and that tool alone is withheld."""
    mixed = {
        "name": "shelf.pick",
        "inputSchema": {
            "type": "object",
            "properties": {
                "mode": {"type": ["integer", "number", "string", "null"], "enum": [None, "caf\u00e9", 12.5, 29, 29]},
            },
        },
    }
    clash = {"name": "shelf.clash", "inputSchema": {"type": "object", "properties": {"v": {"enum": ["null", None]}}}}
    calls = [
        {"name": "shelf.pick", "arguments": {"mode": "null"}},
        {"name": "shelf.pick", "arguments": {"mode": "12.5"}},
        {"name": "shelf.pick", "arguments": {"mode": "caf\u00e9"}},
        {"name": "shelf.pick", "arguments": {"mode": "nul"}},
    ]
    recorder = Recorder(ScriptedServer([ToolSpec(mixed, _answer), ToolSpec(clash, _answer)], response_mode="sse"))
    with serve(recorder) as url, proxy_for(url + "/mcp") as px:
        got = await session(px + "/mcp", GEMINI, calls)
    tool = got["tools"]["shelf.pick"]
    mode = tool["inputSchema"]["properties"]["mode"]
    assert mode["enum"] == ["null", "caf\u00e9", "12.5", "29", "29"] and mode["type"] == ["string", "null"]
    assert tool["_meta"][ENUM_ARGUMENTS_KEY] == {"/mode": ["null", "12.5", "29"]}
    assert not JUDGES["gemini"].refused(tool) and JUDGES["gemini"].refused(mixed)
    assert "shelf.clash" not in got["tools"]  # withheld from Gemini CLI alone
    sent = [call["message"]["params"]["arguments"]["mode"] for call in recorder.calls()]
    assert sent == [None, 12.5, "caf\u00e9", "nul"]


@pytest.mark.wire
@pytest.mark.anyio
async def test_an_sdk_client_and_cursor_without_a_setting_get_the_servers_bytes() -> None:
    with upstream() as (url, recorder), proxy_for(url) as px:
        for info in (SDK, CURSOR, CLAUDE):
            direct = await raw_listing(url, info)
            through = await raw_listing(px + "/mcp", info)
            tools = {tool["name"]: tool for tool in json.loads(through)["result"]["tools"]}
            if info is CLAUDE:  # its own repairs, never Gemini's
                assert tools["forecast.query"]["inputSchema"]["properties"]["days"]["enum"] == [1, 2, 7]
                continue
            assert through == direct, info["name"]  # byte for byte
            assert tools["forecast.query"] == FORECAST
        got = await session(px + "/mcp", CURSOR, CALLS)
    assert got["tools"]["forecast.query"] == FORECAST
    assert recorder.calls()[-3]["message"]["params"]["arguments"] == CALLS[0]["arguments"]  # strings as sent


@pytest.mark.wire
@pytest.mark.anyio
async def test_the_per_client_setting_gives_cursor_the_gemini_repairs_and_no_one_else() -> None:
    with upstream() as (url, recorder), proxy_for(url, config(clients={"cursor-vscode": "gemini"})) as px:
        cursor = await session(px + "/mcp", CURSOR, CALLS)
        assert_round_trip(recorder, cursor["calls"])
        sdk = await session(px + "/mcp", SDK, CALLS[:1])
    assert_repaired(cursor["tools"]["forecast.query"])
    assert sdk["tools"]["forecast.query"] == FORECAST
    assert recorder.calls()[-1]["message"]["params"]["arguments"] == CALLS[0]["arguments"]


@pytest.mark.wire
@pytest.mark.anyio
async def test_the_global_setting_names_the_family_of_unknown_clients_never_of_a_host_that_names_its_own() -> None:
    with upstream() as (url, recorder), proxy_for(url, config(model_api="gemini")) as px:
        sdk = await session(px + "/mcp", SDK, CALLS)
        assert_round_trip(recorder, sdk["calls"])
        claude = json.loads(await raw_listing(px + "/mcp", CLAUDE))
    assert_repaired(sdk["tools"]["forecast.query"])
    tools = {tool["name"]: tool for tool in claude["result"]["tools"]}
    assert tools["forecast.query"]["inputSchema"]["properties"]["days"]["enum"] == [1, 2, 7]


@pytest.mark.wire
@pytest.mark.anyio
async def test_the_per_tool_setting_repairs_that_tool_for_every_client() -> None:
    tools = {"forecast.query": dataclasses.replace(config().tool("forecast.query"), model_api="gemini")}
    with upstream() as (url, recorder), proxy_for(url, config(tools=tools)) as px:
        sdk = await session(px + "/mcp", SDK, CALLS)
        assert_round_trip(recorder, sdk["calls"])
    assert_repaired(sdk["tools"]["forecast.query"])
    assert sdk["tools"]["echo"] == PLAIN


#: What FastMCP (imported by other test modules in the same run) warns when anything, here
#: google-genai's conversion, reads the SDK's ``Tool.inputSchema``: not the conversion's warning.
_FASTMCP_RENAME = r"Accessing `Tool\.inputSchema` is deprecated"


@pytest.mark.wire
@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore:Accessing `Tool.inputSchema` is deprecated")
async def test_google_genai_serializes_the_proxys_listing_clean_and_warns_on_the_servers() -> None:
    from google.genai import _mcp_utils

    with upstream() as (url, _), proxy_for(url) as px:
        direct = await session(url, GEMINI, [])
        through = await session(px + "/mcp", GEMINI, [])
    with pytest.raises(AttributeError):  # the arm's additionalProperties: false, read as a schema
        _mcp_utils.mcp_to_gemini_tools(direct["mcp_tools"])
    days = {"type": "object", "properties": {"days": FORECAST["inputSchema"]["properties"]["days"]}}
    enum_only = direct["mcp_tools"][0].model_copy(update={"input_schema": days})
    with pytest.warns(UserWarning, match="enum"):  # integers where the API's Schema.enum takes strings
        _mcp_utils.mcp_to_gemini_tools([enum_only])[0].model_dump(mode="json", exclude_none=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=_FASTMCP_RENAME)
        tools = _mcp_utils.mcp_to_gemini_tools(through["mcp_tools"])
        converted = [tool.model_dump(mode="json", exclude_none=True) for tool in tools]
    (declaration,) = converted[0]["function_declarations"]
    param = declaration["parameters"]["properties"]["days"]
    assert param["enum"] == ["1", "2", "7"] and param["type"] == "STRING"


@pytest.mark.pure
def test_the_settings_are_checked_and_resolved_in_order() -> None:
    with pytest.raises(ConfigError, match="model_api"):
        NormalizerConfig.from_mapping({"clients": {"Cursor": {"model_api": "palm"}}})
    with pytest.raises(ConfigError, match="model_api"):
        NormalizerConfig.from_mapping({"tools": {"t": {"model_api": 3}}})
    with pytest.raises(ConfigError, match="model_api"):
        rule_config(None, {"MCP_NORMALIZER_MODEL_API": "bard"})
    assert rule_config(None, {"MCP_NORMALIZER_MODEL_API": "gemini"}).model_api == "gemini"
    loaded = NormalizerConfig.from_mapping(
        {"normalizer": {"model_api": "openai"}, "clients": {"Cursor": {"model_api": "gemini"}}}
    )
    cursor = loaded.for_client(profile_for({"name": "Cursor"}))
    assert cursor.model_api == "gemini" and cursor.host_needs(ENUM_NON_STRING)
    assert loaded.for_client(profile_for({"name": "mcp"})).model_api == "openai"
    gemini = loaded.for_client(profile_for(GEMINI))
    assert gemini.model_api == "gemini" and gemini.host_needs(ENUM_NON_STRING)
    claude = loaded.for_client(profile_for(CLAUDE))
    assert claude.model_api == "anthropic" and not claude.host_needs(ENUM_NON_STRING)
    # a per-client name wins over the host's own family; the key tells the listings apart
    over = resolve_model_api(profile_for(CLAUDE), "", {"claude-code": "gemini"})
    assert over.host_needs(ENUM_NON_STRING) and over.key != profile_for(CLAUDE).key
    assert resolve_model_api(profile_for(SDK), "", {}) == profile_for(SDK)


@pytest.mark.pure
def test_spelling_and_converting_back_keep_every_other_byte() -> None:
    assert [spell(v) for v in (2, True, False, 1.5, 1e-7, 1e21, -0.25, 12345678901234567890123)] == [
        "2",
        "true",
        "false",
        "1.5",
        "1e-7",
        "1e+21",
        "-0.25",
        "12345678901234567890123",
    ]
    places = {"/n": ("1", "2"), "/rows/*/on": ("true",), "/caf\u00e9": ("1e-7",), "/x": ("not json",)}
    body = '{"n" : "2", "rows": [{"on": "true"}, {"on": "yes"}], "caf\u00e9": "1e-7", "x": "2"}'.encode()
    assert convert_arguments(body, places) == (
        '{"n":2,"rows":[{"on":true},{"on": "yes"}],"caf\u00e9":1e-7,"x":"2"}'.encode()  # the rest as written
    )
    assert convert_arguments(b'{"n": 2}', places) is None
    # a tool listed to another client: the places this rule would give its own enums
    assert enum_arguments(FORECAST) == {
        "/days": ("1", "2", "7"),
        "/metric": ("true", "false"),
        "/step": ("1.5", "1e-7", "12.5"),
        "/levels/*": ("10", "20", "-40"),
    }
    assert enum_arguments(PLAIN) is None


# -- parameter names the Gemini API refuses (property_key_gemini, rule host_schemas) ---------------

ORIGINAL_KEYS = "dev.mcp-normalizer/original-keys"
UNKNOWN = {"name": "field-agent", "version": "0.3.1"}
#: Names the Gemini API refuses (a dot, a leading hyphen, unicode, a leading digit) at the root, in a
#: nested object, in an item object and in an anyOf arm; ``note`` and ``rows`` are valid names.
KEYED: dict[str, Any] = {
    "name": "ledger.find",
    "description": "\u00c9critures (\u20ac 12.50)",
    "inputSchema": {
        "type": "object",
        "properties": {
            "page.size": {"type": "integer"},
            "-offset": {"type": "number"},
            "libell\u00e9": {"type": ["string", "null"]},
            "2fa": {"type": "boolean"},
            "filter": {
                "type": "object",
                "properties": {"min.ratio": {"type": "number"}, "max-amount": {"type": "integer"}},
                "required": ["min.ratio"],
            },
            "rows": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"unit-price": {"type": "number"}, "\u540d\u524d": {"type": ["string", "null"]}},
                    "required": ["unit-price"],
                },
            },
            "where": {"anyOf": [{"type": "object", "properties": {"a.b": {"type": "string"}}}, {"type": "null"}]},
            "note": {"type": "string"},
        },
        "required": ["page.size"],
    },
}
#: The call's arguments under the tool's own names: exponents, decimals, integers past 64 bits,
#: unicode and nulls at depth; ``note`` holds a string that is an own name (a value, never renamed).
OWN_ARGUMENTS: dict[str, Any] = {
    "page.size": 2**80 + 7,
    "-offset": 12.5,
    "libell\u00e9": None,
    "2fa": False,
    "filter": {"min.ratio": 1e-7, "max-amount": 123456789012345678901234},
    "rows": [{"unit-price": 12.5, "\u540d\u524d": "caf\u00e9 \u2615"}, {"unit-price": 1e-7, "\u540d\u524d": None}],
    "where": {"a.b": "\u00fcn\u00ef"},
    "note": "page.size",
}


def advertised(value: Any, names: dict[str, str]) -> Any:
    """``value`` (arguments under the own names) with every object member named as ``names``
    (own -> advertised) says: what a model sends that was shown the advertised names."""
    if isinstance(value, dict):
        return {names.get(k, k): advertised(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [advertised(v, names) for v in value]
    return value


def advertised_schema(schema: Any, names: dict[str, str]) -> Any:
    """``schema`` with the names of every ``properties`` and ``required`` renamed by ``names``."""
    if isinstance(schema, list):
        return [advertised_schema(v, names) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {names.get(k, k): advertised_schema(v, names) for k, v in value.items()}
        elif key == "required" and isinstance(value, list):
            out[key] = [names.get(k, k) for k in value]
        else:
            out[key] = advertised_schema(value, names)
    return out


def property_names(schema: Any) -> set[str]:
    """Every name under a ``properties`` of ``schema``, at any depth."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                found |= set(value)
            found |= property_names(value)
    elif isinstance(schema, list):
        for value in schema:
            found |= property_names(value)
    return found


@contextmanager
def keyed_upstream() -> Iterator[tuple[str, Recorder]]:
    server = ScriptedServer([ToolSpec(KEYED, _answer), ToolSpec(PLAIN, _answer)], response_mode="json")
    recorder = Recorder(server)
    with serve(recorder) as url:
        yield url + "/mcp", recorder


@pytest.mark.wire
@pytest.mark.anyio
async def test_gemini_cli_gets_parameter_names_it_takes_and_the_server_its_own_names_and_values() -> None:
    from .model_api_judges import GEMINI as GEMINI_JUDGE

    with keyed_upstream() as (url, recorder), proxy_for(url) as px:
        listed = await session(px + "/mcp", GEMINI, [])
        tool = listed["tools"]["ledger.find"]
        names = {own: new for new, own in tool["_meta"][ORIGINAL_KEYS].items()}
        sent = advertised(OWN_ARGUMENTS, names)
        called = await session(px + "/mcp", GEMINI, [{"name": "ledger.find", "arguments": sent}])
    key = CONSTRAINTS["property_key_gemini"]
    assert key.violates(KEYED) and GEMINI_JUDGE.refused(KEYED)  # the server's own tool: refused
    assert not key.violates(tool), tool["inputSchema"]  # every argument place's names, nested too
    assert not GEMINI_JUDGE.refused(tool), GEMINI_JUDGE.refused(tool)
    refused = {"page.size", "-offset", "libell\u00e9", "2fa", "min.ratio", "max-amount", "unit-price", "\u540d\u524d"}
    assert set(names) == refused | {"a.b"}  # the originals, in _meta
    assert not property_names(tool["inputSchema"]) & set(names)
    assert all(len(new) <= 64 and new[0] in "_abcdefghijklmnopqrstuvwxyz" for new in names.values()), names
    schema = tool["inputSchema"]
    assert schema["required"] == [names["page.size"]]
    assert schema["properties"]["rows"]["items"]["required"] == [names["unit-price"]]
    assert schema["properties"]["filter"]["required"] == [names["min.ratio"]]
    assert advertised_schema(KEYED["inputSchema"], names) == schema  # nothing else changed
    assert listed["tools"]["echo"] == PLAIN
    (call,) = [c for c in recorder.calls() if c["message"]["params"]["name"] == "ledger.find"]
    assert call["message"]["params"]["arguments"] == OWN_ARGUMENTS  # own names, exact values (the bytes read)
    assert json.loads(called["calls"][0])["rows"] == OWN_ARGUMENTS["rows"]  # the server's answer, to the client


@pytest.mark.wire
@pytest.mark.anyio
async def test_the_renamed_call_keeps_each_values_bytes_as_the_client_wrote_them() -> None:
    """A ``tools/call`` written by hand (``12.50``, ``1E-7``, a big integer, escapes): the upstream
    gets the own names around the very bytes the client sent; a member whose own name the same
    object also carries goes as it came."""
    with keyed_upstream() as (url, recorder), proxy_for(url) as px:
        tool = json.loads(await raw_listing(px + "/mcp", GEMINI))["result"]["tools"][0]
        names = {own: new for new, own in tool["_meta"][ORIGINAL_KEYS].items()}
        page, ratio, amount, price, name = (
            names[k] for k in ("page.size", "min.ratio", "max-amount", "unit-price", "\u540d\u524d")
        )
        arguments = (
            f'{{"{page}": 1208925819614629174706183, "filter": {{"{ratio}" : 1E-7, "max-amount": 12.50,'
            f' "{amount}": 3}}, "rows": [{{"{price}": 12.50, "{name}": "caf\\u00e9"}}], "note": null}}'
        )
        body = '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ledger.find","arguments":%s}}'
        async with httpx.AsyncClient(timeout=30) as http:
            params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": GEMINI}
            first = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
            response = await http.post(px + "/mcp", content=orjson.dumps(first), headers=HEADERS)
            headers = {**HEADERS, "mcp-protocol-version": "2025-11-25"}
            if "mcp-session-id" in response.headers:
                headers["mcp-session-id"] = response.headers["mcp-session-id"]
            listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            await http.post(px + "/mcp", content=orjson.dumps(listing), headers=headers)
            await http.post(px + "/mcp", content=(body % arguments).encode(), headers=headers)
    raw = recorder.calls()[-1]["raw"]
    assert b'"page.size":1208925819614629174706183' in raw, raw
    assert b'"min.ratio":1E-7' in raw and b'"max-amount":12.50' in raw, raw
    assert b'"unit-price":12.50' in raw and '"\u540d\u524d":"caf\\u00e9"'.encode() in raw, raw
    assert f'"{names["max-amount"]}":3'.encode() in raw  # its own name is in the same object: as sent
    assert b'"note":null' in raw


@pytest.mark.wire
@pytest.mark.anyio
async def test_an_sdk_and_an_unknown_client_get_the_servers_names_and_send_theirs_as_they_are() -> None:
    with keyed_upstream() as (url, recorder), proxy_for(url) as px:
        for info in (SDK, UNKNOWN):
            assert await raw_listing(px + "/mcp", info) == await raw_listing(url, info), info["name"]
            got = await session(px + "/mcp", info, [{"name": "ledger.find", "arguments": OWN_ARGUMENTS}])
            assert got["tools"]["ledger.find"] == KEYED
            assert recorder.calls()[-1]["message"]["params"]["arguments"] == OWN_ARGUMENTS
        claude = json.loads(await raw_listing(px + "/mcp", CLAUDE))["result"]["tools"][0]
    # the Anthropic API takes dots, hyphens and leading digits, and judges the root alone
    assert set(claude["_meta"][ORIGINAL_KEYS].values()) == {"libell\u00e9"}
    assert claude["inputSchema"]["properties"]["filter"] == KEYED["inputSchema"]["properties"]["filter"]


# -- enum inside anyOf/oneOf arms (enum_non_string, rule gemini_schemas) -----------------------------

#: Numeric and boolean enums in ``anyOf``/``oneOf`` arms whose strings no other arm takes (a const
#: arm too, and an arm's nested object), and an arm whose enum contradicts its type.
ARMED: dict[str, Any] = {
    "name": "grid.pick",
    "inputSchema": {
        "type": "object",
        "properties": {
            "level": {"anyOf": [{"type": "integer", "enum": [1, 2, 12345678901234567890123]}, {"type": "null"}]},
            "ratio": {"anyOf": [{"const": 12.5}, {"const": 1e-7}, {"type": "string", "enum": ["auto"]}]},
            "item": {
                "anyOf": [
                    {"type": "object", "properties": {"kind": {"type": "integer", "enum": [3, 4]}}},
                    {"type": "array", "items": {"type": "string"}},
                ]
            },
            "flag": {"oneOf": [{"type": "boolean", "enum": [True]}, {"type": "integer", "minimum": 0}]},
            "unit": {"anyOf": [{"type": "string", "enum": [1, 2]}, {"type": "null"}]},
        },
    },
}
#: An arm's numbers beside an arm that takes any string: a ``"12.5"`` from the model could be
#: either, so no call could be converted back: not repaired, withheld from Gemini CLI.
AMBIGUOUS: dict[str, Any] = {
    "name": "grid.step",
    "inputSchema": {
        "type": "object",
        "properties": {"step": {"anyOf": [{"type": "number", "enum": [12.5, 1e-7]}, {"type": "string"}]}},
    },
}
ARM_CALLS: list[dict[str, Any]] = [
    {
        "name": "grid.pick",
        "arguments": {
            "level": "12345678901234567890123",
            "ratio": "1e-7",
            "item": {"kind": "3"},
            "flag": "true",
            "unit": "caf\u00e9",
        },
    },
    {"name": "grid.pick", "arguments": {"level": None, "ratio": "auto", "item": ["3", "\u00e9"], "flag": 7}},
    {"name": "grid.pick", "arguments": {"level": "2", "ratio": "12.5", "item": {"kind": "5"}}},
    {"name": "grid.step", "arguments": {"step": "12.5"}},
]


@contextmanager
def armed_upstream() -> Iterator[tuple[str, Recorder]]:
    server = ScriptedServer([ToolSpec(ARMED, _answer), ToolSpec(AMBIGUOUS, _answer)], response_mode="json")
    recorder = Recorder(server)
    with serve(recorder) as url:
        yield url + "/mcp", recorder


@pytest.mark.wire
@pytest.mark.anyio
async def test_an_enum_in_an_arm_reaches_gemini_as_strings_and_the_server_as_its_values() -> None:
    from .model_api_judges import GEMINI as GEMINI_JUDGE

    with armed_upstream() as (url, recorder), proxy_for(url) as px:
        got = await session(px + "/mcp", GEMINI, ARM_CALLS)
        sdk = await session(px + "/mcp", SDK, ARM_CALLS[:1])
        assert await raw_listing(px + "/mcp", SDK) == await raw_listing(url, SDK)
    tool = got["tools"]["grid.pick"]
    assert CONSTRAINTS[ENUM_NON_STRING].violates(ARMED) and GEMINI_JUDGE.refused(ARMED)
    assert not CONSTRAINTS[ENUM_NON_STRING].violates(tool) and not GEMINI_JUDGE.refused(tool), tool
    properties = tool["inputSchema"]["properties"]
    assert properties["level"]["anyOf"][0]["enum"] == ["1", "2", "12345678901234567890123"]
    assert [arm["enum"] for arm in properties["ratio"]["anyOf"]] == [["12.5"], ["1e-7"], ["auto"]]
    assert properties["item"]["anyOf"][0]["properties"]["kind"]["enum"] == ["3", "4"]
    assert properties["flag"]["oneOf"][0] == {"type": "string", "enum": ["true"], "description": ANY_DESCRIPTION}
    assert "enum" not in properties["unit"]["anyOf"][0]  # no value of its type: in the description (every host)
    kept = tool["_meta"][KEPT]
    assert kept["/inputSchema/properties/level/anyOf/0"] == ARMED["inputSchema"]["properties"]["level"]["anyOf"][0]
    assert kept["/inputSchema/properties/ratio"] == ARMED["inputSchema"]["properties"]["ratio"]
    assert tool["_meta"][ENUM_ARGUMENTS_KEY] == {
        "/level": ["1", "2", "12345678901234567890123"],
        "/ratio": ["12.5", "1e-7"],
        "/item/kind": ["3", "4"],
        "/flag": ["true"],
    }
    assert "grid.step" not in got["tools"]  # withheld from Gemini CLI alone
    assert sdk["tools"] == {"grid.pick": ARMED, "grid.step": AMBIGUOUS}
    *calls, sdk_call = recorder.calls()
    first, second, third, step = (call["message"]["params"]["arguments"] for call in calls)
    assert first == {
        "level": 12345678901234567890123,
        "ratio": 1e-7,
        "item": {"kind": 3},
        "flag": True,
        "unit": "caf\u00e9",  # no enum left there: as sent
    }
    assert b'"ratio":1e-7' in calls[0]["raw"]  # spelled as the server's listing spells it
    # the strings that spell no value of the converted arm, and another arm's values, as sent
    assert second == {"level": None, "ratio": "auto", "item": ["3", "\u00e9"], "flag": 7}
    assert third == {"level": 2, "ratio": 12.5, "item": {"kind": "5"}}
    assert step == {"step": "12.5"}  # the withheld tool's call: as it came
    assert sdk_call["message"]["params"]["arguments"] == ARM_CALLS[0]["arguments"]


ANY_DESCRIPTION = "Boolean, written as a string"


@pytest.mark.pure
def test_an_arm_is_converted_only_where_no_other_arm_may_take_its_strings() -> None:
    """The listing-time decision, arm by arm (``may_take`` reads the arms as the server wrote them:
    ``False`` only where the other arm surely refuses the string)."""
    assert not may_take({"type": "null"}, [], "1")
    assert not may_take({"type": "string", "enum": ["auto"]}, [], "12.5")
    assert may_take({"type": "string", "enum": ["auto", "12.5"]}, [], "12.5")
    assert may_take({"type": "string", "maxLength": 2}, [], "12.5")  # (lengths not read: may)
    assert may_take({"$ref": "#/$defs/Any"}, [], "1")
    assert not may_take({"type": "array", "items": {"type": "string"}}, ["properties", "kind"], "3")
    assert may_take({"type": "object"}, ["properties", "kind"], "3")  # (any member)
    assert not may_take({"type": "object", "additionalProperties": False}, ["properties", "kind"], "3")
    assert not may_take({"anyOf": [{"type": "integer"}, {"const": "x"}]}, [], "1")
    assert may_take({"anyOf": [{"type": "integer"}, {"type": ["string", "null"]}]}, [], "1")
    spelled = {
        "name": "t",
        "inputSchema": {
            "type": "object",
            "properties": {
                "a": {"oneOf": [{"enum": [1, 2]}, {"enum": ["2"]}]},  # "2" in both: neither converted
                "b": {"anyOf": [{"enum": [1]}, {"enum": [1, True]}]},  # the same value in two arms: both
            },
        },
    }
    assert enum_arguments(spelled) == {"/b": ("1", "true")}
    assert enum_arguments(AMBIGUOUS) is None
