"""Issue 40, the rules alone: what reaches a host's model of a result with a spurious
``outputSchema`` (an image no host could decode) and of a result whose ``null`` the proxy drops,
for each client (``tests/test_host_reaches.py`` runs the real hosts).

- ``vacuous_structured_content`` and ``promote_text_json`` supply no ``structuredContent`` for Codex
  (it validates none and would show it in place of the content); every other client gets it.
- ``host_content``: a PNG, JPEG, GIF or WebP image whose bytes give no size becomes a text naming it
  with its data as a ``data:`` URI, for Claude Code and Codex alone (``image_undecodable``).
- ``text_mirror``: for Claude Code, which reads no text block beside ``structuredContent``, that text
  goes as an embedded resource, and the values the conformance repairs replaced are named in one.
"""

from __future__ import annotations

import base64
import struct
import zlib
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.engine.normalize import Normalizer, Outcome
from mcp_normalizer.engine.rules.clients import profile_for
from mcp_normalizer.engine.rules.host_content import ORIGINAL_BLOCK_KEY, image_size
from mcp_normalizer.engine.rules.host_faults import CONSTRAINTS, IMAGE_UNDECODABLE
from mcp_normalizer.engine.rules.text_mirror import ORIGINAL_VALUES_URI

pytestmark = pytest.mark.pure

ERA = "2025-11-25"
SIGNATURE = "iVBORw0KGgo="  # the 8-byte PNG signature alone (Cocoanetics/SwiftMCP#176's image)
SPURIOUS = {  # SwiftMCP's generated outputSchema for a tool returning an image
    "name": "loupe_capture",
    "inputSchema": {"type": "object", "properties": {}},
    "outputSchema": {
        "type": "object",
        "description": "Image content",
        "properties": {"data": {"type": "string"}, "mimeType": {"type": "string"}},
    },
}
CLIENTS = ("claude-code", "codex-mcp-client", "gemini-cli-mcp-client", "mcp")


def call(tool: dict[str, Any], result: dict[str, Any], client: str | None, limit: int | None = None) -> Outcome:
    """``result`` of ``tool`` as the shipped rules hand it to ``client`` (``None``: no clientInfo)."""
    config = NormalizerConfig.shipped()
    if limit is not None:
        config = replace(config, settings=replace(config.settings, mirror_max_bytes=limit))
    normalizer = Normalizer(config)
    profile = profile_for({"name": client} if client is not None else None)
    entry = normalizer.tools_list({"tools": [tool]}, ERA, profile).entries[0]
    return normalizer.tools_call(result, tool["name"], entry, ERA, 200, client=profile)


def image(data: str, mime: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "data": data, "mimeType": mime}


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x00\xff\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


GIF = b"GIF89a\x0c\x00\x07\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00;"  # 12 x 7
JPEG = (  # APP0, then the frame header SOF2 (progressive): 640 x 480
    b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x01\x00H\x00H\x00\x00"
    b"\xff\xc2\x00\x11\x08\x01\xe0\x02\x80\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01\xff\xd9"
)
WEBP_LOSSLESS = base64.b64decode("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==")  # 1 x 1
WEBP_EXTENDED = b"RIFF\x16\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x10\x00\x00\x00\x7f\x02\x00\xdf\x01\x00"  # 640 x 480
WEBP_LOSSY = b"RIFF\x18\x00\x00\x00WEBPVP8 \x0c\x00\x00\x00\x00\x00\x00\x9d\x01\x2a\x80\x02\xe0\x01"  # 640 x 480


@pytest.mark.parametrize(
    ("raw", "size"),
    [
        (png(3, 2), (3, 2)),
        (GIF, (12, 7)),
        (JPEG, (640, 480)),
        (WEBP_LOSSLESS, (1, 1)),
        (WEBP_EXTENDED, (640, 480)),
        (WEBP_LOSSY, (640, 480)),
        (base64.b64decode(SIGNATURE), None),  # the signature alone
        (png(3, 2)[:20], None),  # cut inside IHDR
        (png(3, 2)[:16] + bytes(8), None),  # a side of 0
        (JPEG[:20], None),  # no frame header
        (b"GIF89a\x01", None),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", None),
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", None),
    ],
)
def test_the_size_is_read_from_each_raster_types_header_and_a_cut_file_has_none(
    raw: bytes, size: tuple[int, int] | None
) -> None:
    assert image_size(raw) == size
    block = image(base64.b64encode(raw).decode())
    assert CONSTRAINTS[IMAGE_UNDECODABLE].violates(block) is (size is None)  # the oracle, written apart, agrees


