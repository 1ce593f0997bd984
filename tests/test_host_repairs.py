"""Host-aware repairs (issue 25): a session that initializes with a host's ``clientInfo`` gets
results that host's validator accepts, with the originals in ``_meta``; every other client gets the
server's bytes. The validators are modelled from the hosts' sources (each names its own), and each
is shown to bite on the server's output without the proxy."""

from __future__ import annotations

import base64
import copy
import re
from typing import Any

import httpx
import orjson
import pytest

from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning
from mcp_normalizer.engine.rules.clients import profile_for
from mcp_normalizer.engine.rules.host_content import ORIGINAL_BLOCK_KEY
from mcp_normalizer.engine.rules.host_profiles import (
    ARRAY_ITEMS,
    HOSTS,
    IMAGE_SVG,
    PROFILES,
    RESOURCE_LINK,
    TYPE_BESIDE_ANYOF,
    Host,
    Versions,
    host_for,
    version_key,
)

from .support import HEADERS, case_server, load_cases, proxy_for, run_cli, serve, steps
from .test_corpus import UNREPAIRABLE, check

SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="12.5" height="1e1"><text>caf\u00e9 \u2713</text></svg>'
# the signature and a header giving its size (IHDR: 3x2, 8-bit RGB); the rest not read by any host here
PNG = base64.b64encode(
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x03\x00\x00\x00\x02\x08\x02\x00\x00\x00" + bytes(range(40))
).decode()
LINK = {"type": "resource_link", "uri": "ui://demo/view/v1?q=\u00e9", "name": "view", "mimeType": "text/html"}
RESULT: dict[str, Any] = {
    "content": [
        {"type": "text", "text": "a chart and its view: 12.50"},
        {"type": "image", "data": base64.b64encode(SVG.encode()).decode(), "mimeType": "image/svg+xml"},
        {"type": "image", "data": PNG, "mimeType": "image/png", "annotations": {"priority": 0.5}},
        LINK,
    ],
    "isError": False,
}
TOOL = {"name": "render", "inputSchema": {"type": "object"}}
STEPS = [{"op": "callTool", "name": "render", "arguments": {}}]


def claude_accepts(result: dict[str, Any]) -> bool:
    """The Anthropic API's image rule as the Claude hosts meet it: an image block must be JPEG, PNG,
    GIF or WebP (docs.anthropic.com, vision: supported formats; anthropics/claude-code#15807: an
    ``image/svg+xml`` block gets a 400 and the call fails)."""
    allowed = {"image/jpeg", "image/png", "image/gif", "image/webp"}
    return all(block.get("mimeType") in allowed for block in result["content"] if block.get("type") == "image")


def rmcp_accepts(result: dict[str, Any]) -> bool:
    """rmcp ``=3.1.3`` as ChatGPT (and Codex before 0.171.0, which takes it) pins it (openai/codex
    ``codex-rs/Cargo.toml``, quoted in openai/codex#41280): its ``CallToolResult`` content takes
    text, image, audio and embedded resources; a ``resource_link`` block fails the whole call with
    "Unexpected response type" (openai/codex#41280, #33404)."""
    return all(block.get("type") in {"text", "image", "audio", "resource"} for block in result["content"])


VALIDATORS = {IMAGE_SVG: claude_accepts, RESOURCE_LINK: rmcp_accepts}


