"""The envelope rules and SSE framing in the sans-IO transformer (fault kinds ``jsonrpc_batch_response``,
``jsonrpc_id_mismatch``, ``null_optional_fields`` (``nextCursor``) and ``sse_framing``, ``cases/faults.md``).

Results carry field data (decimals as spelled, an exponent, a 24-digit integer, unicode, escapes,
nulls at depth): members the rules do not name must come out byte for byte.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_normalizer.engine.rules import Mode
from mcp_normalizer.engine.transform import ResponseTransformer
from mcp_normalizer.wire.jsoncodec import split_object
from mcp_normalizer.wire.jsonrpc import PendingRequest, envelope_of, inspect_request, read_envelope
from mcp_normalizer.wire.sse import SSESplitter, parse_event

from .support import FIELD_RESULT, JSON_HEADERS, PROPERTY, VALUES, capture_rewrites, feed_all, pump, transformer

pytestmark = pytest.mark.pure

SSE = [(b"content-type", b"text/event-stream")]


def test_error_null_beside_result_is_dropped_and_the_result_kept_byte_for_byte() -> None:
    body = b'{"jsonrpc":"2.0","id":1,"result":' + FIELD_RESULT + b',"error":null}'
    with capture_rewrites() as log:
        out = feed_all(transformer(), body)
    assert out == b'{"jsonrpc":"2.0","id":1,"result":' + FIELD_RESULT + b"}"
    assert log.rewrites(rule="jsonrpc_envelope", pointers=["/error"], method="ping", jsonrpc_id=1)


def test_result_null_beside_an_error_is_dropped() -> None:
    error = b'{"code":-32602,"message":"bad \\u00e9","data":{"x":1.10}}'
    out = feed_all(transformer(), b'{"jsonrpc":"2.0","result":null,"id":1,"error":' + error + b"}")
    assert out == b'{"jsonrpc":"2.0","id":1,"error":' + error + b"}"


def test_a_one_element_array_answering_a_single_request_is_unwrapped() -> None:
    message = b'{"jsonrpc":"2.0","id":1,"result":' + FIELD_RESULT + b"}"
    with capture_rewrites() as log:
        out = feed_all(transformer("tools/call"), b"[" + message + b"]")
    assert out == message
    assert log.rewrites(rule="jsonrpc_envelope", action="unwrapped a one-message batch", jsonrpc_id=1)


def test_the_wazuh_shape_array_and_error_null_is_repaired_in_one_pass() -> None:
    """gensecaihq/Wazuh-MCP-Server#59: ``[{"jsonrpc","id","result",...,"error":null}]``."""
    inner = b'{"jsonrpc":"2.0","id":"a-1","result":{"protocolVersion":"2025-06-18","capabilities":{}},"error":null}'
    out = feed_all(transformer("initialize", "a-1"), b"[" + inner + b"]")
    assert orjson.loads(out) == {
        "jsonrpc": "2.0",
        "id": "a-1",
        "result": {"protocolVersion": "2025-06-18", "capabilities": {}},
    }


def test_a_batch_post_keeps_its_array_and_ids() -> None:
    """2025-03-26 batching: the array answers an array; nothing is unwrapped or stamped."""
    body = b'[{"jsonrpc":"2.0","id":1,"result":{}}]'
    assert feed_all(transformer(batch=True), body) == body


@pytest.mark.parametrize(
    ("rid", "answered"),
    [("1", b"1"), (1, b'"1"'), ("7", b"7.0"), (2**40, b'"1099511627776"'), (3, None), ("req-\u00e9", b"null")],
)
def test_a_response_with_the_requests_id_in_another_type_or_none_gets_it_verbatim(
    rid: Any, answered: bytes | None
) -> None:
    head = b'{"jsonrpc":"2.0",' + (b'"id":' + answered + b"," if answered is not None else b"")
    with capture_rewrites() as log:
        out = feed_all(transformer("tools/list", rid), head + b'"result":{"tools":[]}}')
    message = orjson.loads(out)
    assert message["id"] == rid and type(message["id"]) is type(rid)
    assert message["result"] == {"tools": []}
    assert log.rewrites(rule="jsonrpc_id", pointers=["/id"], jsonrpc_id=rid)


