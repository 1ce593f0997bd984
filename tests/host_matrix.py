"""The host matrix (issue 38): what each real host's model receives for each fault kind, directly
from an MCP server and through the proxy.

A cell is a host (Claude Code, Codex, Gemini CLI: :data:`HOSTS`) x a fault kind x a route
(``direct``, ``proxy``), over Streamable HTTP; the kinds of :data:`STDIO_KINDS` also over stdio (the
server's own command directly, ``mcp-normalizer stdio -- CMD`` through the proxy). Each fault
kind is one tool and its result: the first public fault case of each ``kind`` in
``../shared/cases/public.json`` (replayed from that file at run time, never copied here), plus the
kinds below that the hosts lose on the listing side (:data:`LIST_KINDS`) or the result side
(:data:`RESULT_KINDS`). The scripted server of a kind serves its tool and a plain companion tool,
so a host that drops one tool can be told from one that loses the whole server.

For each kind, the *information items* that must reach the model (:func:`items_of`): of a result
with ``structuredContent``, every leaf datum of it (an error's problem members, a success's data;
strings as they are, numbers, booleans and ``null`` as JSON spells them; a string that is itself
JSON counts by its own leaves); of a result without, the leaves of its text blocks (a text that is
not JSON is one item), and each image (its data, or for an SVG its source). Each member is its own
item: two members holding the same value need two occurrences in the model's view, and a cell
through the proxy shows less than directly when any item's count drops. A cell's outcome
(:class:`Outcome`): whether the host offered the tool (or lost the server), and which items the
model's view of the result holds (:class:`~tests.host_loop.ModelView` ``result``; an image is
found by its data anywhere in the requests after the call, as a host sends it beside the text).

Run it with ``scripts/host-matrix`` (it writes ``docs/hosts-model-view.md`` and ``.json``);
``tests/test_host_matrix.py`` runs it once and checks the page and the proxy against it.
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import fastmcp
import httpx
import pydantic

from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, protean_server, returning

from .host_claude import AnthropicMock, run_claude_code
from .host_claude import model_name as claude_name
from .host_codex import ResponsesMock, run_codex
from .host_gemini import GeminiMock, run_gemini_cli
from .host_loop import HostFailure, McpServer, ModelView
from .support import EXE, ROOT, SHARED, free_port, load_cases, protean_rules, proxy_for, running, serve

SERVER = "demo"
ROUTES = ("direct", "proxy")
#: Seconds one host run may take in the matrix (a run takes about a second here).
RUN_TIMEOUT = 20.0
#: Host runs at once (each is a blocking subprocess; the machine has 2 cores).
WORKERS = 2
PAGE = ROOT / "docs" / "hosts-model-view.md"
RAW = ROOT / "results" / "hosts-model-view.json"  # (the raw run: not committed, results/ is ignored)
COMMAND = "scripts/host-matrix"

OK_TEXT = "ok: 12.5 caf\u00e9"
OK = {"content": [{"type": "text", "text": OK_TEXT}]}
COMPANION = ToolSpec(
    {"name": "companion", "description": "A plain tool beside the one under test.", "inputSchema": {"type": "object"}},
    returning(OK),
)

#: Listing-side kinds: a tool schema some host refuses (its result is plain).
LIST_KINDS: dict[str, dict[str, Any]] = {
    "input_schema_null": {"name": "status", "description": "Server status.", "inputSchema": None},
    "boolean_subschema": {
        "name": "tag",
        "description": "Tags a runtime.",
        "inputSchema": {"type": "object", "properties": {"x": True}},
    },
    "property_keys": {  # outside Anthropic's ^[a-zA-Z0-9_.-]{1,64}$ (OData style)
        "name": "search",
        "description": "Searches runtimes.",
        "inputSchema": {
            "type": "object",
            "properties": {"$filter": {"type": "string"}, "max results": {"type": "integer"}},
            "required": ["$filter"],
        },
    },
    "tuple_items": {  # draft-07: items as an array of schemas
        "name": "locate",
        "description": "A point as [latitude, longitude, label].",
        "inputSchema": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "point": {
                    "type": "array",
                    "items": [{"type": "number"}, {"type": "number"}, {"type": "string"}],
                    "additionalItems": False,
                }
            },
        },
    },
    # the autumn-2026 kinds of cases/faults.md (issue 39), each alone in its tool
    "invalid_type_keyword": {
        "name": "when",
        "description": "A meeting time.",
        "inputSchema": {"type": "object", "properties": {"at": {"type": "date-time"}, "n": {"type": "int"}}},
    },
    "required_boolean": {
        "name": "label",
        "description": "Labels a runtime.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string", "required": False}}},
    },
    "required_in_properties": {
        "name": "rename",
        "description": "Renames a runtime.",
        "inputSchema": {
            "type": "object",
            "properties": {"old": {"type": "string"}, "new": {"type": "string"}, "required": []},
        },
    },
    "enum_not_array": {
        "name": "mode",
        "description": "Sets a mode.",
        "inputSchema": {"type": "object", "properties": {"m": {"type": "string", "enum": None}}},
    },
    "enum_type_conflict": {
        "name": "paint",
        "description": "Paints in colours.",
        "inputSchema": {
            "type": "object",
            "properties": {"colours": {"type": "array", "items": {"type": "string"}, "enum": ["red", "gr\u00fcn"]}},
        },
    },
    "enum_non_string": {
        "name": "level",
        "description": "A level of 1, 2.5 or 1e-7.",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "number", "enum": [1, 2.5, 1e-7]}}},
    },
    "object_without_properties": {
        "name": "describe",
        "description": "Describes with a filter.",
        "inputSchema": {"type": "object", "properties": {"filter": {"type": "object"}}},
    },
    "never_branch_anyof": {
        "name": "greet",
        "description": "Greets someone.",
        "inputSchema": {"type": "object", "properties": {"who": {"anyOf": [{"not": {}}, {"type": "string"}]}}},
    },
}

PROBLEM: dict[str, Any] = {
    "type": "https://errors.example.com/forbidden",
    "title": "Forbidden",
    "status": 403,
    "detail": "Account 12345 may not read ledger L-7 (\u00e9tape 2).",
    "code": "E_LEDGER_FORBIDDEN",
    "gate": "ledger-acl",
}
SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="12.5" height="10"><text>caf\u00e9 \u2713</text></svg>'
PLAIN_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}

#: Result-side kinds: a plain tool whose result some host reads less of.
RESULT_KINDS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "problem_empty_content": (
        {"name": "ledger", "description": "Reads a ledger.", "inputSchema": PLAIN_SCHEMA},
        {"content": [], "structuredContent": PROBLEM, "isError": True},
    ),
    "text_less_than_structured": (
        {"name": "runtimes", "description": "Lists runtimes.", "inputSchema": PLAIN_SCHEMA},
        {
            "content": [{"type": "text", "text": "3 runtimes, 1 failed."}],
            "structuredContent": {
                "count": 3,
                "failed": {"id": "r-17", "load": 12.5, "zone": "\u6771\u4eac"},
                "bytes": 12345678901234567890,
            },
        },
    ),
    "text_says_less_invoice": (
        {"name": "create_invoice", "description": "Creates an invoice.", "inputSchema": PLAIN_SCHEMA},
        {
            "content": [{"type": "text", "text": "Invoice created."}],
            "structuredContent": {
                "invoice": "INV-2026-0042",
                "total": 12.5,
                "currency": "\u20ac",
                "lines": [{"sku": "caf\u00e9-\u6771\u4eac", "qty": 3, "discount": None}],
            },
        },
    ),
    "svg_image": (
        {"name": "chart", "description": "Draws a chart.", "inputSchema": PLAIN_SCHEMA},
        {
            "content": [
                {"type": "text", "text": "the chart:"},
                {"type": "image", "data": base64.b64encode(SVG.encode()).decode(), "mimeType": "image/svg+xml"},
            ]
        },
    ),
}


#: The cells (host, fault kind) where the model still misses something through the proxy because of
#: the host alone (the proxy's bytes are spec-valid and carry it), and what the host does: shown
#: after the cell in the page's last list. ``tests/test_host_matrix.py`` fails when one no longer misses.
HOST_CAUSES: dict[tuple[str, str], str] = {}


#: The kinds also run over stdio: the server's own command directly, ``mcp-normalizer stdio -- CMD``
#: through the proxy.
STDIO_KINDS = ("input_schema_null", "boolean_subschema", "problem_empty_content")

#: The kinds also served by a server that speaks only 2026-07-28 (``ScriptedServer(legacy=False)``:
#: it refuses ``initialize``); through the proxy the era bridge speaks it for a legacy host
#: (issue 41).
MODERN_KINDS = ("text_says_less_invoice", "problem_empty_content")


#: Rows from real servers (issue 38 item 3): the server, the tool, the arguments the model calls it
#: with, and what the row shows. The tool's result is what the server answers a plain client directly
#: in that run (:func:`_direct_result`), so the items judged are the server's own.
SERVER_KINDS: dict[str, tuple[str, str, dict[str, Any]]] = {
    # @modelcontextprotocol/server-everything (npm), its Streamable HTTP mode
    "decimal_sum": ("server-everything", "get-sum", {"a": 1.5, "b": 11}),
    "structured_weather": ("server-everything", "get-structured-content", {"location": "Chicago"}),
    "png_image": ("server-everything", "get-tiny-image", {}),
    # a FastMCP server with the usual faults (:func:`fastmcp_server`)
    "null_string_naive_datetime": ("fastmcp", "lookup", {"id": 7}),
    "tool_error": ("fastmcp", "withdraw", {"amount": 12.5}),
    # the demo's Protean upstream (mcp_normalizer.demo.upstream), behind the shipped rules
    "null_scope": ("protean", "protean.list_runtimes", {}),
    "forbidden_problem": ("protean", "protean.scope_list", {}),
}
#: The row's first column for each real server.
SERVER_NAMES = {
    "server-everything": "server-everything",
    "fastmcp": "FastMCP",
    "protean": "the demo's Protean upstream",
}


class _Person(pydantic.BaseModel):
    id: int
    name: str = None  # type: ignore[assignment]  # the fault, as FastMCP users write it
    seen: datetime.datetime  # naive: no offset, against its schema's format date-time


def fastmcp_server() -> Any:
    """A FastMCP server (PyPI ``fastmcp``) with the usual faults: a ``null`` in a declared string
    and a naive date-time (``lookup``), and a tool that raises (``withdraw``)."""
    server = fastmcp.FastMCP("fastmcp-faults")

    @server.tool
    def lookup(id: int) -> _Person:
        """Find a person (no name known)."""
        return _Person(id=id, seen=datetime.datetime(2026, 1, 2, 3, 4, 5, 120_000))

    @server.tool
    def withdraw(amount: float) -> str:
        """Withdraw from the ledger."""
        raise fastmcp.exceptions.ToolError(f"E_LEDGER_FORBIDDEN: account 12345 may not withdraw {amount} \u20ac")

    return server


@dataclass(frozen=True)
class Kind:
    """One fault kind: its name, where it comes from, the tool and its result."""

    name: str
    source: str  # a public case's id, "defined" (this module), or a real server (:data:`SERVER_NAMES`)
    side: str  # "list" or "result"
    tool: dict[str, Any]
    result: dict[str, Any]
    way: str = "http"  # "http": a scripted server on loopback; "stdio": a stdio server's command
    arguments: dict[str, Any] | None = None  # a real server's call (None: made from the schema, :func:`fill`)

    @property
    def key(self) -> str:
        """The kind's name in the matrix (``NAME (stdio)`` for the stdio way, ``NAME (2026-07-28)`` for
        a server that speaks only 2026-07-28)."""
        return self.name if self.way == "http" else f"{self.name} ({self.way})"


def kinds() -> list[Kind]:
    """The matrix's kinds: the first public case of each kind (from ``../shared``), then ours."""
    found: dict[str, Kind] = {}
    for case in load_cases():
        if case["kind"] not in found:
            found[case["kind"]] = Kind(case["kind"], case["id"], "result", case["tool"], case["result"])
    ours = [Kind(name, "defined", "list", spec, OK) for name, spec in LIST_KINDS.items()]
    ours += [Kind(name, "defined", "result", spec, result) for name, (spec, result) in RESULT_KINDS.items()]
    stdio = [replace(kind, way="stdio") for kind in ours if kind.name in STDIO_KINDS]
    stdio += [replace(kind, way="2026-07-28") for kind in ours if kind.name in MODERN_KINDS]
    real = [
        Kind(name, server, "result", {"name": tool}, {}, arguments=arguments)
        for name, (server, tool, arguments) in SERVER_KINDS.items()
    ]
    return [*found.values(), *ours, *stdio, *real]