async def initialize_as(http: httpx.AsyncClient, url: str, name: str) -> dict[str, str]:
    """A legacy ``initialize`` naming the client ``name``; the headers of the session's requests."""
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": name, "version": "1.0"}}
    body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    response = await http.post(url, content=orjson.dumps(body), headers=HEADERS)
    return {"mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}


def server() -> ScriptedServer:
    return ScriptedServer([ToolSpec(TOOL, returning(RESULT))], response_mode="json")


@pytest.mark.pure
def test_every_host_is_known_by_the_names_it_sends_and_no_other_client_is() -> None:
    for host in HOSTS:
        for name in host.client_names:
            assert host_for(name) is host and profile_for({"name": name}).host is host
    for name in ("mcp", "mcp-normalizer-test", "claude-code-fork", "Codex", "", "conformance-test-client"):
        assert host_for(name) is None and profile_for({"name": name}).host is None
    assert profile_for({"name": "codex-mcp-client"}).key != profile_for({"name": "mcp"}).key
    assert set(PROFILES) >= {"claude-code", "claude-desktop", "claude-connectors", "codex", "chatgpt"}


@pytest.mark.wire
@pytest.mark.anyio
async def test_each_host_gets_what_its_validator_accepts_and_the_originals_in_meta() -> None:
    hosts = [host for host in HOSTS if set(host.faults) & set(VALIDATORS)]  # the content faults
    with serve(server()) as up, proxy_for(up + "/mcp") as px:
        sessions = [{"url": px + "/mcp", "clientName": host.client_names[0], "steps": STEPS} for host in hosts]
        direct = [{"url": up + "/mcp", "clientName": host.client_names[0], "steps": STEPS} for host in hosts]
        through = await run_node("v1", sessions)
        straight = await run_node("v1", direct)
        python = await run_python(px + "/mcp", STEPS, client_name="openai-mcp")  # ChatGPT
    for host, record, raw in zip(hosts, through, straight, strict=True):
        (step,) = record["steps"]
        (raw_step,) = raw["steps"]
        assert step["ok"] and raw_step["ok"], (host.profile, step, raw_step)
        result = step["value"]
        for fault in set(host.faults) & set(VALIDATORS):
            assert VALIDATORS[fault](result), (host.profile, result)
            assert not VALIDATORS[fault](raw_step["value"]), host.profile  # the validator bites
        kept = [
            block["_meta"][ORIGINAL_BLOCK_KEY]
            for block in result["content"]
            if ORIGINAL_BLOCK_KEY in block.get("_meta", {})
        ]
        changed = [i for i, block in enumerate(result["content"]) if block != RESULT["content"][i]]
        assert kept == [RESULT["content"][i] for i in changed]  # every change, and the original of each
        texts = [block["text"] for block in result["content"] if block["type"] == "text"]
        if IMAGE_SVG in host.faults:
            assert SVG in texts
        if RESOURCE_LINK in host.faults:
            assert "view: ui://demo/view/v1?q=\u00e9 (text/html)" in texts
        assert result["content"][2] == RESULT["content"][2]  # a PNG every host takes: untouched
    (step,) = python["steps"]
    assert step["ok"] and rmcp_accepts(step["value"]) and claude_accepts(step["value"]) is False


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_client_no_profile_names_gets_the_servers_bytes() -> None:
    """The same call from clients that are no host, or a host whose profile names none of its faults:
    byte for byte the server's answer."""
    body = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"render","arguments":{}}}'
    with serve(server()) as up, proxy_for(up + "/mcp") as px:
        async with httpx.AsyncClient(timeout=30) as http:
            answers = []
            for url in (up + "/mcp", px + "/mcp"):
                for name in ("mcp-normalizer-test", "mcp", "claude-code-fork", "Visual Studio Code", "cursor-vscode"):
                    session = await initialize_as(http, url, name)
                    response = await http.post(url, content=body, headers={**HEADERS, **session})
                    answers.append(response.content)
            codex = await initialize_as(http, px + "/mcp", "codex-mcp-client")
            repaired = (await http.post(px + "/mcp", content=body, headers={**HEADERS, **codex})).content
    assert len(set(answers)) == 1, answers
    assert repaired != answers[0]


@pytest.mark.wire
def test_check_as_a_host_finds_what_it_refuses_directly_and_nothing_through_the_proxy() -> None:
    with serve(server()) as up, proxy_for(up + "/mcp") as px:
        direct = run_cli("check", up + "/mcp", "--call", "render", "--host", "chatgpt", "--format", "json")
        through = run_cli("check", px + "/mcp", "--call", "render", "--host", "chatgpt", "--format", "json")
        anyone = run_cli("check", up + "/mcp", "--call", "render", "--format", "json")
        claude = run_cli("check", up + "/mcp", "--call", "render", "--host", "claude-code", "--format", "json")
    assert direct.returncode == 1, direct.stdout + direct.stderr
    assert orjson.loads(direct.stdout)["host"] == "chatgpt" and orjson.loads(anyone.stdout)["host"] is None
    found = orjson.loads(direct.stdout)["findings"]
    # the bare {"type": "object"} root: every model API family's fault (object_without_properties)
    every = ("model_schemas", ["/inputSchema"])
    assert [(f["rule"], f["pointers"]) for f in found] == [every, ("host_content", ["/content/3"])]
    assert through.returncode == 0, through.stdout
    assert anyone.returncode == 0 and orjson.loads(anyone.stdout)["findings"] == []
    assert [f["pointers"] for f in orjson.loads(claude.stdout)["findings"]] == [["/inputSchema"], ["/content/1"]]


GEMINI_TOOL: dict[str, Any] = {
    "name": "schedule",
    "inputSchema": {
        "type": "object",
        "properties": {
            "when": {
                "type": "string",
                "anyOf": [{"format": "date"}, {"const": "now"}, {"type": "string", "pattern": "^T"}],
            },
            "n": {"type": ["integer", "null"], "anyOf": [{"minimum": 0}, {"type": "null"}]},
            "tags": {
                "type": "array",
                "items": {"type": "string", "anyOf": [{"maxLength": 3}, {"enum": ["caf\u00e9"]}]},
            },
        },
    },
}


