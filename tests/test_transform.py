"""The sans-IO transformer on its own: stalls keep order, oversized events pass through untouched."""

from __future__ import annotations

import gc
import inspect
import math
from typing import Any

import orjson
import pytest

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.engine.audit import AuditLog
from mcp_normalizer.engine.exchange import Exchange
from mcp_normalizer.engine.normalize import Normalizer
from mcp_normalizer.engine.scopes import ScopeStore
from mcp_normalizer.engine.transform import ResponseTransformer
from mcp_normalizer.wire.jsonrpc import PendingRequest

from .support import capture_rewrites, feed_all, pump

pytestmark = pytest.mark.pure

TOOL = {"name": "t", "inputSchema": {"type": "object"}}
PROGRESS = b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}\n\n'
RESPONSE = (
    b'data: {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"x"}],"structuredContent":{}}}\n\n'
)
SSE = [(b"content-type", b"text/event-stream")]
DRAFT07 = "http://json-schema.org/draft-07/schema#"


def transformer(max_event_bytes: int = 64 * 1024 * 1024) -> tuple[ResponseTransformer, Exchange, Normalizer]:
    normalizer = Normalizer(NormalizerConfig())
    exchange = Exchange({("n", 1): PendingRequest("tools/call", tool="t")}, None, "s", ScopeStore().state("s"))
    t = ResponseTransformer(exchange, normalizer, AuditLog("test"), slice_seconds=0, max_event_bytes=max_event_bytes)
    t.start(200, SSE)
    return t, exchange, normalizer


def test_a_response_waiting_for_its_tool_schema_holds_only_itself_and_what_follows() -> None:
    t, exchange, normalizer = transformer()
    exchange.fetching.add("t")
    out = t.feed(PROGRESS + RESPONSE[:30])
    assert out == PROGRESS and not t.stalled
    assert t.feed(RESPONSE[30:] + b": after\n\n") == b""
    assert t.stalled
    assert t.finish() == b""  # still waiting
    exchange.state.catalog.learn(normalizer.tools_list({"tools": [TOOL]}, None).entries, first_page=True)
    exchange.fetching.clear()
    rest = pump(t, t.resume())
    assert not t.stalled
    first, second = rest.split(b"\n\n", 1)
    assert "structuredContent" not in orjson.loads(first.removeprefix(b"data: "))["result"]  # rewritten
    assert second == b": after\n\n"


def test_an_oversized_event_ends_inspection_but_every_byte_goes_out_in_order() -> None:
    t, exchange, normalizer = transformer(max_event_bytes=64)
    exchange.state.catalog.learn(normalizer.tools_list({"tools": [TOOL]}, None).entries, first_page=True)
    huge = b"data: " + b"x" * 200 + b"\n\n"
    out = feed_all(t, PROGRESS, huge[:100], huge[100:] + RESPONSE)
    assert out == PROGRESS + huge + RESPONSE  # the response after the oversized event is not rewritten


def test_non_200_and_encoded_responses_pass_through() -> None:
    t, _, _ = transformer()
    t.start(400, [(b"content-type", b"application/json")])
    assert t.mode == "pass" and t.feed(b"{not json") == b"{not json"
    t.start(200, [(b"content-type", b"text/event-stream"), (b"content-encoding", b"gzip")])
    assert t.mode == "pass"


@pytest.mark.parametrize("depth", [2_000, 4_000])
def test_a_tool_nested_too_deep_to_read_passes_untouched_and_the_others_are_repaired(depth: int) -> None:
    """One hostile tool (deeper than the C decoder recurses) in a small ``tools/list`` isolates to
    itself: it is passed on byte for byte and logged as a fault; the tools beside it are repaired
    and learned."""
    deep = b'{"name":"deep","inputSchema":{"type":"object","default":' + b"[" * depth + b"]" * depth + b"}}"
    draft07 = {"name": "a", "inputSchema": {"type": "object"}, "outputSchema": {"$schema": DRAFT07, "type": "object"}}
    other = {**draft07, "name": "b"}
    body = b'{"jsonrpc":"2.0","id":1,"result":{"tools":[%s,%s,%s]}}' % (
        orjson.dumps(draft07),
        deep,
        orjson.dumps(other),
    )
    normalizer = Normalizer(NormalizerConfig())
    exchange = Exchange({("n", 1): PendingRequest("tools/list")}, "2025-11-25", "s", ScopeStore().state("s"))
    t = ResponseTransformer(exchange, normalizer, AuditLog("test"), slice_seconds=0)
    t.start(200, [(b"content-type", b"application/json")])
    with capture_rewrites() as log:
        out = feed_all(t, body)
    assert deep in out
    first, last = out.split(deep)
    tools_a = orjson.loads(first.split(b"[", 1)[1].rstrip(b","))
    tools_b = orjson.loads(last.lstrip(b",").split(b"]}}")[0])
    assert "$schema" not in tools_a["outputSchema"] and "$schema" not in tools_b["outputSchema"]
    assert sorted(exchange.state.catalog.tools) == ["a", "b"]
    faults = [line for line in log.lines if line["event"] == "fault"]
    assert [line["pointers"] for line in faults] == [["/tools/1"]]