@pytest.mark.parametrize(
    ("rid", "answered", "content_type"),
    [
        (5, b"0", JSON_HEADERS),  # every id answered as 0 (radareorg/radare2-mcp#68): 0 may be another request's
        ("req-\u00e9", b'"req-e"', JSON_HEADERS),
        (2**40, b"1.0", SSE),
        ("1", b"1.5", SSE),
        (7, b"true", JSON_HEADERS),
    ],
)
def test_a_response_with_another_requests_id_is_refused_never_stamped(
    rid: Any, answered: bytes, content_type: list[tuple[bytes, bytes]]
) -> None:
    reply = b'{"jsonrpc":"2.0","id":' + answered + b',"result":{"content":[],"balance":12.50}}'
    if content_type is SSE:
        reply = b"event: message\ndata: " + reply + b"\n\n"
    t = transformer("tools/call", rid, content_type=content_type)
    with capture_rewrites() as log:
        out = feed_all(t, reply)
    assert out == b"" and t.foreign is not None and "which no request of this POST has" in t.foreign
    assert t.unanswered() == [rid]  # the caller answers it with an error
    assert not log.rewrites(rule="jsonrpc_id")


def test_the_id_is_stamped_on_an_error_response_too_and_a_second_reply_is_refused() -> None:
    error = b'event: message\ndata: {"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"x"}}\n\n'
    out = feed_all(transformer("tools/call", "abc", content_type=SSE), error)
    assert [orjson.loads(parse_event(e).data or b"")["id"] for e in SSESplitter().feed(out)] == ["abc"]
    reply = b'event: message\ndata: {"jsonrpc":"2.0","id":"abc","result":{"n":12.50}}\n\n'
    t = transformer("ping", "abc", content_type=SSE)
    assert feed_all(t, reply, reply) == reply  # the first goes out as it came; the copy never does
    assert t.foreign == 'a second response to request id "abc"' and t.unanswered() == []


def test_server_requests_and_notifications_on_the_stream_keep_their_ids() -> None:
    stream = (
        b'data: {"jsonrpc":"2.0","id":"srv-1","method":"sampling/createMessage","params":{}}\n\n'
        b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}\n\n'
    )
    assert feed_all(transformer("tools/call", 9, content_type=SSE), stream) == stream


@pytest.mark.parametrize("method", ["tools/list", "resources/list", "resources/templates/list", "prompts/list"])
def test_next_cursor_null_is_dropped_from_every_list(method: str) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"result":{"items":[{"n":1.10,"s":"\\u00e9"}],"nextCursor":null,"x":2.5E-3}}'
    out = feed_all(transformer(method), body)
    assert out == b'{"jsonrpc":"2.0","id":1,"result":{"items":[{"n":1.10,"s":"\\u00e9"}],"x":2.5E-3}}'


def test_next_cursor_is_kept_where_it_is_a_cursor_or_not_a_list() -> None:
    page = b'{"jsonrpc":"2.0","id":1,"result":{"resources":[],"nextCursor":"c2"}}'
    assert feed_all(transformer("resources/list"), page) == page
    other = b'{"jsonrpc":"2.0","id":1,"result":{"contents":[],"nextCursor":null}}'
    assert feed_all(transformer("resources/read"), other) == other


def test_report_mode_logs_and_changes_nothing() -> None:
    off = {"jsonrpc_envelope": Mode.REPORT, "jsonrpc_id": Mode.REPORT}
    body = b'[{"jsonrpc":"2.0","id":"1","result":{},"error":null}]'
    with capture_rewrites() as log:
        out = feed_all(transformer(modes=off), body)
    assert out == body
    assert {line["rule"] for line in log.rewrites(applied=False)} == {"jsonrpc_envelope", "jsonrpc_id"}