def gemini_accepts(schema: Any) -> bool:
    """The Gemini API's check as older Gemini CLIs meet it: no schema node may have both ``type``
    and ``anyOf`` ("type and anyOf cannot be both populated", google-gemini/gemini-cli#4121)."""
    if isinstance(schema, list):
        return all(gemini_accepts(item) for item in schema)
    if not isinstance(schema, dict):
        return True
    if "type" in schema and "anyOf" in schema:
        return False
    return all(gemini_accepts(value) for key, value in schema.items() if key not in ("enum", "const", "default"))


@pytest.mark.wire
@pytest.mark.anyio
async def test_gemini_cli_gets_an_equivalent_schema_without_type_beside_anyof() -> None:
    from jsonschema import Draft202012Validator

    upstream = ScriptedServer([ToolSpec(GEMINI_TOOL, returning(RESULT))])
    steps = [{"op": "listTools"}]
    name = "gemini-cli-mcp-client"
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        gemini, fixed, other = await run_node(
            "v1",
            [
                {"url": url, "clientName": name, "clientVersion": "0.1.12", "steps": steps},
                {"url": url, "clientName": name, "clientVersion": "0.42.0", "steps": steps},  # sends JSON Schema
                {"url": url, "steps": steps},
            ],
        )
    (tool,) = gemini["steps"][0]["value"]["tools"]
    assert gemini_accepts(tool["inputSchema"]) and not gemini_accepts(GEMINI_TOOL["inputSchema"])
    assert other["steps"][0]["value"]["tools"] == [GEMINI_TOOL]  # anyone else: the tool as listed
    # a Gemini CLI past the fix keeps type beside anyOf; only the Gemini API's other keys are
    # repaired (an anyOf arm's const as a one-value enum: rule gemini_schemas)
    (past,) = fixed["steps"][0]["value"]["tools"]
    assert past["inputSchema"]["properties"]["n"] == GEMINI_TOOL["inputSchema"]["properties"]["n"]
    assert past["inputSchema"]["properties"]["when"]["type"] == "string"
    assert past["inputSchema"]["properties"]["when"]["anyOf"][1] == {"enum": ["now"]}
    kept = tool["_meta"]["dev.mcp-normalizer/original-keywords"]
    assert kept["/inputSchema/properties/when"] == GEMINI_TOOL["inputSchema"]["properties"]["when"]
    samples = [
        "2026-12-04",
        "now",
        "Tea",
        "x",
        "caf\u00e9",
        5,
        0,
        -1,
        12.5,
        None,
        True,
        [],
        ["ab", "abcd"],
        ["caf\u00e9"],
    ]
    before = Draft202012Validator(GEMINI_TOOL["inputSchema"], format_checker=Draft202012Validator.FORMAT_CHECKER)
    after = Draft202012Validator(tool["inputSchema"], format_checker=Draft202012Validator.FORMAT_CHECKER)
    for name in ("when", "n", "tags"):
        for value in samples:
            instance = {name: value}
            assert before.is_valid(instance) == after.is_valid(instance), (name, value)  # the same values accepted


#: How the public cases name the hosts they were seen with (``client``), and the profile each is.
CASE_HOSTS = (
    ("claude code", "claude-code"),
    ("claude desktop", "claude-desktop"),
    ("claude.ai", "claude-connectors"),
    ("cursor", "cursor"),
    ("gemini cli", "gemini-cli"),
    ("chatgpt", "chatgpt"),
    ("codex", "codex"),
)


def case_host(case: dict[str, Any]) -> Host | None:
    """The first host the case's ``client`` names, if any."""
    said = str(case.get("client", "")).lower()
    return next((PROFILES[profile] for words, profile in CASE_HOSTS if words in said), None)


@pytest.mark.wire
@pytest.mark.anyio
async def test_the_field_cases_seen_with_a_host_are_accepted_as_that_host_and_as_before() -> None:
    """Each public case whose client is a host, replayed with that host's clientInfo: the same
    acceptance as with the defaults (tests/test_corpus.py), and exactly what an unnamed client gets
    once the nodes the every-family schema repairs replaced (a bare ``{"type": "object"}`` in
    perplexity's listing) are put back from the tool's ``_meta``."""
    named = {c["id"]: host.client_names[0] for c in load_cases() if c.get("tool") and (host := case_host(c))}
    cases = [case for case in load_cases() if case["id"] in named]
    assert len(cases) >= 15, [case.get("client") for case in cases]
    with serve(case_server(cases, "sse")) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        as_hosts = [
            {"url": url, "headers": {"x-case": c["id"]}, "clientName": named[c["id"]], "steps": steps(c)} for c in cases
        ]
        as_anyone = [{"url": url, "headers": {"x-case": c["id"]}, "steps": steps(c)} for c in cases]
        hosts = await run_node("v1", as_hosts)
        anyone = await run_node("v1", as_anyone)
    check(cases, {"ts-sdk-1 as the host": hosts}, {c["id"] for c in cases} - UNREPAIRABLE)
    for case, seen, plain in zip(cases, hosts, anyone, strict=True):
        assert put_back(without_times(seen), without_times(plain)) == without_times(plain), case["id"]