DEEP = b"[" * 3_000 + b"]" * 3_000
CALL_FAULT = b'"result":{"content":[{"type":"text","text":"x"}],"_meta":null,"structuredContent":{}}'
HEAD = b'{"jsonrpc":"2.0","id":1,' + CALL_FAULT


def json_transformer() -> tuple[ResponseTransformer, Exchange]:
    normalizer = Normalizer(NormalizerConfig())
    exchange = Exchange({("n", 1): PendingRequest("tools/call", tool="t")}, None, "s", ScopeStore().state("s"))
    exchange.state.catalog.learn(normalizer.tools_list({"tools": [TOOL]}, None).entries, first_page=True)
    t = ResponseTransformer(exchange, normalizer, AuditLog("test"), slice_seconds=0)
    t.start(200, [(b"content-type", b"application/json")])
    return t, exchange


def test_a_deep_message_that_is_not_valid_json_passes_untouched() -> None:
    """Read without recursion, a deep message is still checked whole: data after its end, a missing
    comma, a mismatched or extra bracket make it pass byte for byte, never rewritten or cut."""
    head = b'{"jsonrpc":"2.0","id":1,' + CALL_FAULT + b',"x":'
    bodies = [
        head + DEEP + b'}{"jsonrpc":"2.0","id":2,"result":{}}',  # a second message after the first
        head + DEEP + b'"y":1}',  # a missing comma
        head + b"[" * 3_000 + b"]" * 3_001 + b',"y":2}',  # one closer too many
        head + b"[" * 3_000 + b"}" * 3_001,  # mismatched closers
        head + DEEP + b',"y":NaN}',
    ]
    for body in bodies:
        t, _ = json_transformer()
        with capture_rewrites() as log:
            assert feed_all(t, body) == body
        assert log.lines == []
    t, _ = json_transformer()  # the same, well formed: rewritten around the deep member
    good = head + DEEP + b"}"
    out = feed_all(t, good)
    assert out != good and DEEP in out and b'"_meta":null' not in out


@pytest.mark.parametrize(
    "body",
    [
        HEAD + b',"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}",  # 100,000 levels
        HEAD + b',"x":' + b"[" * 5_000 + b"]" * 5_000 + b"}",  # past MAX_DEPTH
        HEAD + b',"pad":"' + b"x" * 70_000 + b'","x":' + DEEP + b"}",  # past DEEP_BYTES
    ],
    ids=["100000-levels", "past-max-depth", "past-deep-bytes"],
)
def test_a_message_nested_past_the_bounds_passes_through_unread(body: bytes) -> None:
    """Reading 100,000 levels with a loop held every session for seconds: past the depth or size the
    proxy reads, the message goes out byte for byte, unread (issue 22)."""
    t, _ = json_transformer()
    with capture_rewrites() as log:
        assert feed_all(t, body) == body
    assert log.lines == []


def test_bytes_that_are_not_utf8_beside_a_fault_mean_no_rewrite_and_no_log_line() -> None:
    t, _ = json_transformer()
    body = b'{"jsonrpc":"2.0","id":1,"x":"\xff",' + CALL_FAULT + b"}"
    with capture_rewrites() as log:
        assert feed_all(t, body) == body
    assert log.lines == []


def test_a_tools_list_with_an_unreadable_sibling_member_still_learns_its_tools() -> None:
    normalizer = Normalizer(NormalizerConfig())
    exchange = Exchange({("n", 1): PendingRequest("tools/list")}, None, "s", ScopeStore().state("s"))
    t = ResponseTransformer(exchange, normalizer, AuditLog("test"), slice_seconds=0)
    t.start(200, [(b"content-type", b"application/json")])
    body = b'{"jsonrpc":"2.0","id":1,"result":{"tools":[%s],"_meta":{"x":%s}}}' % (orjson.dumps(TOOL), DEEP)
    assert feed_all(t, body) == body
    assert list(exchange.state.catalog.tools) == ["t"]


