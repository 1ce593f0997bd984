"""Which era each side speaks, in the access log, the rewrite log and the spans (issue 41 item 5), for a
bridged session (a legacy client, a 2026-07-28-only upstream) and for a native one (the same era both
sides)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_normalizer.app import create_app
from mcp_normalizer.config import Settings
from mcp_normalizer.demo.clients import run_python
from mcp_normalizer.demo.upstream import ScriptedServer, protean_tools

from .support import capture_rewrites, serve

pytestmark = pytest.mark.wire

STEPS: list[dict[str, Any]] = [{"op": "listTools"}, {"op": "callTool", "name": "protean.whoami", "arguments": {}}]


@contextmanager
def proxy(upstream: ScriptedServer) -> Iterator[tuple[str, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with serve(upstream) as up:
        settings = Settings(upstream=up + "/mcp")
        config = settings.load_config()
        config = dataclasses.replace(config, proxy=dataclasses.replace(config.proxy, access_log=True))
        with serve(create_app(settings, config=config, tracer_provider=provider), proxy=config.proxy) as px:
            yield px + "/mcp", exporter
    provider.shutdown()


@pytest.mark.anyio
@pytest.mark.parametrize("legacy", [False, True], ids=["bridged", "native"])
async def test_each_side_s_era_is_in_the_access_log_the_rewrite_log_and_the_spans(legacy: bool) -> None:
    with (
        capture_rewrites("mcp_normalizer.access") as access,
        capture_rewrites() as rewrites,
        proxy(ScriptedServer(protean_tools(), legacy=legacy)) as (url, exporter),
    ):
        record = await run_python(url, STEPS)
    assert all(step["ok"] for step in record["steps"]), record
    lines = [line for line in access.lines if line["event"] == "access" and line["method"] == "POST"]
    assert {line["rpc_method"] for line in lines} >= {"initialize", "tools/list", "tools/call"}
    upstream = "2025-11-25" if legacy else "2026-07-28"
    for line in lines:
        if line["rpc_method"] != "initialize":  # (initialize names its version in the body)
            assert line["era"] == "2025-11-25", line
        assert line["upstream_era"] == upstream, line
    made = rewrites.rewrites(method="tools/call", tool="protean.whoami")
    assert made and all(line["era"] == "2025-11-25" for line in made)
    assert all(line.get("upstream_era") == (None if legacy else "2026-07-28") for line in made)
    spans = [s for s in exporter.get_finished_spans() if s.name.startswith("tools/call")]
    assert spans
    for span in spans:
        attributes = dict(span.attributes or {})
        assert attributes["mcp.protocol.version"] == "2025-11-25"
        assert attributes.get("mcp.upstream.protocol.version") == (None if legacy else "2026-07-28")