# -- SSE framing ----------------------------------------------------------------------------------


def feed(t: ResponseTransformer, chunk: bytes) -> bytes:
    """What ``t`` sends for ``chunk``, run to the end of its work (every step is a slice here)."""
    return pump(t, t.feed(chunk))


def test_an_event_without_its_blank_line_goes_out_at_once_framed() -> None:
    """The upstream keeps the stream open after ``data: <message>\\n``: the client gets it now."""
    t = transformer("initialize", content_type=SSE)
    data = b'{"jsonrpc":"2.0","id":1,"result":' + FIELD_RESULT + b"}"
    with capture_rewrites() as log:
        out = feed(t, b"data: " + data + b"\n")
    assert out == b"event: message\ndata: " + data + b"\n\n"
    assert log.rewrites(rule="sse_framing", jsonrpc_id=1)
    assert feed(t, b"\n") == b""  # the blank line it lacked, late: dropped
    assert feed(t, b": ping\n\n") == b": ping\n\n"
    assert t.finish() == b""


def test_events_with_no_blank_lines_between_them_each_go_out_in_order() -> None:
    """Frames with no ``event:`` and no blank line between them (vercel/ai#16002): each data line
    that holds a whole message is an event of its own, in order."""
    t = transformer("tools/call", content_type=SSE)
    progress = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}'
    result = b'{"jsonrpc":"2.0","id":1,"result":{"content":[]}}'
    out = feed(t, b"data: " + progress + b"\r\ndata: " + result[:20])
    assert out == b"event: message\r\ndata: " + progress + b"\r\n\r\n"
    assert feed(t, result[20:] + b"\r\n") == b"event: message\r\ndata: " + result + b"\r\n\r\n"
    assert feed(t, b"\r\n") == b""


def test_data_that_is_not_one_whole_message_line_waits_for_its_blank_line_as_before() -> None:
    """Pretty-printed JSON over several data lines, or text: the upstream's own framing decides."""
    t = transformer("ping", content_type=SSE)
    assert feed(t, b'data: {"jsonrpc":"2.0",\n') == b""
    assert feed(t, b'data: "id":1,"result":{}}\n') == b""
    assert feed(t, b"\n") == b'data: {"jsonrpc":"2.0",\ndata: "id":1,"result":{}}\n\n'
    t = transformer("tools/call", content_type=SSE)
    assert feed(t, b"data: hello\n") == b""
    assert feed(t, b"\n") == b"data: hello\n\n"


def test_a_well_framed_stream_is_byte_identical_when_its_blank_line_comes_with_it() -> None:
    stream = b'id: 7\r\nevent: message\r\ndata: {"jsonrpc":"2.0","id":1,"result":' + FIELD_RESULT + b"}\r\n\r\n"
    assert feed_all(transformer("tools/call", content_type=SSE), stream) == stream


@PROPERTY
@given(
    values=st.lists(VALUES, min_size=1, max_size=4),
    cuts=st.lists(st.integers(0, 600), max_size=10),
    eol=st.sampled_from([b"\n", b"\r\n"]),
    terminated=st.booleans(),
)
def test_framing_in_any_chunks_loses_reorders_and_duplicates_nothing(
    values: list[Any], cuts: list[int], eol: bytes, terminated: bool
) -> None:
    """Any chunking, blank lines present or not: the client's SSE parser sees every message once,
    in order, as valid JSON (the last one too, though no blank line ever comes)."""
    messages = [{"jsonrpc": "2.0", "method": "notifications/message", "params": {"v": v}} for v in values]
    body = b"".join(b"data: " + orjson.dumps(m) + eol + (eol if terminated else b"") for m in messages)
    t = transformer("tools/call", content_type=SSE)
    out, start = bytearray(), 0
    for cut in [*sorted(set(cuts)), len(body)]:
        out += feed(t, body[start : max(cut, start)])
        start = max(cut, start)
    splitter = SSESplitter()  # the client's view: only dispatched events count; the stream stays open
    got = [parse_event(block).data for block in splitter.feed(bytes(out))]
    assert [orjson.loads(d) for d in got if d is not None] == messages


