"""The kinds every model API family refuses (issue 39, item 2; ``cases/faults.md`` "Kinds from the
autumn-2026 reports"): an object schema without ``properties``, a draft-07 tuple ``items: [A, B]``,
an ``anyOf`` arm nothing matches, an ``enum`` no value of the node's ``type`` can meet, an image
whose ``mimeType`` is not what its bytes are.

``hosts.toml`` puts them under ``[every_family]``: every host profile gets their repairs (those whose
model the user chooses, VS Code and Cursor, too), no other client does. On the wire, per kind: a
scripted upstream lists a tool with the kind beside a healthy one, the proxy in front, the Python
``mcp`` client sends each host's ``clientInfo`` and gets the repaired tool, which the kind's oracle
(``host_faults``, written from the model APIs' rules) passes, the nodes replaced kept in ``_meta``
(put back, they give the server's tool); the healthy tool and every SDK client get the server's
tool as sent. Then the arguments of a tuple reach the upstream byte for byte, and google-genai's
own MCP converter reads the proxy's listing where it failed on the server's.
"""

from __future__ import annotations

import base64
import copy
import json
import struct
import zlib
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft7Validator, Draft202012Validator

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.demo.clients import run_python
from mcp_normalizer.demo.upstream import ScriptedServer, ToolCall, ToolSpec, returning
from mcp_normalizer.engine.normalize import Normalizer
from mcp_normalizer.engine.rules import RULES_BY_NAME, ToolContext
from mcp_normalizer.engine.rules.clients import profile_for
from mcp_normalizer.engine.rules.host_faults import (
    CONSTRAINTS,
    ENUM_TYPE,
    IMAGE_MIME,
    IMAGE_UNDECODABLE,
    LEGACY_TUPLE,
    NEVER_BRANCH,
    OBJECT_PROPERTIES,
)
from mcp_normalizer.engine.rules.host_profiles import EVERY_FAMILY, HOSTS, load
from mcp_normalizer.engine.rules.scan import ToolScan
from mcp_normalizer.errors import ConfigError
from mcp_normalizer.wire.jsoncodec import Raw

from .support import HEADERS, PROPERTY, proxy_for, read_body, replay_body, serve
from .test_tool_gates import RulesAlways, _decoded, _same_listed, _text

ERA = "2025-11-25"
KEPT = "dev.mcp-normalizer/original-keywords"
MIME_KEPT = "dev.mcp-normalizer/original-mime-type"
ORIGINAL_BLOCK = "dev.mcp-normalizer/original-block"
ENUM_ARGUMENTS = "dev.mcp-normalizer/enum-arguments"
ORIGINAL_KEYS = "dev.mcp-normalizer/original-keys"
#: A host of each kind of model API, by the clientInfo.name it sends (hosts.toml client_names).
HOST_CLIENTS = ("claude-code", "gemini-cli-mcp-client", "codex-mcp-client", "Visual Studio Code", "cursor-vscode")
SCHEMA_KINDS = (OBJECT_PROPERTIES, LEGACY_TUPLE, NEVER_BRANCH, ENUM_TYPE)

#: A tool none of these kinds touches: every client gets it as the server lists it.
HEALTHY: dict[str, Any] = {
    "name": "quote_price",
    "description": "prix \u20ac, 12.50 \u2192 12.5",
    "inputSchema": {
        "type": "object",
        "properties": {
            "amount": {"type": "number", "minimum": 0.01, "maximum": 1e300},
            "name": {"type": ["string", "null"], "maxLength": 64},
            "lines": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"\u540d\u524d": {"type": "string"}},
                },  # (nested: no Claude rename)
            },
            "mode": {"type": "string", "enum": ["net", "gross", "\u00e9t\u00e9"]},
        },
        "required": ["amount"],
    },
}