def test_a_byte_order_mark_counts_only_at_the_start_of_the_stream() -> None:
    """Browsers skip a BOM only at the stream's start; later, ``\\ufeffdata`` is no data field, so the
    event is nothing to them: the proxy must neither rewrite it nor act on it."""
    t, exchange, normalizer = transformer()
    exchange.state.catalog.learn(normalizer.tools_list({"tools": [TOOL]}, None).entries, first_page=True)
    late = b"\xef\xbb\xbf" + RESPONSE
    notice = b'\xef\xbb\xbfdata: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n\n'
    assert feed_all(t, b": first\n\n" + late + notice) == b": first\n\n" + late + notice
    assert exchange.state.catalog.get("t") is not None


def many_tools(count: int) -> bytes:
    tools = [
        {
            "name": f"t{i}",
            "description": f'región {i} — "q"\n',
            "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object", "properties": {"s": {"type": "string", "nullable": i % 3 == 0}}},
        }
        for i in range(count)
    ]
    return orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": tools, "nextCursor": "n"}})


def list_through(
    normalizer: Normalizer, body: bytes, slice_seconds: float
) -> tuple[bytes, int, Exchange, list[dict[str, Any]]]:
    """The list as the client gets it, how many times the transformer said ``busy``, the exchange, the log."""
    exchange = Exchange({("n", 1): PendingRequest("tools/list")}, "2025-11-25", "s", ScopeStore().state("s"))
    t = ResponseTransformer(exchange, normalizer, AuditLog("test"), slice_seconds=slice_seconds)
    t.start(200, [(b"content-type", b"application/json")])
    pauses = 0
    with capture_rewrites() as log:
        out = t.feed(body) + t.finish()
        while t.busy:
            assert out == b""  # nothing of a JSON body goes out before all of it is done
            pauses += 1
            out += t.resume()
    return out, pauses, exchange, log.lines


def test_a_long_tools_list_is_worked_on_in_slices_with_the_same_result() -> None:
    body = many_tools(300)
    whole, pauses, whole_exchange, whole_log = list_through(Normalizer(NormalizerConfig()), body, math.inf)
    assert pauses == 0
    sliced, pauses, exchange, log = list_through(Normalizer(NormalizerConfig()), body, 0)
    assert pauses >= 300  # a pause after every tool at least
    assert sliced == whole != body and log == whole_log and len(log) == 100
    assert (
        list(exchange.state.catalog.tools) == list(whole_exchange.state.catalog.tools) == [f"t{i}" for i in range(300)]
    )
    tools = orjson.loads(sliced)["result"]["tools"]
    assert tools[0]["outputSchema"]["properties"]["s"]["type"] == ["string", "null"]
    assert tools[0]["description"] == 'región 0 — "q"\n' and orjson.loads(sliced)["result"]["nextCursor"] == "n"


def test_a_tools_list_seen_before_is_answered_from_what_the_rules_made_of_it() -> None:
    normalizer = Normalizer(NormalizerConfig())
    ruled: list[str] = []  # the tools the rules ran on
    list_tool = normalizer.list_tool

    def counting(tool: Any, *rest: Any) -> Any:
        ruled.append(tool["name"])
        return list_tool(tool, *rest)

    normalizer.list_tool = counting  # type: ignore[method-assign,assignment]
    body = many_tools(50)
    first, _, first_exchange, first_log = list_through(normalizer, body, math.inf)
    assert len(ruled) == 50
    again, _, exchange, log = list_through(normalizer, body, math.inf)
    assert len(ruled) == 50  # not one tool through the rules again
    assert again == first and log == first_log  # the same bytes and the same log lines
    for name, entry in exchange.state.catalog.tools.items():
        assert entry is first_exchange.state.catalog.tools[name]  # one entry per distinct tool
    changed = body.replace(b'"t7"', b'"t7b"')
    third, _, exchange, _ = list_through(normalizer, changed, math.inf)
    assert ruled[50:] == ["t7b"]  # only the changed tool is new
    assert (
        b'"t7b"' in third and exchange.state.catalog.get("t7b") is not None and exchange.state.catalog.get("t7") is None
    )


def test_the_collector_is_on_between_slices_and_a_dropped_job_is_freed() -> None:
    """Other sessions run between slices with the cyclic collector on; a transformer abandoned
    mid-message (its client gone) is closed by the middleware, and nothing of its work stays."""
    exchange = Exchange({("n", 1): PendingRequest("tools/list")}, "2025-11-25", "s", ScopeStore().state("s"))
    t = ResponseTransformer(exchange, Normalizer(NormalizerConfig()), AuditLog("test"), slice_seconds=0)
    t.start(200, [(b"content-type", b"application/json")])
    assert t.feed(many_tools(500)) + t.finish() == b"" and t.busy
    assert gc.isenabled()
    t.resume()
    assert t.busy and gc.isenabled()
    job = t._job
    t.close()
    assert t._job is None and job is not None and inspect.getgeneratorstate(job) == "GEN_CLOSED"
    assert gc.isenabled()