def test_the_framing_rule_off_leaves_the_stream_as_it_came() -> None:
    t = transformer("tools/call", modes={"sse_framing": Mode.OFF}, content_type=SSE)
    assert feed(t, b'data: {"jsonrpc":"2.0","id":1,"result":{}}\n') == b""


def test_every_request_of_a_post_is_found_and_only_a_single_request_post_names_a_sole_one() -> None:
    one = inspect_request(b'{"jsonrpc":"2.0","id":"x","method":"ping"}', [])
    many = inspect_request(b'[{"jsonrpc":"2.0","id":"x","method":"ping"},{"jsonrpc":"2.0","id":2,"method":"a/b"}]', [])
    assert one is not None and one.sole == ("s", "x") and one.pending == {("s", "x"): PendingRequest("ping")}
    assert many is not None and many.sole is None and set(many.pending) == {("s", "x"), ("n", 2)}
    assert inspect_request(b'{"jsonrpc":"2.0","id":1,"result":{}}', []) is None  # the client's own response
    assert inspect_request(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', []) is None


# -- found by an attack on the rules above ---------------------------------------------------------


def test_a_streams_bom_stays_first_when_its_first_event_goes_out_early() -> None:
    t = transformer("tools/call", content_type=SSE)
    out = feed(t, b'\xef\xbb\xbfdata: {"jsonrpc":"2.0","id":1,"result":{"content":[]}}\n')
    assert out.startswith(b"\xef\xbb\xbfevent: message\n")
    assert [parse_event(block).data for block in SSESplitter().feed(out)] == [
        b'{"jsonrpc":"2.0","id":1,"result":{"content":[]}}'
    ]


def test_an_event_of_many_comment_lines_is_passed_as_it_came_and_the_next_is_still_sent_early() -> None:
    t = transformer("tools/call", content_type=SSE)
    comments = b":\n" * 20_000
    out = b"".join(feed(t, comments[i : i + 4096]) for i in range(0, len(comments), 4096))
    out += feed(t, b"\n")
    assert out == comments + b"\n"
    late = feed(t, b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}\n')
    assert late.startswith(b"event: message\n")


def test_whitespace_data_lines_after_an_early_event_add_no_event() -> None:
    """``data: {msg}`` then ``data:`` then the blank line: the upstream's data is the message
    plus a newline (still that JSON value); the client gets one event, not an empty second one."""
    t = transformer("ping", content_type=SSE)
    message = b'{"jsonrpc":"2.0","id":1,"result":{}}'
    out = feed(t, b"data: " + message + b"\ndata:\n") + feed(t, b"\n")
    assert [parse_event(block).data for block in SSESplitter().feed(out)] == [message]


def test_a_stray_response_before_the_real_one_is_refused_not_stamped_over_it() -> None:
    """A reply with another request's id (a late duplicate of an earlier exchange's) is never
    delivered: the stream stops there, and the caller answers the POST's request with an error."""
    stray = b'data: {"jsonrpc":"2.0","id":7,"result":{"content":[],"n":7}}\n\n'
    mine = b'data: {"jsonrpc":"2.0","id":1,"result":{"content":[],"n":1}}\n\n'
    t = transformer("ping", 1, content_type=SSE)
    assert feed_all(t, stray, mine) == b"" and t.foreign is not None and t.unanswered() == [1]
    body = b'[{"jsonrpc":"2.0","id":7,"result":{"n":7}},{"jsonrpc":"2.0","id":1,"result":{"n":1}}]'
    t = transformer("ping", 1)
    assert feed_all(t, body) == b"" and t.foreign is not None and t.hold_start  # (a 502 instead)


def test_a_response_matched_by_position_waits_only_for_the_streams_end() -> None:
    t = transformer("ping", 1, content_type=SSE)
    stray = b'data: {"jsonrpc":"2.0","id":"1","result":{}}\n\n'
    progress = b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}\n\n'
    assert feed(t, stray) == b"" and feed(t, progress) == b""  # held, and what follows it: order kept
    out = pump(t, t.finish())
    assert out == b'data: {"jsonrpc":"2.0","id":1,"result":{}}\n\n' + progress


