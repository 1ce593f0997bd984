"""The ids the proxy mints or maps, on the wire (issue 37): a stateless client's progress tokens of
any JSON type are the proxy's own at the shared stdio child and come back as written, so another
client's never land in its stream; and one rule matches a reply's id to its request on every path
(the stdio upstream, sessionful and stateless, and the stdio wrapper). The server is
:mod:`tests.stdio_server` (``js_numbers``: it reads ``1.0`` as ``1``, as JavaScript's
``JSON.parse`` and pydantic's lax mode do; ``answer_ids``: it answers a call under the id
spellings the call names)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import orjson
import pytest

from mcp_normalizer.wire.jsonrpc import answering, id_key, mint_id, response_to, same_value

from .support import HEADERS
from .test_stdio_upstream import call, events, open_session, post, stdio_proxy
from .test_stdio_wrapper import INITIALIZE, fixture, plan_with, raw_session, wrapped

pytestmark = pytest.mark.wire

MODERN = {**HEADERS, "mcp-protocol-version": "2026-07-28"}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
_META_TEXT = orjson.dumps(META)
_TOKEN = re.compile(rb'"progressToken":(.*?),"progress":')


def stateless_call(rid: bytes, token: bytes, tool: str = "echo") -> bytes:
    """A 2026-07-28 ``tools/call`` written by hand: its id and progress token spelled ``rid`` and
    ``token`` exactly (a float stays ``1.0``)."""
    meta = _META_TEXT[:-1] + b',"progressToken":' + token + b"}"
    params = b'{"name":"' + tool.encode() + b'","arguments":{},"_meta":' + meta + b"}"
    return b'{"jsonrpc":"2.0","id":' + rid + b',"method":"tools/call","params":' + params + b"}"


class Streams:
    """SSE streams of stateless calls, each one's event data (bytes) as it came."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http, self.url = http, url
        self.seen: dict[str, list[bytes]] = {}
        self.ended: set[str] = set()

    def start(self, tg: anyio.abc.TaskGroup, name: str, body: bytes) -> None:
        """Open the stream of the call ``body`` (``name``) in ``tg``."""
        self.seen[name] = []
        tg.start_soon(self._read, name, body)

    async def _read(self, name: str, body: bytes) -> None:
        async with self.http.stream("POST", self.url, content=body, headers=MODERN) as stream:
            assert stream.status_code == 200
            async for line in stream.aiter_lines():
                if line.startswith("data:"):
                    self.seen[name].append(line[5:].strip().encode())
        self.ended.add(name)

    async def release(self) -> None:
        """Call ``release`` (it answers every held call) until every stream has ended: a call not
        yet at the server when one release went is answered by the next."""
        with anyio.fail_after(30):
            while set(self.seen) - self.ended:
                body = orjson.dumps(call("r\u00e9lease", "release", _meta=META))
                assert events(await self.http.post(self.url, content=body, headers=MODERN))[0]["id"] == "r\u00e9lease"
                await anyio.sleep(0.05)

    def progressed(self) -> int:
        return sum(b'"notifications/progress"' in data for datas in self.seen.values() for data in datas)

    async def until(self, progressed: int, *, guard: bool = True) -> None:
        """Wait until ``progressed`` progress notifications have reached the streams, whichever
        (at most 30 s: then a failure when ``guard``, else the test goes on to show where they went)."""
        with anyio.fail_after(30) if guard else anyio.move_on_after(30):
            while self.progressed() < progressed:
                await anyio.sleep(0.01)


def token_of(data: bytes) -> bytes:
    """The ``progressToken`` of a progress notification, as its bytes on the wire."""
    found = _TOKEN.search(data)
    assert found is not None, data
    return found.group(1)


