"""Issue 40 with the real hosts in the loop: what the proxy gives Claude Code, Codex and Gemini CLI
of two results their models lost through it (``docs/hosts-model-view.md``), and what they got before.

- ``spurious_output_schema`` (the public case ``swiftmcp-image-output-schema``, Cocoanetics/SwiftMCP#176):
  a tool with an ``outputSchema`` that returns an image and no ``structuredContent``; the image is
  the 8-byte PNG signature alone. Directly Claude Code and Gemini CLI fail the call (no
  ``structuredContent``) and Codex shows "image content omitted". Through the proxy each model gets
  the image or its source: Gemini CLI as an image; Claude Code (which cannot decode it) a text
  naming it with its data as a ``data:`` URI, in an embedded resource beside the ``structuredContent: {}``
  its validator needs (it reads no text block beside one); Codex the same text, and no
  ``structuredContent`` (it validates none, and one would hide the content from its model: a real
  PNG beside an added ``{}`` never reached Codex's model through the proxy).
- ``null_for_non_nullable`` (``fastmcp-openapi-null-string``, PrefectHQ/fastmcp#1241): ``{"foo": null}``
  where the schema says string. Through the proxy the optional ``null`` is dropped so that Claude
  Code's validator accepts the result, and its model, which reads ``structuredContent`` only, got
  ``{}``: now an embedded resource names the server's value (``{"/foo":null}``).

Each test runs the host against a scripted server serving the case's tool, directly and through the
proxy (:mod:`tests.host_loop`), and asserts on what the mock model received.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from mcp_normalizer.demo.clients import run_python
from mcp_normalizer.demo.upstream import ScriptedServer, ToolSpec, returning

from .host_claude import run_claude_code
from .host_codex import run_codex
from .host_gemini import run_gemini_cli
from .host_loop import McpServer, ModelView
from .support import load_cases, proxy_for, serve

pytestmark = pytest.mark.wire

SERVER = "demo"


def case(case_id: str) -> dict[str, Any]:
    """The public fault case ``case_id`` (from ``../shared/cases/public.json``)."""
    (found,) = [c for c in load_cases() if c["id"] == case_id]
    return found


@contextmanager
def routes(tool: dict[str, Any], result: dict[str, Any]) -> Iterator[tuple[McpServer, McpServer, str]]:
    """A scripted server serving ``tool`` with ``result``: the host's way to it directly and
    through the proxy, and the proxy's MCP URL."""
    with serve(ScriptedServer([ToolSpec(tool, returning(result))])) as up, proxy_for(up + "/mcp") as px:
        yield McpServer(SERVER, up + "/mcp"), McpServer(SERVER, px + "/mcp"), px + "/mcp"


def run(host: str, server: McpServer, tool: str, tmp: Path) -> ModelView:
    if host == "claude-code":
        return run_claude_code(server, tool, {}, tmp)
    if host == "codex":
        return run_codex(server, tool, {}, tmp)
    return run_gemini_cli(server, tool, {}, tmp)


def after_call(view: ModelView) -> str:
    """Every request the model received, as one JSON text (an image a host sends beside the text)."""
    return json.dumps([body for _path, body in view.requests], ensure_ascii=False)


IMAGE = case("swiftmcp-image-output-schema")
SIGNATURE = IMAGE["result"]["content"][0]["data"]  # "iVBORw0KGgo=": the PNG signature, no header after it


@pytest.mark.parametrize("host", ["claude-code", "codex", "gemini-cli"])
def test_an_image_of_a_tool_with_a_spurious_output_schema_reaches_each_model_through_the_proxy(
    host: str, tmp_path: Path
) -> None:
    assert SIGNATURE == "iVBORw0KGgo="
    with routes(IMAGE["tool"], IMAGE["result"]) as (direct, proxied, _url):
        before = run(host, direct, "loupe_capture", tmp_path / "direct")
        after = run(host, proxied, "loupe_capture", tmp_path / "proxy")
    assert before.result is not None and SIGNATURE not in after_call(before), before.result  # lost directly
    assert after.result is not None, after.log
    if host == "gemini-cli":  # as an image (inlineData beside the function response)
        assert f"[inlineData image/png: {SIGNATURE}]" in after.result, after.result
        return
    source = f"data:image/png;base64,{SIGNATURE}"
    assert source in after.result, after.result  # its source, in what the model reads
    assert "Image could not be processed" not in after.result and "image content omitted" not in after.result
    if host == "claude-code":  # an embedded resource beside the structuredContent its validator needs
        assert after.result.startswith("[Resource from demo at urn:dev.mcp-normalizer:content/0] "), after.result
        assert after.result.endswith("\n{}"), after.result
        assert "Tool loupe_capture has an output schema but did not return structured content" in before.result
    else:  # Codex: the text, no structuredContent to hide it
        assert "image content omitted because it could not be processed" in before.result, before.result
        assert after.result.split("Output:\n", 1)[1].startswith("[an image/png image of 8 bytes"), after.result