# -- the information items -------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    """One datum that must reach the model: its label, and the spellings that count as found."""

    label: str
    spellings: tuple[str, ...]
    image: bool = False  # found by its data in the requests after the call (or its source as text)


def _scalar(value: Any) -> Item:
    if isinstance(value, str):
        escaped = json.dumps(value, ensure_ascii=False)[1:-1]
        ascii_escaped = json.dumps(value)[1:-1]
        return Item(value, tuple(dict.fromkeys((value, escaped, ascii_escaped))))
    spelled = json.dumps(value)
    return Item(spelled, (spelled,))


def _json(text: str) -> Any:
    """``text`` parsed, when it is a JSON object or array; else ``None``."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        return None


def _leaves(value: Any) -> Iterator[Item]:
    if isinstance(value, dict | list) and not value:
        yield _scalar(value)  # an empty object or array is the datum itself
    elif isinstance(value, dict):
        for sub in value.values():
            yield from _leaves(sub)
    elif isinstance(value, list):
        for sub in value:
            yield from _leaves(sub)
    elif isinstance(value, str) and isinstance(parsed := _json(value), dict | list):
        yield from _leaves(parsed)
    elif not (isinstance(value, str) and not value.strip()):
        yield _scalar(value)


def _block_items(block: Any) -> Iterator[Item]:
    if not isinstance(block, dict):
        return
    if block.get("type") == "text" and isinstance(block.get("text"), str):
        parsed = _json(block["text"])
        yield from _leaves(parsed if parsed is not None else block["text"])
    elif block.get("type") == "image" and isinstance(block.get("data"), str):
        mime = str(block.get("mimeType"))
        spellings = [block["data"]]
        if mime == "image/svg+xml":
            try:
                spellings.append(base64.b64decode(block["data"]).decode())
            except ValueError:
                pass
        yield Item(f"the {mime} image", tuple(spellings), image=True)
    elif block.get("type") in ("resource_link", "resource"):
        uri = block.get("uri") or (block.get("resource") or {}).get("uri")
        if isinstance(uri, str):
            yield _scalar(uri)


def items_of(result: Mapping[str, Any]) -> list[Item]:
    """The information items of a tool result (see the module's docstring)."""
    found: list[Item] = []
    structured = result.get("structuredContent")
    if structured is not None:
        found += _leaves(structured)
    else:
        content = result.get("content")
        if content is None and isinstance(result.get("toolResult"), dict):  # a legacy envelope
            content = result["toolResult"].get("content")
        for block in content if isinstance(content, list) else []:
            found += _block_items(block)
    return found  # one item per member: two members holding the same value are two items


# -- running a cell --------------------------------------------------------------------------


@dataclass
class Outcome:
    """What the model got in one cell (``status``: ``offered``, ``skipped``: the tool not offered
    but the server's other tool is, ``server lost``: none of its tools, ``hung``: the host did not
    end within :data:`RUN_TIMEOUT`, ``failed``: another :class:`HostFailure`)."""

    status: str
    result: bool = False  # a result of the tool reached the model
    reached: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    text: str | None = None
    error: str | None = None
    seconds: float = 0.0

    def cell(self) -> str:
        """The outcome as the page's table shows it."""
        if self.status != "offered":
            return self.status
        if not self.result:
            return "offered, no result"
        total = len(self.reached) + len(self.missing)
        text = f"{len(self.reached)}/{total}"
        if self.missing:
            text += " (lost: " + ", ".join(_short(label) for label in self.missing) + ")"
        return text


def _short(label: str, width: int = 24) -> str:
    label = " ".join(label.split()).replace("|", "\\|")
    return f"`{label}`" if len(label) <= width else f"`{label[: width - 1]}\u2026`"


def fill(schema: Any) -> dict[str, Any]:
    """A call's arguments made from an input schema: a value of each required property's type."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return {}
    values = {"string": "x", "integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
    arguments: dict[str, Any] = {}
    for name in schema.get("required") or []:
        sub = schema["properties"].get(name)
        kind = sub.get("type") if isinstance(sub, dict) else None
        arguments[name] = values.get(kind if isinstance(kind, str) else "string", "x")
    return arguments


#: What the hosts replace in a tool's name on the model's side (Claude Code: the first; Codex: the second).
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_UNSAFE_DASH = re.compile(r"[^a-zA-Z0-9_]")

Runner = Callable[[McpServer, str, dict[str, Any], Path], ModelView]


def _claude(server: McpServer, tool: str, arguments: dict[str, Any], tmp: Path) -> ModelView:
    # the model fills the call from the schema it was offered (a proxy may rename properties for
    # Claude), with the given arguments where the offered schema has them
    def made(declared: dict[str, Any]) -> dict[str, Any]:
        schema = declared.get("input_schema")
        offered = schema.get("properties") if isinstance(schema, dict) else None
        given = {k: v for k, v in arguments.items() if isinstance(offered, dict) and k in offered}
        return {**fill(schema), **given}

    mock = AnthropicMock(claude_name(server.name, tool), {}, fill=made)
    return run_claude_code(server, tool, arguments, tmp, mock=mock, timeout=RUN_TIMEOUT)


class _CodexMock(ResponsesMock):
    """Codex 0.171.0 offers a tool named with ``-`` under ``_`` (``get-our-id`` as ``get_our_id``):
    the mock calls it by that name (:func:`tests.host_codex.model_name` keeps the ``-``)."""

    def __init__(self, namespace: str, tool: str | None, arguments: Mapping[str, Any]) -> None:
        super().__init__(namespace, tool.replace("-", "_") if tool is not None else None, arguments)


def _codex(server: McpServer, tool: str, arguments: dict[str, Any], tmp: Path) -> ModelView:
    return run_codex(server, tool, arguments, tmp, names=["companion"], mock=_CodexMock, timeout=RUN_TIMEOUT)


def _gemini(server: McpServer, tool: str, arguments: dict[str, Any], tmp: Path) -> ModelView:
    # the model fills the call from the declaration it was offered (a proxy may rename parameters
    # for the Gemini API), with the given arguments where the offered schema has them
    def made(declared: dict[str, Any]) -> dict[str, Any]:
        schema = declared.get("parametersJsonSchema", declared.get("parameters"))
        offered = schema.get("properties") if isinstance(schema, dict) else None
        given = {k: v for k, v in arguments.items() if not isinstance(offered, dict) or k in offered}
        return {**fill(schema), **given}

    class Filling(GeminiMock):
        def __init__(self, tool: str | None, arguments: Mapping[str, Any]) -> None:
            super().__init__(tool, arguments, fill=made)

    return run_gemini_cli(server, tool, arguments, tmp, timeout=RUN_TIMEOUT, mock=Filling)


#: The hosts in the matrix, by name.
HOSTS: dict[str, Runner] = {"claude-code": _claude, "codex": _codex, "gemini-cli": _gemini}
#: Each host's command in ``tests/hosts`` (:func:`tests.host_loop.host_command`).
COMMANDS = {"claude-code": "claude", "codex": "codex", "gemini-cli": "gemini"}


def judge(kind: Kind, view: ModelView) -> Outcome:
    """A cell's outcome from what the model received."""
    name = kind.tool["name"]
    if not {name, _UNSAFE.sub("_", name), _UNSAFE_DASH.sub("_", name)} & set(view.tools):  # as hosts spell it
        return Outcome("skipped" if view.tools else "server lost")
    if view.result is None:
        return Outcome("offered")
    after_call = json.dumps([body for _path, body in view.requests], ensure_ascii=False)
    reached: list[str] = []
    missing: list[str] = []
    left: dict[tuple[str, ...], int] = {}  # per spelling: the occurrences not yet claimed by an item
    for item in items_of(kind.result):
        texts = (view.result, after_call) if item.image else (view.result,)
        if item.spellings not in left:
            left[item.spellings] = max(text.count(spelling) for spelling in item.spellings for text in texts)
        hit = left[item.spellings] > 0  # member by member: each item needs an occurrence of its own
        left[item.spellings] -= hit
        (reached if hit else missing).append(item.label)
    return Outcome("offered", True, reached, missing, view.result)


def _direct_result(url: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """What a plain client gets from the MCP server at ``url`` calling ``tool``: the server's own result."""
    accept = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

    def post(client: httpx.Client, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
        response = client.post(url, json=body, headers={**accept, **headers})
        response.raise_for_status()
        return response

    def message(response: httpx.Response) -> Any:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
            return json.loads(data[-1])
        return response.json()

    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "matrix", "version": "0"}}
    with httpx.Client(timeout=RUN_TIMEOUT) as client:
        opened = post(client, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}, {})
        session = {"mcp-protocol-version": "2025-06-18"}
        if "mcp-session-id" in opened.headers:
            session["mcp-session-id"] = opened.headers["mcp-session-id"]
        post(client, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
        answer = message(post(client, call, session))
    result = answer.get("result")
    assert isinstance(result, dict), f"{url}: {tool} answered {answer}"
    return result


@contextmanager
def _real_server(kind: Kind) -> Iterator[tuple[str, Any]]:
    """A real server's MCP endpoint URL on loopback, and the proxy's rules for it."""
    if kind.source == "server-everything":
        loopback = SHARED / "tools" / "loopback.cjs"  # binds it to 127.0.0.1
        port = free_port()
        everything = ROOT / "tests" / "node" / "node_modules" / "@modelcontextprotocol" / "server-everything"
        command = ["node", "--require", str(loopback), str(everything / "dist" / "index.js"), "streamableHttp"]
        with running(command, port, {"PORT": str(port)}):
            yield f"http://127.0.0.1:{port}/mcp", None
    elif kind.source == "fastmcp":
        with serve(fastmcp_server().http_app(path="/mcp"), lifespan="on") as up:
            yield up + "/mcp", None
    else:  # the demo's Protean upstream behind what the demo runs: the shipped rules
        with serve(protean_server()) as up:
            yield up + "/mcp", protean_rules()


@contextmanager
def _routes(kind: Kind) -> Iterator[dict[str, McpServer]]:
    """The kind's server, directly and through the proxy."""
    if kind.source in SERVER_NAMES:
        with _real_server(kind) as (url, rules), proxy_for(url, rules) as px:
            yield {"direct": McpServer(SERVER, url), "proxy": McpServer(SERVER, px + "/mcp")}
        return
    if kind.way == "stdio":  # tests/stdio_server.py; the wrapper runs the checkout's code (env(1):
        # Gemini CLI drops PYTHONPATH from a server's env)
        plan = {"tools": [kind.tool, COMPANION.tool], "results": {kind.tool["name"]: kind.result, "companion": OK}}
        argv = [sys.executable, str(ROOT / "tests" / "stdio_server.py"), json.dumps(plan)]
        wrapped = ["env", f"PYTHONPATH={ROOT}", EXE, "stdio", "--", *argv]
        yield {"direct": McpServer(SERVER, command=argv), "proxy": McpServer(SERVER, command=wrapped)}
        return
    server = ScriptedServer([ToolSpec(kind.tool, returning(kind.result)), COMPANION], legacy=kind.way == "http")
    with serve(server) as up, proxy_for(up + "/mcp") as px:
        yield {"direct": McpServer(SERVER, up + "/mcp"), "proxy": McpServer(SERVER, px + "/mcp")}


def run_cell(host: str, runner: Runner, kind: Kind, tmp: Path) -> dict[str, Outcome]:
    """One host and one kind, directly and through the proxy (each run in its own folder)."""
    outcomes: dict[str, Outcome] = {}
    arguments = kind.arguments if kind.arguments is not None else fill(kind.tool.get("inputSchema"))
    with _routes(kind) as ways:
        if kind.source in SERVER_NAMES:  # the items of the server's own answer
            kind = replace(kind, result=_direct_result(ways["direct"].url or "", kind.tool["name"], arguments))
        for route in ROUTES:
            start = time.monotonic()
            try:
                view = runner(ways[route], kind.tool["name"], arguments, tmp / host / kind.key / route)
            except HostFailure as failure:
                what = str(failure).splitlines()[0]
                outcome = Outcome("hung" if "did not end within" in what else "failed", error=what)
            else:
                outcome = judge(kind, view)
            outcome.seconds = round(time.monotonic() - start, 2)
            outcomes[route] = outcome
    return outcomes


@dataclass
class Matrix:
    """A run of the matrix: outcomes by host, kind and route."""

    hosts: list[str]
    kinds: list[Kind]
    cells: dict[tuple[str, str], dict[str, Outcome]]
    seconds: float

    def less(self) -> dict[tuple[str, str], str]:
        """The cells where the model gets less through the proxy than directly, with why."""
        found: dict[tuple[str, str], str] = {}
        for key, outcome in self.cells.items():
            if why := shows_less(outcome["direct"], outcome["proxy"]):
                found[key] = why
        return found

    def more(self) -> dict[tuple[str, str], str]:
        """The cells where the model gets more through the proxy than directly."""
        found: dict[tuple[str, str], str] = {}
        for key, outcome in self.cells.items():
            if why := gain(outcome["direct"], outcome["proxy"]):
                found[key] = why
        return found


def shows_less(direct: Outcome, proxy: Outcome) -> str | None:
    """Why the model gets less in ``proxy`` than in ``direct`` (``None``: not less). Not offered
    what was is issue 39's (the listing); fewer items of the result is issue 40's."""
    if direct.status == "offered" and proxy.status != "offered":
        return f"issue 39: offered directly, {proxy.status} through the proxy"
    if direct.result and not proxy.result:
        return "issue 40: the result reached the model directly, not through the proxy"
    lost = list((Counter(direct.reached) - Counter(proxy.reached)).elements())  # member by member
    if lost:
        return "issue 40: lost through the proxy: " + ", ".join(_short(label) for label in lost)
    return None


def run_matrix(tmp: Path | None = None, workers: int = WORKERS, only: set[str] | None = None) -> Matrix:
    """Run every cell (``only``: those kinds), ``workers`` host runs at a time."""
    runners = HOSTS
    every = [kind for kind in kinds() if only is None or kind.key in only]
    jobs = [(host, kind) for kind in every for host in runners]
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="host-matrix-") as scratch:
        base = tmp if tmp is not None else Path(scratch)
        with ThreadPoolExecutor(workers) as pool:
            futures = {(host, kind.key): pool.submit(run_cell, host, runners[host], kind, base) for host, kind in jobs}
            cells = {key: future.result() for key, future in futures.items()}
    return Matrix(list(runners), every, cells, round(time.monotonic() - start, 1))