#: Per kind: a tool with the kind at the root's properties and deeper.
FAULTY: dict[str, dict[str, Any]] = {
    OBJECT_PROPERTIES: {
        "name": "query_rows",
        "inputSchema": {
            "type": "object",
            "properties": {
                "where": {"type": "object", "description": 'any JSON object, e.g. {"prix": 12.50}'},
                "page": {
                    "type": "object",
                    "properties": {
                        "cursor": {"type": ["object", "null"], "additionalProperties": {"type": "number"}},
                        "limit": {"type": "integer", "maximum": 123456789012345678901234},
                        "\u30bf\u30b0": {
                            "type": "array",
                            "items": {"type": "object", "patternProperties": {"^x-": {}}},
                        },
                    },
                },
            },
        },
    },
    LEGACY_TUPLE: {
        "name": "move_to",
        "inputSchema": {
            "type": "object",
            "properties": {
                "to": {
                    "type": "array",
                    "items": [{"type": "number"}, {"type": "string", "maxLength": 8}],
                    "additionalItems": False,
                },
                "path": {
                    "type": "array",
                    "items": {
                        "type": "array",
                        "items": [{"type": "number"}, {"type": "number"}],
                        "additionalItems": {"type": "null"},
                    },
                },
                "open": {"type": "array", "items": [{"type": "string"}]},
            },
            "required": ["to"],
        },
    },
    NEVER_BRANCH: {
        "name": "greet",
        "inputSchema": {
            "type": "object",
            "properties": {
                "who": {"description": "\u540d\u524d", "anyOf": [{"not": {}}, {"type": "string", "minLength": 1}]},
                "opts": {
                    "type": "object",
                    "properties": {
                        "tone": {
                            "anyOf": [{"not": {}}, {"type": "string", "enum": ["warm", "cool"]}, {"type": "null"}]
                        },
                        "weight": {"anyOf": [{"type": "number", "multipleOf": 0.5}, {"not": {}}]},
                    },
                },
            },
        },
    },
    ENUM_TYPE: {
        "name": "paint",
        "inputSchema": {
            "type": "object",
            "properties": {
                "colours": {"type": "array", "items": {"type": "string"}, "enum": ["red", "gr\u00fcn", "\u9752"]},
                "shade": {
                    "anyOf": [
                        {"type": "number", "minimum": 0.5},
                        {"type": "null", "enum": [12.5, "\u00fc"], "description": "none"},
                    ]
                },
                "deep": {
                    "type": "object",
                    "properties": {
                        "sizes": {
                            "type": "array",
                            "items": {"type": "number"},
                            "enum": [1e-7, 2, 123456789012345678901234],
                        }
                    },
                },
            },
        },
    },
}

#: Values a model might send, to compare what the schemas accept.
SAMPLES: list[Any] = [
    {},
    {"where": {"prix": 12.50, "\u00e9t\u00e9": [None]}},
    {"where": "x"},
    {"page": {"cursor": None, "limit": 3}},
    {"page": {"cursor": {"a": 1e-7}}},
    {"page": {"cursor": {"a": "b"}}},
    {"page": {"\u30bf\u30b0": [{"x-a": 1}, {}]}},
    {"page": {"\u30bf\u30b0": [1]}},
    {"to": [12.5, "caf\u00e9"]},
    {"to": [12.5, "caf\u00e9", 3]},
    {"to": ["x"]},
    {"to": [1e-7, "much too long"]},
    {"to": []},
    {"path": [[1, 2], [1, 2, None], [1.5e300, -0.0, None, None]]},
    {"path": [[1, 2, 3]]},
    {"open": ["a", 1, None]},
    {"open": [1]},
    {"who": "ann"},
    {"who": ""},
    {"who": 5},
    {"opts": {"tone": "warm"}},
    {"opts": {"tone": None}},
    {"opts": {"tone": "hot"}},
    {"opts": {"weight": 2.5}},
    {"opts": {"weight": 2.25}},
    {"opts": {"weight": None}},
]


class Recording:
    """An upstream that keeps every request body as received (bytes)."""

    def __init__(self, app: ScriptedServer) -> None:
        self.app = app
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            body = await read_body(receive)
            self.bodies.append(body)
            receive = replay_body(body, receive)
        await self.app(scope, receive, send)