def test_lone_surrogates_are_repaired_in_notifications_and_server_requests_too() -> None:
    notice = b'data: {"jsonrpc":"2.0","method":"notifications/message","params":{"data":"cut \\ud83d"}}\n\n'
    request = b'data: {"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"x":"\\udc00"}}\n\n'
    out = feed_all(transformer("tools/call", content_type=SSE), notice, request)
    assert out == notice.replace(b"\\ud83d", b"\\ufffd") + request.replace(b"\\udc00", b"\\ufffd")


@pytest.mark.parametrize(
    ("method", "body", "sent", "record"),
    [
        (
            "ping",
            b'{"jsonrpc":"2.0","id":1,"result":{"n":1.10},"error":null}',
            b'{"jsonrpc":"2.0","id":1,"result":{"n":1.10}}',
            (
                "jsonrpc_envelope",
                "dropped error: null beside result",
                ["/error"],
                "never both (JSON-RPC 2.0 section 5); error was null",
            ),
        ),
        (
            "ping",
            b'{"jsonrpc":"2.0","id":1,"result":null,"error":{"code":1,"message":"m"}}',
            b'{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}',
            ("jsonrpc_envelope", "dropped result: null beside error", ["/result"], "result was null"),
        ),
        (
            "tools/list",
            b'{"jsonrpc":"2.0","id":1,"result":{"tools":[],"nextCursor":null}}',
            b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}',
            ("null_cursor", "dropped nextCursor: null", ["/result/nextCursor"], "null means no further page"),
        ),
        (
            "ping",
            b'[{"jsonrpc":"2.0","id":1,"result":{}}]',
            b'{"jsonrpc":"2.0","id":1,"result":{}}',
            ("jsonrpc_envelope", "unwrapped a one-message batch", [""], "not an array (JSON-RPC 2.0 section 6)"),
        ),
        (
            "ping",
            b'{"jsonrpc":"2.0","result":{}}',
            b'{"id":1,"jsonrpc":"2.0","result":{}}',  # a missing id goes first, as it came from no member
            ("jsonrpc_id", "stamped the request's id", ["/id"], "one-request POST answers that request but had no id"),
        ),
        (
            "ping",
            b'{"jsonrpc":"2.0","id":"1","result":{}}',
            b'{"jsonrpc":"2.0","id":1,"result":{}}',
            ("jsonrpc_id", "stamped the request's id", ["/id"], 'but had id "1"'),
        ),
    ],
)
def test_each_envelope_repair_logs_its_rule_action_pointer_and_reason(
    method: str, body: bytes, sent: bytes, record: tuple[str, str, list[str], str]
) -> None:
    """The log line is the product's account of a change: the rule's name (what a rule file turns
    off), the action, the pointer and why, for each envelope repair."""
    rule, action, pointers, reason = record
    with capture_rewrites() as log:
        assert feed_all(transformer(method), body) == sent
    [line] = log.rewrites()
    assert (line["rule"], line["action"], line["pointers"]) == (rule, action, pointers)
    assert reason in line["reason"]


def test_a_long_id_is_cut_to_40_bytes_in_the_reason_and_a_matching_id_logs_nothing() -> None:
    rid = "r" * 60
    with capture_rewrites() as log:
        out = feed_all(transformer("ping", rid), b'{"jsonrpc":"2.0","id":null,"result":{}}')
        assert orjson.loads(out)["id"] == rid
        assert feed_all(transformer("ping", rid), b'{"jsonrpc":"2.0","id":"' + rid.encode() + b'","result":{}}')
    [line] = log.rewrites()
    assert line["reason"].endswith("but had id null")
    with capture_rewrites() as log:
        feed_all(transformer("ping", 1), b'{"jsonrpc":"2.0","id":"' + b"1" * 60 + b'","result":{}}')
    assert not log.rewrites(rule="jsonrpc_id")  # another value: refused, never stamped