# -- the page --------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    """The hosts' versions as ``tests/hosts/package.json`` pins them."""
    pinned = json.loads((ROOT / "tests" / "hosts" / "package.json").read_text(encoding="utf-8"))["dependencies"]
    return {
        "claude-code": pinned["@anthropic-ai/claude-code"],
        "codex": pinned["@openai/codex"],
        "gemini-cli": pinned["@google/gemini-cli"],
    }


NAMES = {"claude-code": "Claude Code", "codex": "Codex", "gemini-cli": "Gemini CLI"}


def table(matrix: Matrix) -> str:
    """The table: a row per kind, a direct and a proxy column per host."""
    head = ["Fault kind", "Tool"]
    for host in matrix.hosts:
        head += [f"{NAMES[host]}: direct", f"{NAMES[host]}: proxy"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for kind in matrix.kinds:
        source = SERVER_NAMES.get(kind.source, kind.source)
        row = [f"`{kind.name}`" + ("" if kind.source == "defined" else f" ({source})"), f"`{kind.tool['name']}`"]
        if kind.way == "stdio":
            row[0] += ", over stdio"
        elif kind.way != "http":
            row[0] += f", a {kind.way}-only server"
        for host in matrix.hosts:
            outcome = matrix.cells[(host, kind.key)]
            row += [outcome["direct"].cell(), outcome["proxy"].cell()]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def differences(matrix: Matrix) -> str:
    """The lists of cells where the proxy shows the model less, and more, than directly."""
    less = matrix.less()
    more = matrix.more()
    out = ["## Where the proxy shows the model less\n\n"]
    if less:
        out += [f"- **{NAMES[host]}, `{kind}`** (bug): {why}.\n" for (host, kind), why in sorted(less.items())]
    else:
        out.append("None.\n")
    out += ["\n## Where the proxy shows the model more\n\n"]
    out += [f"- {NAMES[host]}, `{kind}`: {why}.\n" for (host, kind), why in sorted(more.items())] or ["None.\n"]
    out.append("\n## What the model still misses through the proxy\n\n")
    short = [
        f"- {NAMES[host]}, `{kind}`: {routes['proxy'].cell()}."
        + (f" {HOST_CAUSES[(host, kind)]}.\n" if (host, kind) in HOST_CAUSES else "\n")
        for (host, kind), routes in sorted(matrix.cells.items())
        if routes["proxy"].status != "offered" or not routes["proxy"].result or routes["proxy"].missing
    ]
    out += short or ["Nothing.\n"]
    return "".join(out)


def gain(direct: Outcome, proxy: Outcome) -> str | None:
    """What the model gets through the proxy and not directly (``None``: nothing)."""
    if direct.status != "offered" and proxy.status == "offered":
        return f"{direct.status} directly, offered through the proxy"
    if proxy.result and not direct.result:
        return "the result reaches the model only through the proxy"
    gained = list((Counter(proxy.reached) - Counter(direct.reached)).elements())
    if gained:
        return "gained through the proxy: " + ", ".join(_short(label) for label in gained)
    return None


def page(matrix: Matrix, date: str) -> str:
    """The docs page of one run."""
    pinned = versions()
    host_list = ", ".join(f"{NAMES[host]} {pinned[host]}" for host in matrix.hosts)
    cells = len(matrix.hosts) * len(matrix.kinds) * len(ROUTES)
    return f"""# What each host's model sees

Hosts: {host_list} (pinned in `tests/hosts/package.json`).
Generated on {date} by `{COMMAND}` ({cells} cells in {matrix.seconds:.0f} s); the raw run is
`results/hosts-model-view.json` (not committed). `tests/test_host_matrix.py` runs the same matrix and fails when this
table no longer matches it.

Each row is one fault kind: the first public fault case of that kind (its id in parentheses, replayed
from the team's fault cases), or a kind defined in `tests/host_matrix.py`. Each real host is run offline
against a mock of its model API, once against the scripted MCP server directly and once through the proxy
in front of it (Streamable HTTP), and the mock records what the model received. The server serves the
tool under test and a plain companion tool. The rows marked "over stdio" run the server as a command
instead: directly the host starts the server's own command, through the proxy `mcp-normalizer stdio --
CMD`. The rows marked "a 2026-07-28-only server" are served by a server that speaks only that era (it
refuses `initialize`): through the proxy the era bridge answers a legacy host's handshake and speaks
2026-07-28 upstream. The last rows are real servers, the server's name in parentheses:
`@modelcontextprotocol/server-everything` in its Streamable HTTP mode, a FastMCP server with the usual
faults (a `null` in a declared string, a naive date-time, a tool that raises), and the demo's Protean
upstream behind the shipped rules; their items are those of the result the server gives a plain client
directly in the same run, and the host sees all of the server's tools.

A cell reads:

- `k/n`: the tool was offered and its result reached the model with `k` of the result's `n`
  information items (an error's problem members, every leaf datum of `structuredContent`, the text
  of a result without it, an image's data or source; member by member: two members holding the
  same value need two occurrences); the items lost are named.
- `skipped`: the host did not offer the tool to the model (its companion was offered).
- `server lost`: no tool of the server reached the model.
- `offered, no result`: the tool was offered, and no result of it reached the model.
- `hung`: the host did not end within {RUN_TIMEOUT:.0f} s (it was killed); `failed`: it ended without reaching
  the model, or sent the mock a request it does not know (the raw run has the host's words).

## The matrix

{table(matrix)}
{differences(matrix)}"""


def raw(matrix: Matrix, date: str) -> dict[str, Any]:
    """The run as JSON: every cell's outcome (the result text as the model read it)."""
    return {
        "date": date,
        "command": COMMAND,
        "seconds": matrix.seconds,
        "hosts": {host: versions()[host] for host in matrix.hosts},
        "kinds": [
            {"kind": k.key, "source": k.source, "side": k.side, "way": k.way, "tool": k.tool["name"]}
            for k in matrix.kinds
        ],
        "cells": [
            {"host": host, "kind": kind, **{route: asdict(outcome) for route, outcome in routes.items()}}
            for (host, kind), routes in matrix.cells.items()
        ],
    }


def main() -> None:
    """Run the matrix; write the page and the raw run."""
    logging.disable(logging.INFO)  # the proxy's rewrite log: the page says what reached the model
    matrix = run_matrix()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    PAGE.write_text(page(matrix, date), encoding="utf-8")
    RAW.parent.mkdir(exist_ok=True)
    RAW.write_text(json.dumps(raw(matrix, date), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(matrix.cells) * len(ROUTES)} cells in {matrix.seconds} s: wrote {PAGE} and {RAW}")


if __name__ == "__main__":
    main()