async def listing(url: str, client: str | None) -> list[dict[str, Any]]:
    """The tools the Python ``mcp`` client lists through ``url``, naming itself ``client``."""
    record = await run_python(url, [{"op": "listTools"}], client_name=client)
    (step,) = record["steps"]
    assert step["ok"], step
    tools: list[dict[str, Any]] = step["value"]["tools"]
    return tools


def put_back(tool: dict[str, Any]) -> dict[str, Any]:
    """``tool`` with every node kept under ``_meta[KEPT]`` put back where it was, outermost first,
    and that ``_meta`` entry gone (its ``_meta`` too when nothing else is in it); so is the map of
    enum arguments a Gemini client's calls are converted back by (rule ``gemini_schemas``: derived
    from the originals, not one of them)."""
    out = copy.deepcopy(tool)
    kept = out["_meta"].pop(KEPT, {})
    out["_meta"].pop(ENUM_ARGUMENTS, None)
    names = out["_meta"].pop(ORIGINAL_KEYS, {})  # (advertised -> own: read back last)
    if not out["_meta"]:
        del out["_meta"]
    for pointer in sorted(kept, key=lambda p: p.count("/")):
        steps = [s.replace("~1", "/").replace("~0", "~") for s in pointer.split("/")[1:]]
        node = out
        try:
            for name in steps[:-1]:
                node = node[int(name) if isinstance(node, list) else name]
        except (KeyError, IndexError):
            continue  # inside a node put back whole already
        node[int(steps[-1]) if isinstance(node, list) else steps[-1]] = kept[pointer]
    return own_names(out, names) if names else out