@given(st.binary(max_size=64), st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp"]))
def test_the_oracle_and_the_repair_agree_on_any_bytes(raw: bytes, mime: str) -> None:
    block = image(base64.b64encode(raw).decode(), mime)
    assert CONSTRAINTS[IMAGE_UNDECODABLE].violates(block) is (image_size(raw) is None)


def test_codex_gets_no_structured_content_supplied_and_learns_nothing_every_other_client_gets_one() -> None:
    text = {"type": "text", "text": "captured caf\u00e9 12.5"}
    for client in (*CLIENTS, None):
        for content in ([image(base64.b64encode(png(3, 2)).decode())], [image(SIGNATURE), text]):
            outcome = call(SPURIOUS, {"content": content}, client)
            if client == "codex-mcp-client":  # it shows structuredContent in place of content, validates none
                assert "structuredContent" not in outcome.result, outcome.result
                assert outcome.learned is None
            else:
                assert outcome.result["structuredContent"] in ({}, {"result": text["text"]}), (client, outcome.result)


def test_an_image_no_host_can_decode_reaches_claude_code_and_codex_as_its_source_and_no_one_else_is_touched() -> None:
    result = {"content": [image(SIGNATURE)]}
    source = f"data:image/png;base64,{SIGNATURE}"
    for client in CLIENTS:
        outcome = call(SPURIOUS, result, client)
        out = outcome.result
        if client == "claude-code":  # beside the {} its validator needs: an embedded resource
            assert out["structuredContent"] == {}
            (named, mirror) = out["content"]
            assert named["type"] == "resource" and named["_meta"][ORIGINAL_BLOCK_KEY] == result["content"][0]
            assert named["resource"]["uri"] == "urn:dev.mcp-normalizer:content/0"
            assert named["resource"]["mimeType"] == "text/plain" and source in named["resource"]["text"]
            assert mirror == {"type": "text", "text": "{}"}  # the text mirror as every client gets it
        elif client == "codex-mcp-client":  # a text, no structuredContent
            assert out == {"content": [out["content"][0]]}
            assert out["content"][0]["type"] == "text" and source in out["content"][0]["text"]
            assert "OpenAI Codex cannot decode" in out["content"][0]["text"]
            assert out["content"][0]["_meta"][ORIGINAL_BLOCK_KEY] == result["content"][0]
        else:  # the image as the server sent it
            assert out["content"][0] == result["content"][0] and out["structuredContent"] == {}, (client, out)
    records = {r.rewrite.rule for r in call(SPURIOUS, result, "claude-code").records}
    assert {"host_content", "vacuous_structured_content", "text_mirror"} <= records
    assert "promote_text_json" not in records  # the proxy's own text is no text of the server's to promote


def test_past_mirror_max_bytes_the_text_names_the_image_and_keeps_its_data_in_meta() -> None:
    cut = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(300)).decode()
    out = call(SPURIOUS, {"content": [image(cut)]}, "codex-mcp-client", limit=100).result
    (block,) = out["content"]
    assert cut not in block["text"] and "its data is kept in this block's _meta" in block["text"]
    assert block["_meta"][ORIGINAL_BLOCK_KEY]["data"] == cut


NULL_TOOL = {
    "name": "get_item",
    "inputSchema": {"type": "object", "properties": {}},
    "outputSchema": {
        "type": "object",
        "properties": {"foo": {"type": "string"}, "n": {"type": "integer"}, "p": {"type": "string"}},
    },
}


def test_a_dropped_null_is_named_for_claude_code_alone_and_a_coerced_value_is_not() -> None:
    sent = {"foo": None, "n": "12", "p": 12.5}
    result = {"content": [{"type": "text", "text": '{"foo":null,"n":"12","p":12.5}'}], "structuredContent": sent}
    for client in CLIENTS:
        out = call(NULL_TOOL, result, client).result
        resources = [b for b in out["content"] if b["type"] == "resource"]
        if client == "codex-mcp-client":
            assert out == result  # as the server sent it: it validates none
            continue
        assert out["structuredContent"] == {"n": 12, "p": "12.5"}  # conforming: foo dropped, n and p coerced
        assert out["_meta"]["dev.mcp-normalizer/original-values"] == {"/foo": None, "/n": "12", "/p": 12.5}
        if client == "claude-code":  # only the null says what the structuredContent no longer does
            (named,) = resources
            assert named["resource"]["uri"] == ORIGINAL_VALUES_URI
            assert named["resource"]["text"].endswith(': {"/foo":null}'), named
        else:
            assert not resources, (client, out)


def test_no_resource_for_an_mcp_apps_tool_or_past_the_limit() -> None:
    apps = {**NULL_TOOL, "_meta": {"ui": {"resourceUri": "ui://item/view"}}}
    result = {"content": [], "structuredContent": {"foo": None}}
    out = call(apps, result, "claude-code").result
    assert not [b for b in out["content"] if b["type"] == "resource"], out
    out = call(NULL_TOOL, result, "claude-code", limit=5).result
    assert not [b for b in out["content"] if b["type"] == "resource"], out


RUNTIMES = {"name": "runtimes", "inputSchema": {"type": "object", "properties": {}}}


def test_numbers_no_double_holds_are_named_exactly_for_claude_code_alone() -> None:
    structured = {
        "count": 3,
        "bytes": 12345678901234567890,
        "load": 12.5,
        "tiny": 1e-7,
        # (-2**60 is a double, but printed back as its shortest digits: -1152921504606847000)
        "rows": [{"a/b": 2**53 + 1}, {"id": -(2**60) - 1, "pow": -(2**60)}],
        "safe": 2**53,
    }
    result = {"content": [{"type": "text", "text": "3 runtimes, 1 failed."}], "structuredContent": structured}
    for client in CLIENTS:
        out = call(RUNTIMES, result, client).result
        assert out["structuredContent"] == structured, client  # the value as the server sent it, always
        resources = [b for b in out["content"] if b["type"] == "resource"]
        if client != "claude-code":
            assert not resources, (client, out)
            continue
        (named,) = resources
        assert named["resource"]["uri"] == "urn:dev.mcp-normalizer:exact-numbers"
        exact = '{"/bytes":12345678901234567890,"/rows/0/a~1b":9007199254740993,'
        exact += '"/rows/1/id":-1152921504606846977,"/rows/1/pow":-1152921504606846976}'
        assert named["resource"]["text"].endswith(": " + exact), named