def without_times(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in step.items() if k != "at"} for step in record["steps"]]


KEPT = "dev.mcp-normalizer/original-keywords"
ORIGINAL_BLOCK = "dev.mcp-normalizer/original-block"
ORIGINAL_VALUES_URI = "urn:dev.mcp-normalizer:original-values"


def put_back(seen: list[dict[str, Any]], plain: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``seen`` (a host's steps) with each ``/inputSchema`` node a host repair kept in a listed
    tool's ``_meta`` (and ``plain``'s same tool did not) put back where it was, and each content
    block a host repair made of another (the original kept in the new block's ``_meta``) put back."""
    out = copy.deepcopy(seen)
    for step, other in zip(out, plain, strict=True):
        found = step["value"].get("content") if isinstance(step.get("value"), dict) else None
        content: list[Any] = found if isinstance(found, list) else []
        before = other["value"].get("content") if isinstance(other.get("value"), dict) else None
        sent: list[Any] = before if isinstance(before, list) else []
        for index, block in enumerate(content):
            was = sent[index] if index < len(sent) else None
            original = block.get("_meta", {}).get(ORIGINAL_BLOCK) if isinstance(block, dict) else None
            if original is not None and (not isinstance(was, dict) or ORIGINAL_BLOCK not in was.get("_meta", {})):
                content[index] = original
        if content:  # and the values a host repair named for a host that reads no text beside structuredContent
            content[:] = [b for b in content if (b.get("resource") or {}).get("uri") != ORIGINAL_VALUES_URI]
        tools = (step.get("value") or {}).get("tools") if isinstance(step.get("value"), dict) else None
        others = (other.get("value") or {}).get("tools") if isinstance(other.get("value"), dict) else None
        for tool, was in zip(tools or [], others or [], strict=False):
            kept = tool.get("_meta", {}).get(KEPT, {})
            own = was.get("_meta", {}).get(KEPT, {})
            for pointer in [p for p in kept if p.startswith("/inputSchema") and p not in own]:
                steps = [s.replace("~1", "/").replace("~0", "~") for s in pointer.split("/")[1:]]
                node = tool
                for name in steps[:-1]:
                    node = node[int(name) if isinstance(node, list) else name]
                node[int(steps[-1]) if isinstance(node, list) else steps[-1]] = kept.pop(pointer)
            if KEPT in tool.get("_meta", {}) and not kept:
                del tool["_meta"][KEPT]
                if not tool["_meta"]:
                    del tool["_meta"]
    return out


@pytest.mark.wire
@pytest.mark.anyio
async def test_claude_desktop_behind_the_stdio_wrapper_gets_its_repairs_and_no_one_else_does(tmp_path: Any) -> None:
    from .test_stdio_wrapper import fixture, wrapped

    plan = {"tools": [TOOL], "results": {"render": RESULT}}
    command = wrapped(fixture(plan), tmp_path / "log.jsonl")
    desktop, anyone = await run_node(
        "v1",
        [{"command": command, "clientName": "claude-ai", "steps": STEPS}, {"command": command, "steps": STEPS}],
    )
    repaired = desktop["steps"][0]["value"]
    assert claude_accepts(repaired) and not rmcp_accepts(repaired)  # the SVG, for Claude Desktop alone
    assert anyone["steps"][0]["value"] == RESULT


LONG = "search_the_knowledge_base_for_documents_matching_every_word_of_the_query"  # 73 characters


@pytest.mark.wire
@pytest.mark.anyio
async def test_claude_desktop_and_claude_ai_get_names_they_take_and_calls_reach_the_originals() -> None:
    """A dotted name and a 73-character one are valid (the spec allows 128 characters and dots);
    Claude Desktop and claude.ai refuse every tool of such a server. For them alone the tools are
    advertised under names of ^[a-zA-Z0-9_-]{1,64}$, and a call by such a name reaches the upstream
    under the original."""
    answer = {"content": [{"type": "text", "text": "d\u00e9j\u00e0 vu: 1.50"}]}
    tools = [
        ToolSpec({"name": name, "inputSchema": {"type": "object"}}, returning(answer))
        for name in ("weather.get", LONG, "ok_name")
    ]
    upstream = ScriptedServer(tools)
    strict = re.compile(r"[a-zA-Z0-9_-]{1,64}")
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        listed = await run_node(
            "v1",
            [
                {"url": url, "clientName": name, "steps": [{"op": "listTools"}]}
                for name in ("claude-ai", "Anthropic/ClaudeAI", "mcp-normalizer-test")
            ],
        )
        desktop_tools = {
            tool["_meta"]["dev.mcp-normalizer/original-name"]: tool["name"]
            for tool in listed[0]["steps"][0]["value"]["tools"]
            if "dev.mcp-normalizer/original-name" in tool.get("_meta", {})  # (every tool: original-keywords too)
        }
        calls = [
            {"op": "listTools"},
            *(
                {"op": "callTool", "name": desktop_tools[original], "arguments": {}}
                for original in ("weather.get", LONG)
            ),
        ]
        (desktop,) = await run_node("v1", [{"url": url, "clientName": "claude-ai", "steps": calls}])
    for record in listed[:2]:
        names = [tool["name"] for tool in record["steps"][0]["value"]["tools"]]
        assert all(strict.fullmatch(name) for name in names) and "ok_name" in names, names
    assert [tool["name"] for tool in listed[2]["steps"][0]["value"]["tools"]] == ["weather.get", LONG, "ok_name"]
    assert all(step["ok"] for step in desktop["steps"]), desktop["steps"]
    assert desktop["steps"][1]["value"] == answer
    called = [message["params"]["name"] for message, _ in upstream.requests if message.get("method") == "tools/call"]
    assert called == ["weather.get", LONG]  # upstream, under the names it knows


KEYED_TOOL: dict[str, Any] = {
    "name": "lookup",
    "inputSchema": {
        "type": "object",
        "properties": {
            "user name": {"type": "string"},
            "ok.key": {"type": "number"},
            "\u65e5\u4ed8": {"type": "string"},
            "$filter": {"type": "object", "properties": {"inner key": {"type": "integer"}}},
        },
        "required": ["user name", "ok.key"],
    },
}


def anthropic_accepts(tool: dict[str, Any]) -> bool:
    """The Anthropic API's rule as the Claude hosts meet it: every ``input_schema.properties`` key
    matches ``^[a-zA-Z0-9_.-]{1,64}$`` (anthropics/claude-code#4668; a Bedrock report of the same
    error says only the top-level keys are checked)."""
    return all(re.fullmatch(r"[a-zA-Z0-9_.-]{1,64}", key) for key in tool["inputSchema"].get("properties", {}))


async def echo_arguments(call: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": orjson.dumps(call.arguments).decode()}]}


@pytest.mark.wire
@pytest.mark.anyio
async def test_claude_hosts_get_argument_names_they_take_and_the_call_reaches_the_tool_under_its_own() -> None:
    upstream = ScriptedServer([ToolSpec(KEYED_TOOL, echo_arguments)], response_mode="json")
    own = {
        "user name": "Z\u00fcrich \u2713",
        "ok.key": 12.5,
        "\u65e5\u4ed8": "2026-12-04",
        "$filter": {"inner key": 9007199254740991},
    }
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        (listed,) = await run_node("v1", [{"url": url, "clientName": "claude-code", "steps": [{"op": "listTools"}]}])
        (tool,) = listed["steps"][0]["value"]["tools"]
        advertised = tool["_meta"]["dev.mcp-normalizer/original-keys"]  # advertised -> own
        as_sent = {
            next(a for a, o in advertised.items() if o == key) if key in advertised.values() else key: value
            for key, value in own.items()
        }
        steps = [{"op": "listTools"}, {"op": "callTool", "name": "lookup", "arguments": as_sent}]
        (claude,) = await run_node("v1", [{"url": url, "clientName": "claude-code", "steps": steps}])
        (other,) = await run_node(
            "v1", [{"url": url, "steps": [{"op": "listTools"}, {"op": "callTool", "name": "lookup", "arguments": own}]}]
        )
    assert anthropic_accepts(tool) and not anthropic_accepts(KEYED_TOOL)
    assert "ok.key" in tool["inputSchema"]["properties"] and set(advertised.values()) == {
        "user name",
        "\u65e5\u4ed8",
        "$filter",
    }
    assert tool["inputSchema"]["required"] == [next(a for a, o in advertised.items() if o == "user name"), "ok.key"]
    assert other["steps"][0]["value"]["tools"] == [KEYED_TOOL]  # anyone else: the tool as listed
    calls = [
        message["params"]["arguments"] for message, _ in upstream.requests if message.get("method") == "tools/call"
    ]
    assert calls == [own, own]  # upstream, under the tool's own names, every value as sent
    assert claude["steps"][1]["ok"] and orjson.loads(claude["steps"][1]["value"]["content"][0]["text"]) == own


@pytest.mark.wire
@pytest.mark.anyio
async def test_a_claude_session_that_never_listed_still_calls_the_tool_under_its_own_names() -> None:
    """A host that kept the advertised names (from another session, another replica, before a
    restart) and calls without listing: the proxy fetches the list first and sends the tool's own
    names upstream; a call under keys of no invented shape goes as it came."""
    upstream = ScriptedServer([ToolSpec(KEYED_TOOL, echo_arguments)], response_mode="json")
    own = {"user name": "Z\u00fcrich \u2713", "ok.key": 1e-7, "$filter": {"inner key": -(2**70)}}
    with serve(upstream) as up:
        with proxy_for(up + "/mcp") as px:
            (listed,) = await run_node(
                "v1", [{"url": px + "/mcp", "clientName": "claude-code", "steps": [{"op": "listTools"}]}]
            )
        advertised = listed["steps"][0]["value"]["tools"][0]["_meta"]["dev.mcp-normalizer/original-keys"]
        as_sent = {next((a for a, o in advertised.items() if o == key), key): value for key, value in own.items()}
        plain = {"ok.key": 12.5}
        with proxy_for(up + "/mcp") as px:  # a new proxy: nothing listed through it yet
            steps = [
                {"op": "callTool", "name": "lookup", "arguments": as_sent},
                {"op": "callTool", "name": "lookup", "arguments": plain},
            ]
            (claude,) = await run_node("v2", [{"url": px + "/mcp", "clientName": "claude-code", "steps": steps}])
    assert all(step["ok"] for step in claude["steps"]), claude["steps"]
    calls = [m["params"]["arguments"] for m, _ in upstream.requests if m.get("method") == "tools/call"]
    assert calls == [own, plain]
    assert orjson.loads(claude["steps"][0]["value"]["content"][0]["text"]) == own


# -- version ranges --------------------------------------------------------------------------------


@pytest.mark.pure
def test_versions_order_as_releases_do_and_a_version_nobody_can_read_gets_the_repair() -> None:
    ordered = ["0.1.9", "0.1.12", "v0.1.13", "0.150.0-alpha.8", "0.150.0", "0.150.0.1", "2.1.233"]
    keys = [version_key(v) for v in ordered]
    assert all(k is not None for k in keys) and keys == sorted(keys, key=lambda k: k or ())
    assert version_key("0.1") == version_key("0.1.0") and version_key("1.0.0+build.7") == version_key("1.0.0")
    for unreadable in (None, "", "dev", "\u00e9", 12.5, ["0.1"]):
        assert version_key(unreadable) is None
    window = Versions(since="0.14.0", fixed_in="0.21.0")
    assert [window.covers(v) for v in ("0.13.9", "0.14.0", "0.20.99", "0.21.0-rc.1", "0.21.0", None, "dev")] == [
        False,
        True,
        True,
        True,
        False,
        True,
        True,
    ]
    gemini = PROFILES["gemini-cli"]
    assert TYPE_BESIDE_ANYOF in profile_for({"name": gemini.client_names[0], "version": "0.1.12"}).host_faults
    assert TYPE_BESIDE_ANYOF not in profile_for({"name": gemini.client_names[0], "version": "0.42.0"}).host_faults
    assert TYPE_BESIDE_ANYOF in profile_for({"name": gemini.client_names[0]}).host_faults
    past = profile_for({"name": gemini.client_names[0], "version": "0.42.0"})
    # (the Gemini API's other keys stay: its listings are its own, not anyone's)
    assert past.key != profile_for({"name": "mcp-normalizer-test"}).key
    # cached listings are shared by every version with the same faults (every host has every model
    # API family's, so none shares an unnamed client's)
    assert past.key == profile_for({"name": gemini.client_names[0], "version": "0.61.0"}).key
    assert past.key != profile_for({"name": gemini.client_names[0], "version": "0.1.12"}).key


# -- VS Code: arrays without items -----------------------------------------------------------------

#: Where Copilot Chat's ``forEachSchemaNode`` looks for subschemas (toolSchemaNormalizer.ts).
_COPILOT_ONE = ("additionalProperties", "not", "if", "then", "else", "contains")
_COPILOT_MAP = ("properties", "dependencies", "patternProperties")
_COPILOT_LIST = ("anyOf", "allOf", "oneOf")


def copilot_accepts(schema: Any) -> bool:
    """The two checks of VS Code Copilot Chat's ``normalizeToolSchema`` that throw, and so fail the
    chat request (microsoft/vscode-copilot-chat ``src/extension/tools/common/toolSchemaNormalizer.ts``):
    the tool's parameters must be valid against the draft-07 metaschema, and no node it walks may be
    ``type: "array"`` with a falsy ``items``."""
    from jsonschema import Draft7Validator

    if not Draft7Validator(Draft7Validator.META_SCHEMA).is_valid(schema):
        return False
    return _copilot_walk(schema)


def _js_falsy(value: Any) -> bool:
    """What JavaScript's ``!value`` is true of, among JSON values (an absent member is ``None``)."""
    return value is None or value is False or value == "" or (type(value) in (int, float) and value == 0)


def _copilot_walk(node: Any) -> bool:
    if not isinstance(node, dict):
        return True
    if node.get("type") == "array" and _js_falsy(node.get("items")):
        return False
    children: list[Any] = [node.get(key) for key in _COPILOT_ONE]
    for key in _COPILOT_MAP:
        if isinstance(node.get(key), dict):
            children += node[key].values()
    for key in _COPILOT_LIST:
        if isinstance(node.get(key), list):
            children += node[key]
    items = node.get("items")
    children += items if isinstance(items, list) else [items]
    return all(_copilot_walk(child) for child in children)


#: Open 2020-12 tuples (``prefixItems`` without ``items``): the item-less arrays Copilot Chat
#: refuses that the default ``schema_shape`` repair leaves alone (it gives every other item-less
#: input array ``items: {}`` for every client).
PAIR = {"type": "array", "prefixItems": [{"type": "number"}, {"type": "string", "maxLength": 4}]}
VSCODE_TOOL: dict[str, Any] = {
    "name": "tag_files",
    "inputSchema": {
        "type": "object",
        "properties": {
            "pair": {**PAIR, "description": "caf\u00e9/na\u00efve \u2713"},
            "either": {"anyOf": [PAIR, {"type": "null"}]},
            "scores": {"type": "object", "additionalProperties": {**PAIR, "minItems": 1}},
            "typed": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["pair"],
    },
}
VSCODE_SAMPLES: list[Any] = [
    [],
    [12.5, "x"],
    [1.5e300, "caf\u00e9", None, {"deep": [None]}],
    ["x", 12.5],
    [None, {"a": [1e300]}],
    [[1, 2], [3]],
    [2**70, "na\u00efve"],
    [1, 2, 3, 4],
    "not an array",
    None,
    {"k": []},
]


@pytest.mark.wire
@pytest.mark.anyio
async def test_vscode_gets_arrays_with_items_that_take_the_same_values_and_calls_reach_the_tool() -> None:
    from jsonschema import Draft7Validator, Draft202012Validator

    upstream = ScriptedServer([ToolSpec(VSCODE_TOOL, returning(RESULT))])
    steps = [{"op": "listTools"}, {"op": "callTool", "name": "tag_files", "arguments": {"pair": [12.5, "a"]}}]
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        vscode, other = await run_node(
            "v1", [{"url": url, "clientName": "Visual Studio Code", "steps": steps}, {"url": url, "steps": steps}]
        )
        direct = await run_node("v2", [{"url": up + "/mcp", "clientName": "Visual Studio Code", "steps": steps}])
    (tool,) = vscode["steps"][0]["value"]["tools"]
    assert copilot_accepts(tool["inputSchema"]) and not copilot_accepts(VSCODE_TOOL["inputSchema"])  # it bites
    assert direct[0]["steps"][0]["value"]["tools"] == [VSCODE_TOOL]
    assert other["steps"][0]["value"]["tools"] == [VSCODE_TOOL]  # anyone else: the tool as listed
    assert vscode["steps"][1]["ok"] and vscode["steps"][1]["value"]["content"][0] == RESULT["content"][0]
    kept = tool["_meta"]["dev.mcp-normalizer/original-keywords"]
    properties = VSCODE_TOOL["inputSchema"]["properties"]
    assert kept == {
        "/inputSchema/properties/pair": properties["pair"],
        "/inputSchema/properties/either/anyOf/0": PAIR,
        # no properties: every model API family's fault (kept first, whole: the items given to its
        # additionalProperties' tuple after it are inside it)
        "/inputSchema/properties/scores": properties["scores"],
    }
    for validator in (Draft202012Validator, Draft7Validator):
        before, after = validator(VSCODE_TOOL["inputSchema"]), validator(tool["inputSchema"])
        for name in VSCODE_TOOL["inputSchema"]["properties"]:
            for value in VSCODE_SAMPLES:
                instance = {"pair": [0, ""], name: value}
                assert before.is_valid(instance) == after.is_valid(instance), (validator, name, value)


@pytest.mark.pure
def test_vscode_and_the_openai_hosts_name_arrays_without_items() -> None:
    """VS Code of its own (Copilot Chat), Codex and ChatGPT through their model API (OpenAI)."""
    named = [host.profile for host in HOSTS if ARRAY_ITEMS in host.faults]
    assert named == [host.profile for host in HOSTS if host.model_api == "openai" or host.profile == "vscode"]
    assert set(named) == {"codex", "chatgpt", "vscode"}


#: Closed 2020-12 tuples (``prefixItems`` with ``items: false``, or its ``{"not": {}}``): the OpenAI
#: API reads no ``prefixItems`` and refuses an array without ``items`` (ruvnet/ruflo#1294).
CLOSED = {"type": "array", "prefixItems": [{"type": "number"}, {"type": "string", "maxLength": 4}], "items": False}
CODEX_TOOL: dict[str, Any] = {
    "name": "place_pin",
    "inputSchema": {
        "type": "object",
        "properties": {
            "at": {**CLOSED, "description": "caf\u00e9 \u2713", "maxItems": 5},
            "maybe": {"anyOf": [{**CLOSED, "items": {"not": {}}}, {"type": "null"}]},
            "rows": {"type": "array", "items": {**CLOSED, "minItems": 1}},
        },
        "required": ["at"],
    },
}
CODEX_SAMPLES: list[Any] = [
    *VSCODE_SAMPLES,
    [12.5],
    [1e-7, "\u2713\u2713"],
    [-(2**70), "abcde"],
    [12.5, "a", "b"],
    [[12.5, "x"], [0, ""]],
    [[12.5, "x", 1]],
]


@pytest.mark.wire
@pytest.mark.anyio
async def test_codex_gets_closed_tuples_with_items_openai_takes_and_the_same_values() -> None:
    """Codex (the OpenAI family) lists a closed tuple with ``items: {anyOf: [the positions]}``, its
    length as ``maxItems`` and the positions in the description, the node as listed in ``_meta``:
    the OpenAI judge takes it and refuses what Codex got before (the closing ``items: false``
    dropped, as another client still gets it for the TS SDK's draft-07 validator, rule
    ``schema_tuple``), a 2020-12 validator takes the same arguments from both, and one that ignores
    ``prefixItems`` (draft-07) takes every argument the tuple takes; the call reaches the tool."""
    from jsonschema import Draft7Validator, Draft202012Validator

    from .model_api_judges import OPENAI

    upstream = ScriptedServer([ToolSpec(CODEX_TOOL, returning(RESULT))])
    steps = [{"op": "listTools"}, {"op": "callTool", "name": "place_pin", "arguments": {"at": [12.5, "a"]}}]
    with serve(upstream) as up, proxy_for(up + "/mcp") as px:
        url = px + "/mcp"
        codex, other = await run_node(
            "v1", [{"url": url, "clientName": "codex-mcp-client", "steps": steps}, {"url": url, "steps": steps}]
        )
    (tool,) = codex["steps"][0]["value"]["tools"]
    (theirs,) = other["steps"][0]["value"]["tools"]
    assert "items" not in theirs["inputSchema"]["properties"]["at"]  # schema_tuple's, as before
    assert OPENAI.refused(theirs) and not OPENAI.refused(tool), OPENAI.refused(tool)  # what Codex got before
    at = tool["inputSchema"]["properties"]["at"]
    assert at["items"] == {"anyOf": CLOSED["prefixItems"]} and at["maxItems"] == 2
    assert at["description"].startswith("caf\u00e9 \u2713 (items by position: [")
    kept = tool["_meta"]["dev.mcp-normalizer/original-keywords"]
    properties = CODEX_TOOL["inputSchema"]["properties"]
    assert kept["/inputSchema/properties/at"] == properties["at"]
    assert kept["/inputSchema/properties/maybe/anyOf/0"] == properties["maybe"]["anyOf"][0]
    assert kept["/inputSchema/properties/rows/items"] == properties["rows"]["items"]
    assert codex["steps"][1]["ok"] and codex["steps"][1]["value"]["content"][0] == RESULT["content"][0]
    before, after = Draft202012Validator(CODEX_TOOL["inputSchema"]), Draft202012Validator(tool["inputSchema"])
    draft07 = Draft7Validator(tool["inputSchema"])
    for name in properties:
        for value in CODEX_SAMPLES:
            instance = {"at": [0, ""], name: value}
            assert before.is_valid(instance) == after.is_valid(instance), (name, value)
            assert draft07.is_valid(instance) or not before.is_valid(instance), (name, value)