def png(width: int, height: int) -> str:
    """A real PNG, base64 (8-bit RGB, red)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    raw = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    return base64.b64encode(raw).decode()


def test_a_real_png_and_text_beside_an_output_schema_reach_codex_through_the_proxy_as_directly(tmp_path: Path) -> None:
    """Codex shows its model ``structuredContent`` in place of ``content``: the ``{"result": "captured \u00e9"}``
    the proxy used to add (the schema requires nothing) hid the image; it validates none, so the
    proxy now adds none for it."""
    data = png(3, 2)
    result = {
        "content": [
            {"type": "image", "data": data, "mimeType": "image/png"},
            {"type": "text", "text": "captured \u00e9 12.5"},
        ]
    }
    with routes(IMAGE["tool"], result) as (direct, proxied, _url):
        views = [run_codex(way, "loupe_capture", {}, tmp_path / name) for name, way in (("d", direct), ("p", proxied))]
    for view in views:
        assert f"data:image/png;base64,{data}" in after_call(view), view.result  # the image itself, as input_image
        assert view.result is not None and "captured \u00e9 12.5" in view.result, view.result
        assert '{"result"' not in view.result


NULL = case("fastmcp-openapi-null-string")


@pytest.mark.anyio
async def test_an_optional_null_the_proxy_drops_reaches_claude_codes_model_through_the_proxy(tmp_path: Path) -> None:
    assert NULL["result"]["structuredContent"] == {"foo": None}
    with routes(NULL["tool"], NULL["result"]) as (direct, proxied, url):
        before = run_claude_code(direct, "get_item", {}, tmp_path / "direct")
        after = run_claude_code(proxied, "get_item", {}, tmp_path / "proxy")
        steps: list[dict[str, Any]] = [{"op": "listTools"}, {"op": "callTool", "name": "get_item", "arguments": {}}]
        sdk = await run_python(url, steps)  # an SDK client through the same proxy
    assert before.result == "Structured content does not match the tool's output schema: data/foo must be string"
    assert after.result is not None, after.log
    named, shown = after.result.split("\n")
    assert named.startswith("[Resource from demo at urn:dev.mcp-normalizer:original-values] "), named
    assert named.endswith(': {"/foo":null}'), named  # the server's value, where it was
    assert shown == "{}"  # the conforming structuredContent its validator accepted
    value = sdk["steps"][1]["value"]  # the SDK client: no resource, the value in _meta as before
    assert [block["type"] for block in value["content"]] == ["text"], value
    assert value["structuredContent"] == {} and value["_meta"]["dev.mcp-normalizer/original-values"] == {"/foo": None}


RUNTIMES = {"name": "runtimes", "description": "Lists runtimes.", "inputSchema": {"type": "object"}}
SAYS_LESS = {
    "content": [{"type": "text", "text": "3 runtimes, 1 failed."}],
    "structuredContent": {
        "count": 3,
        "failed": {"id": "r-17", "load": 12.5, "zone": "\u6771\u4eac"},
        "bytes": 12345678901234567890,
    },
}


def test_an_integer_past_2_53_reaches_claude_codes_model_exactly_through_the_proxy(tmp_path: Path) -> None:
    """Claude Code reads ``structuredContent`` with JSON.parse: directly its model gets the integer
    rounded (and not the text); through the proxy an embedded resource also names it as the server wrote it."""
    with routes(RUNTIMES, SAYS_LESS) as (direct, proxied, _url):
        before = run_claude_code(direct, "runtimes", {}, tmp_path / "direct")
        after = run_claude_code(proxied, "runtimes", {}, tmp_path / "proxy")
    rounded = '{"count":3,"failed":{"id":"r-17","load":12.5,"zone":"\u6771\u4eac"},"bytes":12345678901234567000}'
    assert before.result == rounded, before.result
    assert after.result is not None, after.log
    named, shown = after.result.split("\n")
    assert named.startswith("[Resource from demo at urn:dev.mcp-normalizer:exact-numbers] "), named
    assert named.endswith(': {"/bytes":12345678901234567890}'), named
    assert shown == rounded  # the structuredContent as before