@pytest.mark.anyio
async def test_another_stateless_clients_float_tokens_never_reach_a_clients_stream() -> None:
    """Issue 37, major 1: B writes its tokens ``1.0``, ``2.0`` ...; the server reads them as ``1``,
    ``2`` ..., which the proxy once minted as the shared child's ids (and tokens) of the calls in
    flight, A's among them, so B's progress went to A's streams under A's tokens. Now each reaches
    its own stream, its token exactly as its client wrote it."""
    plan = plan_with(progress_on="echo", js_numbers=True)
    a_calls = {"a1": (1, b'"a\\u00e9 1"'), "a2": (2, b"12")}
    b_calls = {f"b{n}": (n, b"%d.0" % n) for n in range(1, 7)}
    with stdio_proxy(fixture(plan)) as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            streams = Streams(http, url)
            async with anyio.create_task_group() as tg:
                for n, (name, (rid, token)) in enumerate(a_calls.items(), start=1):
                    streams.start(tg, name, stateless_call(b"%d" % rid, token))
                    await streams.until(n)  # A's calls are in flight (each progressed)
                for name, (rid, token) in b_calls.items():
                    streams.start(tg, name, stateless_call(b"%d" % rid, token))
                # every call at the server before any is released (where B's progress went is the test's)
                await streams.until(len(a_calls) + len(b_calls), guard=False)
                await streams.release()
    seen = streams.seen
    tokens = {
        name: [token_of(data) for data in datas if b'"notifications/progress"' in data] for name, datas in seen.items()
    }
    assert tokens == {name: [token] for name, (_, token) in {**a_calls, **b_calls}.items()}  # its own, once
    for name, (rid, token) in {**a_calls, **b_calls}.items():
        progress, result = seen[name]  # its own progress and its result: nothing of another's
        assert b'"notifications/progress"' in progress and token_of(progress) == token, (name, seen)
        assert orjson.loads(progress)["params"]["message"] == "half way: 12.50 \u2713"
        assert orjson.loads(result)["id"] == rid and orjson.loads(result)["result"]["content"][0]["text"] == "released"


@pytest.mark.anyio
async def test_a_progress_token_of_any_json_type_goes_to_the_server_as_the_proxys_and_comes_back_as_written() -> None:
    """Tokens MCP does not allow (a decimal, a boolean, an object, ``null``) and those it does, a
    big integer and an escaped string among them: the server sees only tokens the proxy minted
    (strings no client can guess), and each client gets its own back byte for byte."""
    plan = plan_with(progress_on="echo", js_numbers=True)
    tokens = [
        b"12.50",
        b"true",
        b'{"r\\u00e9":[1,"2"]}',
        b"null",
        b"1180591620717411303424",
        b'"\\u00e9 \\"x\\""',
        b"-0",
    ]
    with stdio_proxy(fixture(plan)) as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            streams = Streams(http, url)
            async with anyio.create_task_group() as tg:
                for n, token in enumerate(tokens, start=1):
                    streams.start(tg, str(n), stateless_call(str(n).encode(), token))
                await streams.release()
    for n, token in enumerate(tokens, start=1):
        progress, result = streams.seen[str(n)]
        assert token_of(progress) == token and orjson.loads(result)["id"] == n, streams.seen


def test_the_proxys_ids_are_strings_no_one_guesses() -> None:
    minted = [mint_id("request") for _ in range(200)]
    assert len(set(minted)) == 200 and all(isinstance(m, str) for m in minted)
    assert all(m.startswith("mcp-normalizer-request-") and len(m) > len("mcp-normalizer-request-") + 16 for m in minted)
    assert len({m.rsplit("-", 1)[0] for m in minted}) == 200  # a random part in each, not one per process


@pytest.mark.parametrize(
    ("value", "key", "names"),
    [
        (1, ("n", 1), True),
        ("q\u00e9", ("s", "q\u00e9"), True),
        (2**70, ("n", 2**70), True),
        ("1", ("n", 1), True),  # the field's fault (python-sdk#961): the same id in the other type
        (1, ("s", "1"), True),
        (7.0, ("n", 7), True),
        (7.0, ("s", "7"), True),
        ("1180591620717411303424", ("n", 2**70), True),
        (" 1", ("n", 1), False),  # never whitespace
        ("1 ", ("n", 1), False),
        (1, ("s", " 1"), False),
        ("01", ("n", 1), False),
        (1, ("s", "01"), False),
        (1, ("s", "1e0"), False),
        (1, ("s", "1.0"), False),
        ("1.0", ("n", 1), False),
        ("+1", ("n", 1), False),
        (12.5, ("s", "12.5"), False),  # not an id MCP allows, in any type
        (True, ("n", 1), False),
        (None, ("n", 1), False),
        (float("inf"), ("s", "inf"), False),
        ("Q\u00e9", ("s", "q\u00e9"), False),
    ],
)
def test_one_rule_names_a_reply_to_its_request(value: Any, key: Any, names: bool) -> None:
    assert same_value(value, key) is names
    assert answering(value, [key]) == (key if names else None)


def test_a_reply_answers_the_request_it_is_before_one_it_spells() -> None:
    assert answering("1", [("n", 1), ("s", "1")]) == ("s", "1")
    assert answering(1, [("s", "1"), ("n", 1)]) == ("n", 1)
    assert answering(1.0, [("s", "1"), ("n", 1)]) is None  # names both: no one's
    assert answering("2", [("n", 1)]) is None and id_key(1.0) is None