def own_names(schema: Any, names: dict[str, str]) -> Any:
    """``schema`` with every ``properties`` name and ``required`` entry ``names`` holds (advertised
    -> own) written as its own name again."""
    if isinstance(schema, list):
        return [own_names(v, names) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {names.get(k, k): own_names(v, names) for k, v in value.items()}
        elif key == "required" and isinstance(value, list):
            out[key] = [names.get(k, k) if isinstance(k, str) else k for k in value]
        else:
            out[key] = own_names(value, names)
    return out


def by_name(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {tool["name"]: tool for tool in tools}


@pytest.mark.pure
def test_every_host_gets_the_every_family_keys_and_no_other_client_does() -> None:
    assert EVERY_FAMILY is not None
    every = set(EVERY_FAMILY.refuses)
    assert every == {OBJECT_PROPERTIES, LEGACY_TUPLE, NEVER_BRANCH, ENUM_TYPE, IMAGE_MIME}
    for host in HOSTS:  # user-chosen ones (VS Code, Cursor) too
        for name in host.client_names:
            assert every <= profile_for({"name": name, "version": "99.0.0"}).host_faults, host.profile
    for other in ("mcp", "conformance-test-client", "claude-code-fork", ""):
        assert not profile_for({"name": other}).host_faults
    assert not profile_for(None).host_faults
    assert {CONSTRAINTS[key].rule for key in every} == {"model_schemas", "host_content"}
    assert not any(CONSTRAINTS[key].changes_arguments for key in every)  # nothing the model sends changes


def _table(**every: Any) -> dict[str, Any]:
    host = {
        "title": "H",
        "client_names": ["h"],
        "source": "log",
        "model_api": "user-chosen",
        "reads": "content",
        "reads_source": "run",
    }
    return {"model_api": {"a": {"title": "A", "source": "docs"}}, "host": {"h": host}, **every}


@pytest.mark.pure
@pytest.mark.parametrize(
    ("every", "says"),
    [
        ({"title": "E", "source": "s", "refuses": {"objects": "x"}}, "every_family refuses: unknown constraint key"),
        ({"title": "E", "source": "s", "refuses": {}}, "every_family: refuses must name at least one"),
        ({"title": "E", "refuses": {OBJECT_PROPERTIES: "x"}}, "every_family: source must be a non-empty string"),
        ({"title": "E", "source": "s", "refuses": {OBJECT_PROPERTIES: ""}}, "the source must be a non-empty"),
        ({"title": "E", "source": "s", "refuses": {OBJECT_PROPERTIES: "x"}, "hosts": []}, "unknown key 'hosts'"),
    ],
)
def test_the_every_family_table_is_validated_at_load(every: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError) as error:
        load(_table(every_family=every), "t")
    assert says in str(error.value)
    data = _table(every_family={"title": "E", "source": "s", "refuses": {OBJECT_PROPERTIES: "x"}})
    data["model_api"]["every_family"] = {"title": "X", "source": "s"}
    with pytest.raises(ConfigError, match="that name is the"):
        load(data, "t")
    loaded = load(_table(every_family={"title": "E", "source": "s", "refuses": {OBJECT_PROPERTIES: "x"}}), "t")
    assert loaded.hosts[0].faults == {OBJECT_PROPERTIES: "x"}  # a user-chosen host gets them


@pytest.mark.wire
@pytest.mark.anyio
@pytest.mark.parametrize("key", SCHEMA_KINDS)
async def test_each_host_gets_a_schema_its_model_api_takes_the_original_in_meta_and_sdk_clients_the_bytes(
    key: str,
) -> None:
    oracle = CONSTRAINTS[key].violates
    faulty = FAULTY[key]
    assert oracle(faulty) and not oracle(HEALTHY)  # the oracle bites, and only there
    upstream = ScriptedServer(
        [ToolSpec(faulty, returning({"content": []})), ToolSpec(HEALTHY, returning({"content": []}))]
    )
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        hosts = {client: by_name(await listing(url, client)) for client in HOST_CLIENTS}
        sdk = await listing(url, None)  # the Python SDK's own clientInfo ("mcp")
        direct = await listing(up + "/mcp", "claude-code")
        async with httpx.AsyncClient(timeout=30) as http:
            raw_direct = await raw_listing(http, up + "/mcp", "mcp")
            raw_proxied = await raw_listing(http, url, "mcp")
    assert sdk == direct == [faulty, HEALTHY]
    assert orjson.loads(raw_direct) == orjson.loads(raw_proxied)  # an SDK client: the server's listing
    assert raw_proxied == raw_direct, (raw_direct, raw_proxied)  # and its bytes
    for client, tools in hosts.items():
        healthy = tools[HEALTHY["name"]]  # (Gemini: its nested unicode name renamed, kept in _meta)
        assert (healthy if "_meta" not in healthy else put_back(healthy)) == HEALTHY, client
        tool = tools[faulty["name"]]
        assert not oracle(tool), (client, tool)
        assert put_back(tool) == faulty, client  # lossless: the originals put back give the server's tool
        Draft202012Validator.check_schema(tool["inputSchema"])  # 2020-12, as the model APIs read it
        assert {k: v for k, v in tool.items() if k not in ("inputSchema", "_meta")} == {
            k: v for k, v in faulty.items() if k != "inputSchema"
        }
    same = hosts["claude-code"][faulty["name"]]
    # every family: one repair (Gemini CLI's own keys aside: a numeric enum offered as strings,
    # parameter names it refuses renamed)
    gemini_meta = hosts["gemini-cli-mcp-client"][faulty["name"]].get("_meta", {})
    gemini_own = ENUM_ARGUMENTS in gemini_meta or ORIGINAL_KEYS in gemini_meta
    assert all(
        tools[faulty["name"]] == same for client, tools in hosts.items() if not (gemini_own and "gemini" in client)
    )
    check_meaning(key, faulty["inputSchema"], same["inputSchema"])


def check_meaning(key: str, before: dict[str, Any], after: dict[str, Any]) -> None:
    """What the repaired schema accepts, against the server's as its author meant it."""
    if key == ENUM_TYPE:
        colours = after["properties"]["colours"]
        assert "enum" not in colours and colours["items"]["enum"] == ["red", "gr\u00fcn", "\u9752"]
        assert Draft202012Validator(after).is_valid({"colours": ["gr\u00fcn", "\u9752"]})
        assert not Draft202012Validator(after).is_valid({"colours": ["blue"]})
        assert not Draft202012Validator(before).is_valid({"colours": ["red"]})  # before: no value at all
        null_arm = after["properties"]["shade"]["anyOf"][1]
        assert null_arm == {"type": "null", "description": 'none (one of: [12.5,"\u00fc"])'}
        sizes = after["properties"]["deep"]["properties"]["sizes"]
        assert sizes == {"type": "array", "items": {"type": "number", "enum": [1e-7, 2, 123456789012345678901234]}}
        return
    # the same values, as 2020-12 reads the repair and as the author's dialect read the original
    meant = Draft7Validator(before) if key == LEGACY_TUPLE else Draft202012Validator(before)
    for validator in (Draft202012Validator(after), Draft7Validator(after)):
        if validator.__class__ is Draft7Validator and key == LEGACY_TUPLE:
            # a draft-07 reader (VS Code's Ajv) ignores prefixItems: it takes at least what was valid
            assert all(validator.is_valid(s) for s in SAMPLES if meant.is_valid(s))
            continue
        assert [validator.is_valid(s) for s in SAMPLES] == [meant.is_valid(s) for s in SAMPLES], validator


async def raw_listing(http: httpx.AsyncClient, url: str, client: str) -> bytes:
    """The ``result`` bytes of a ``tools/list`` answer to a session naming itself ``client``."""
    session = await session_as(http, url, client)
    body = b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}'
    response = await http.post(url, content=body, headers={**HEADERS, **session})
    text = response.content
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = [line[5:].strip() for line in text.splitlines() if line.startswith(b"data:")][-1]
    start = text.index(b'"result":') + len(b'"result":')
    return text[start : text.rindex(b"}")]


async def session_as(http: httpx.AsyncClient, url: str, client: str) -> dict[str, str]:
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": client, "version": "1.2.0"}}
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    response = await http.post(url, content=orjson.dumps(body), headers=HEADERS)
    session = {"mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    await http.post(url, content=note, headers={**HEADERS, **session})
    return session


#: A tuple call's arguments as a model's host might spell them: a decimal with a trailing zero, an
#: exponent, an escaped and a raw non-ASCII character, a negative zero, a 78-bit integer.
TUPLE_ARGUMENTS = (
    b'{"to":[12.50,"caf\\u00e9"],"path":[[1e-7,-0.0],[123456789012345678901234,2.5E3,null]],'
    b'"open":["\xe5\x90\x8d",{"deep":[null,{"x":1.10}]}]}'
)


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_tuple_call_reaches_the_upstream_byte_for_byte_from_every_host() -> None:
    seen: list[dict[str, Any]] = []

    async def echo(call: ToolCall) -> dict[str, Any]:
        seen.append(call.arguments)
        return {"content": [{"type": "text", "text": "moved"}]}

    upstream = Recording(ScriptedServer([ToolSpec(FAULTY[LEGACY_TUPLE], echo), ToolSpec(HEALTHY, echo)]))
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            for client in HOST_CLIENTS:
                session = await session_as(http, url, client)
                listed = await http.post(
                    url, content=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', headers={**HEADERS, **session}
                )
                assert b"prefixItems" in listed.content, client  # the host was listed the repaired tool
                call = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"move_to","arguments":'
                answer = await http.post(url, content=call + TUPLE_ARGUMENTS + b"}}", headers={**HEADERS, **session})
                assert b"moved" in answer.content, (client, answer.content)
        calls = [body for body in upstream.bodies if b'"tools/call"' in body]
        assert len(calls) == len(HOST_CLIENTS)
        assert all(TUPLE_ARGUMENTS in body for body in calls), calls  # byte for byte
        # and through the Python client, the values it sends arrive as sent
        arguments = {"to": [12.5, "caf\u00e9"], "path": [[1e-7, 2**78, None]], "open": [{"\u540d": [None, 1.1]}]}
        steps: list[dict[str, Any]] = [
            {"op": "listTools"},
            {"op": "callTool", "name": "move_to", "arguments": arguments},
        ]
        record = await run_python(url, steps, client_name="codex-mcp-client")
    assert all(step["ok"] for step in record["steps"]), record
    assert seen[-1] == arguments


def png(width: int, height: int) -> bytes:
    """A real PNG (8-bit RGB, one row of red/green pixels per line)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00\x00\xff\x00" * (width // 2) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


GIF = (  # a 1x1 GIF
    b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,"
    b"\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
)
WEBP = base64.b64decode("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==")  # a 1x1 lossless WebP
JPEG = (  # a JPEG's header: JFIF, a quantisation table, the frame header (SOF0: 1x1, one component)
    b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x01\x00H\x00H\x00\x00\xff\xdb\x00C\x00"
    + bytes(64)
    + b"\xff\xc0\x00\x0b\x08\x00\x01\x00\x01\x01\x01\x11\x00\xff\xd9"
)


def image(data: bytes, mime: str, **extra: Any) -> dict[str, Any]:
    return {"type": "image", "data": base64.b64encode(data).decode(), "mimeType": mime, **extra}


IMAGES: dict[str, Any] = {
    "content": [
        {"type": "text", "text": "four images: 12.50 \u20ac, caf\u00e9"},
        image(png(4, 2), "image/webp", annotations={"priority": 0.5}),  # a PNG said to be WebP
        image(JPEG, "image/png", _meta={"io.example/id": "\u540d"}),  # a JPEG said to be PNG
        image(GIF, "IMAGE/GIF"),  # said right (any case)
        image(WEBP, "image/jpeg; q=0.9"),  # a WebP said to be JPEG
        # no known signature: not judged (for Claude Code and Codex, which cannot decode it, a text naming
        # it: image_undecodable)
        image(b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/png"),
    ],
    "structuredContent": {"count": 4, "sizes": [12.5, 1e-7, 123456789012345678901234, None]},
}


@pytest.mark.wire
@pytest.mark.anyio
async def test_each_host_gets_images_typed_as_their_bytes_the_declared_type_kept_and_sdk_clients_the_bytes() -> None:
    oracle = CONSTRAINTS[IMAGE_MIME].violates
    assert [oracle(block) for block in IMAGES["content"]] == [False, True, True, False, True, False]
    tool = {"name": "render", "inputSchema": {"type": "object", "properties": {}}}
    upstream = ScriptedServer([ToolSpec(tool, returning(IMAGES)), ToolSpec(HEALTHY, returning(IMAGES))])
    steps: list[dict[str, Any]] = [{"op": "listTools"}, {"op": "callTool", "name": "render", "arguments": {}}]
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        hosts = {client: await run_python(url, steps, client_name=client) for client in HOST_CLIENTS}
        sdk = await run_python(url, steps)
        direct = await run_python(up + "/mcp", steps, client_name="claude-code")
    assert sdk["steps"][1]["value"] == direct["steps"][1]["value"]
    assert sdk["steps"][1]["value"]["content"] == IMAGES["content"]  # the blocks as the server sent them
    for client, record in hosts.items():
        result = record["steps"][1]["value"]
        blocks, added = result["content"][:6], result["content"][6:]
        # (a host whose model reads only content also gets the structuredContent its text does not
        # carry, as one more text block: rule text_mirror)
        # (and Claude Code, whose model reads structuredContent with JSON.parse, the number past 2**53
        # named exactly, in an embedded resource: text_mirror)
        exact = [b for b in added if b["type"] == "resource"]
        assert [b["resource"]["text"][-32:] for b in exact] == (
            ['{"/sizes/2":123456789012345678901234}'[-32:]] if client == "claude-code" else []
        ), (client, added)
        added = [b for b in added if b not in exact]
        assert all(block["type"] == "text" for block in added) and len(added) <= 1, (client, added)
        assert not any(oracle(block) for block in blocks), (client, blocks)
        profile = profile_for({"name": client})
        if profile.host_needs(IMAGE_UNDECODABLE):  # the last: text naming it, the block kept whole
            named = blocks[5]  # (an embedded text resource beside structuredContent for Claude Code)
            kind = "resource" if profile.drops_text_beside_structured else "text"
            text = named["resource"]["text"] if kind == "resource" else named["text"]
            assert named["type"] == kind and named["_meta"][ORIGINAL_BLOCK] == IMAGES["content"][5], named
            assert "data:image/png;base64," + IMAGES["content"][5]["data"] in text, named
            blocks = [*blocks[:5], IMAGES["content"][5]]
        assert [block.get("mimeType") for block in blocks[1:]] == [
            "image/png",
            "image/jpeg",
            "IMAGE/GIF",
            "image/webp",
            "image/png",
        ]
        assert [block.get("_meta", {}).get(MIME_KEPT) for block in blocks] == [
            None,
            "image/webp",
            "image/png",
            None,
            "image/jpeg; q=0.9",
            None,
        ]
        for block, sent in zip(blocks, IMAGES["content"], strict=True):  # nothing else changed, data included
            back = {**block, "mimeType": block.get("_meta", {}).get(MIME_KEPT, block.get("mimeType"))}
            back["_meta"] = {k: v for k, v in block.get("_meta", {}).items() if k != MIME_KEPT}
            assert {k: v for k, v in back.items() if v not in (None, {})} == sent
        assert result["structuredContent"] == IMAGES["structuredContent"]


@pytest.mark.wire
@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore:Accessing `Tool.inputSchema` is deprecated")  # (FastMCP's, once imported)
async def test_google_genai_converts_the_proxys_listing_for_gemini_cli_where_it_failed_on_the_servers() -> None:
    """google-genai's own MCP conversion (``google.genai._mcp_utils.mcp_to_gemini_tool``, the SDK's
    path for an MCP session's tools): a draft-07 tuple fails it (``_filter_to_supported_schema``
    recurses into ``items`` as one schema: AttributeError on a list); a never arm becomes ``{}``
    (any value); an enum lands on an array schema. Through the proxy, for Gemini CLI, none of that."""
    from google.genai import types
    from google.genai._mcp_utils import mcp_to_gemini_tool
    from mcp.types import Tool

    faulty = copy.deepcopy(FAULTY)
    for name in ("deep", "shade"):  # numeric enums: the Gemini-only enum_non_string, not a kind of this file
        del faulty[ENUM_TYPE]["inputSchema"]["properties"][name]
    upstream = ScriptedServer([ToolSpec(faulty[key], returning({"content": []})) for key in SCHEMA_KINDS])
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        proxied = by_name(await listing(px + "/mcp", "gemini-cli-mcp-client"))
        server = by_name(await listing(up + "/mcp", "gemini-cli-mcp-client"))
    with pytest.raises(AttributeError):
        mcp_to_gemini_tool(Tool.model_validate(server["move_to"]))

    def parameters(tool: dict[str, Any]) -> Any:
        """The Gemini function declaration's ``parameters`` google-genai makes of an MCP tool."""
        declarations = mcp_to_gemini_tool(Tool.model_validate(tool)).function_declarations
        assert declarations
        return declarations[0].parameters

    def nodes(schema: Any) -> list[Any]:
        if schema is None:
            return []
        found = [schema]
        for child in [schema.items, *(schema.any_of or []), *(schema.properties or {}).values()]:
            found += nodes(child)
        return found

    schemas = {name: parameters(tool) for name, tool in proxied.items()}  # none fails
    assert any(node == types.Schema() for node in nodes(parameters(server["greet"])))  # the never arm: "any value"
    assert not any(node == types.Schema() for node in nodes(schemas["greet"]))
    who = schemas["greet"].properties["who"]
    assert who.type == types.Type.STRING and who.description == "\u540d\u524d"
    assert any(node.enum and node.type == types.Type.ARRAY for node in nodes(parameters(server["paint"])))
    assert not any(node.enum and node.type == types.Type.ARRAY for node in nodes(schemas["paint"]))
    assert schemas["paint"].properties["colours"].items.enum == ["red", "gr\u00fcn", "\u9752"]
    assert schemas["query_rows"].properties["where"].type == types.Type.OBJECT
    assert schemas["move_to"].properties["to"].type == types.Type.ARRAY


#: Schema nodes around the kinds: each fault, and the near misses the gates must let by.
NODES = st.sampled_from(
    [
        {"type": "object"},
        {"type": ["object", "null"], "additionalProperties": {"type": "number"}},
        {"type": "object", "properties": {}},
        {"type": "array", "items": [{"type": "number"}], "additionalItems": False},
        {"type": "array", "items": {"type": "string"}},
        {"anyOf": [{"not": {}}, {"type": "string"}]},
        {"anyOf": [{"not": {}}, {"not": True}]},
        {"anyOf": [{"not": {"type": "null"}}, {"type": "string"}]},
        {"description": "d", "anyOf": [{"not": {}, "title": "never"}, {"type": "object"}]},
        {"type": "array", "items": {"type": "string"}, "enum": ["a", "\u00e9"]},
        {"type": "string", "enum": ["a", "b"]},
        {"type": "integer", "enum": [1.0, 2]},
        {"type": "integer", "enum": [1.5]},
        {"type": "null", "enum": [12.5]},
        {"type": ["string", "null"], "enum": [None, "x"]},
        {"type": "number", "maximum": 123456789012345678901234},
        {"enum": ["object"]},
        {"const": "object", "description": '"items":[ and "not":'},
    ]
)


def as_tool(schema: Any) -> dict[str, Any]:
    return {"name": "t", "inputSchema": {**schema, "type": "object"}}


TOOLS = st.recursive(
    NODES,
    lambda inner: st.fixed_dictionaries(
        {"type": st.just("object")},
        optional={"properties": st.dictionaries(st.sampled_from(["a", "b", "caf\u00e9"]), inner, max_size=3)},
    ),
    max_leaves=6,
).map(as_tool)


@pytest.mark.pure
@PROPERTY
@given(TOOLS, st.sampled_from(HOST_CLIENTS), st.sampled_from(["compact", "spaced", "ascii"]))
def test_the_gate_and_the_fast_listing_answer_as_the_rule_does(tool: Any, client: str, style: str) -> None:
    """A closed gate of ``model_schemas`` means its hook changes nothing, and a host client's listing
    without the rules (``Normalizer._unchanged``, which now serves hosts whose faults it can check)
    is the listing with them."""
    tool = _decoded(tool)
    profile = profile_for({"name": client, "version": "9.9.9"})
    ctx = ToolContext(ERA, NormalizerConfig().settings, client=profile)
    rule = RULES_BY_NAME["model_schemas"]
    assert rule.tool_gate is not None and rule.on_tool is not None
    changed = rule.on_tool(tool, ctx)
    if not rule.tool_gate(ToolScan(tool), ctx):
        assert changed is None
    if changed is not None:  # what it repairs passes the oracles (an anyOf of never arms alone stays)
        for key in (OBJECT_PROPERTIES, LEGACY_TUPLE, ENUM_TYPE):
            assert not CONSTRAINTS[key].violates(changed[0]), key
        assert not CONSTRAINTS[NEVER_BRANCH].violates(changed[0]) or '"not":true' in json.dumps(tool).replace(" ", "")
    text = Raw(_text(tool, style))
    config = NormalizerConfig()
    _same_listed(
        Normalizer(config).list_tool_text(text, 0, ERA, profile),
        RulesAlways(config).list_tool_text(text, 0, ERA, profile),
    )