@pytest.mark.parametrize(
    ("body", "sent"),
    [
        (b'{"jsonrpc":"2.0","id":1,"result":null}', None),  # null is a result like any other
        (b'{"jsonrpc":"2.0","id":1,"error":null}', None),  # nothing beside it to keep: as it came
        # both null: the result (null, a valid one) is the answer; the error beside it is dropped
        (b'{"jsonrpc":"2.0","id":1,"result":null,"error":null}', b'{"jsonrpc":"2.0","id":1,"result":null}'),
    ],
)
def test_a_null_result_stays_and_a_null_error_goes_only_beside_a_result(body: bytes, sent: bytes | None) -> None:
    with capture_rewrites() as log:
        assert feed_all(transformer(), body) == (sent or body)
    assert [line["pointers"] for line in log.rewrites(rule="jsonrpc_envelope")] == ([["/error"]] if sent else [])


def test_an_envelope_repair_and_a_result_repair_both_apply_to_one_response() -> None:
    """The envelope rules hand the result on: ``error: null`` dropped and ``nextCursor: null`` too."""
    body = b'{"jsonrpc":"2.0","id":1,"result":{"tools":[],"nextCursor":null,"n":2.5E-3},"error":null}'
    with capture_rewrites() as log:
        out = feed_all(transformer("tools/list"), body)
    assert out == b'{"jsonrpc":"2.0","id":1,"result":{"tools":[],"n":2.5E-3}}'
    assert sorted(line["rule"] for line in log.rewrites()) == ["jsonrpc_envelope", "null_cursor"]


def test_an_array_of_two_messages_answering_a_single_request_keeps_both() -> None:
    """Only a one-message array is unwrapped: a response and a notification in one array both go on."""
    body = (
        b'[{"jsonrpc":"2.0","id":1,"result":{"n":1.10}},'
        b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"\\u00e9"}}]'
    )
    with capture_rewrites() as log:
        assert feed_all(transformer("ping", 1), body) == body
    assert not log.rewrites(rule="jsonrpc_envelope")


_SPACE = st.sampled_from(["", " ", "\n\t", "\r\n  "])
_MEMBER_VALUES = {
    "jsonrpc": st.just('"2.0"'),
    "id": st.sampled_from(["1", "-0", "1.50", '"a\\u00e9"', "null", "123456789012345678901234"]),
    "method": st.sampled_from(['"tools/list"', '"notifications/progress"', "7"]),
    "result": st.sampled_from(['{"tools": [ {"name":"t"} ] , "nextCursor": null}', "{}", "[1,2]", "null", '"x"']),
    "error": st.sampled_from(['{"code": -32603, "message": "caf\\u00e9"}', "null"]),
    "params": st.sampled_from(['{"progress": 12.5}', "[]"]),
    "_meta": st.sampled_from(['{"k": [null, {"d": 1E-7}]}']),
}


@st.composite
def _messages(draw: st.DrawFn) -> bytes:
    names = draw(st.lists(st.sampled_from(sorted(_MEMBER_VALUES)), unique=True, max_size=len(_MEMBER_VALUES)))
    members = [f'{draw(_SPACE)}"{name}"{draw(_SPACE)}:{draw(_SPACE)}{draw(_MEMBER_VALUES[name])}' for name in names]
    return ("{" + ",".join(members) + draw(_SPACE) + "}").encode()


@PROPERTY
@given(raw=_messages())
def test_a_message_read_member_by_member_reads_as_the_one_pass_reader_reads_it(raw: bytes) -> None:
    """The member-by-member reader (:func:`envelope_of`, what a message nested too deep for the
    one-pass decoder is read with) gives the envelope :func:`read_envelope` reads in one pass."""
    assert envelope_of(split_object(raw)) == read_envelope(raw)