@pytest.mark.parametrize(
    ("rid", "written", "answers"),
    [
        (1, b"1", True),
        ("q\u00e9", b'"q\\u00e9"', True),
        (2**70, b"1180591620717411303424", True),
        (1, b"true", False),  # Python's 1 == True: once the check client took it for the answer
        (1, b"1.0", False),
        (1, b'"1"', False),
        ("1", b"1", False),
    ],
)
def test_the_check_client_takes_only_the_reply_under_its_id_as_sent(rid: Any, written: bytes, answers: bool) -> None:
    """``mcp-normalizer check`` is a strict client: it repairs nothing, so it compares ids as sent."""
    reply = b'{"jsonrpc":"2.0","id":' + written + b',"result":{"balance":12.50}}'
    assert (response_to(reply, rid) is not None) is answers
    assert (response_to(b"[" + reply + b"]", rid) is not None) is answers


def spelled(rid: Any, tool: str, *ids: str, **params: Any) -> dict[str, Any]:
    """A ``tools/call`` of ``tool`` the fixture answers once per id spelling in ``ids``."""
    return call(rid, tool, **{**params, "arguments": {"ids": list(ids)}})


@pytest.mark.anyio
async def test_a_sessions_reply_whose_id_is_spaced_answers_nothing_and_one_in_the_other_type_answers() -> None:
    """The stdio upstream, a 2025-11-25 session: ``" 7"`` never answers ``7`` (the reply written
    as sent does), ``"8"`` answers ``8`` and reaches its client under ``8`` (rule ``jsonrpc_id``),
    ``12.5`` never answers ``"12.5"``."""
    plan = plan_with(answer_ids=True)
    with stdio_proxy(fixture(plan)) as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            session = await open_session(http, url)
            spaced = events(await post(http, url, spelled(7, "echo", " {}", "="), session))
            other_type = events(await post(http, url, spelled(8, "echo", "{}"), session))
            decimal = events(await post(http, url, spelled("12.5", "echo", "float", "="), session))
    assert [(m["id"], m["result"]["content"][0]["text"]) for m in spaced] == [(7, "answered as =")]
    assert [(m["id"], m["result"]["content"][0]["text"]) for m in other_type] == [(8, "answered as {}")]
    assert [(m["id"], m["result"]["content"][0]["text"]) for m in decimal] == [("12.5", "answered as =")]


@pytest.mark.anyio
async def test_a_stateless_reply_whose_id_is_spaced_answers_nothing() -> None:
    """The stdio upstream's shared child: the reply ``" <id>"`` to the proxy's id answers no
    request (once, ``" 3"`` answered the proxy's ``3``); the reply under the id as sent does."""
    plan = plan_with(answer_ids=True)
    with stdio_proxy(fixture(plan)) as px:
        url = px + "/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            answered = []
            for rid in (1, 2, 3):
                body = orjson.dumps(spelled(rid, "echo", " {}", "=", _meta=META))
                answered += events(await http.post(url, content=body, headers=MODERN))
    assert [(m["id"], m["result"]["content"][0]["text"]) for m in answered] == [
        (rid, "answered as =") for rid in (1, 2, 3)
    ]


@pytest.mark.anyio
async def test_the_stdio_wrapper_names_a_reply_to_its_request_by_the_same_rule(tmp_path: Path) -> None:
    """The stdio wrapper relays every reply; the rule decides which request one answers (its id
    stamped, rule ``jsonrpc_id``; a request the server leaves unanswered gets an error when it
    exits): ``" 7"`` answers nothing, ``"8"`` answers ``8``, ``12.5`` answers nothing (once it
    answered ``"12.5"``, which then never got an answer its client could match)."""
    log = tmp_path / "log.jsonl"
    plan = plan_with(answer_ids=True)
    calls = (spelled(7, "echo", " {}", "="), spelled(8, "echo", "{}"), spelled("12.5", "echo", "float"))
    lines = b"".join(orjson.dumps(message) + b"\n" for message in calls)
    out, status = await raw_session(wrapped(fixture(plan), log), INITIALIZE + lines)
    replies = [orjson.loads(line) for line in out]
    assert status == 0
    assert [(m["id"], m["result"]["content"][0]["text"]) for m in replies[1:5]] == [
        (" 7", "answered as  {}"),
        (7, "answered as ="),
        (8, "answered as {}"),
        (12.5, "answered as float"),
    ]
    (unanswered,) = replies[5:]
    assert unanswered["id"] == "12.5" and unanswered["error"]["code"] == -32603
