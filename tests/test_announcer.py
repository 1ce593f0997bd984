"""The notices of :mod:`mcp_normalizer.hop.announcer` go between two whole SSE events of a GET stream,
never inside one, and only while the stream is split into whole events (a tiny inline stream)."""

from __future__ import annotations

from contextlib import ExitStack

import anyio
import pytest

from mcp_normalizer.config import NormalizerConfig
from mcp_normalizer.engine.audit import AuditLog
from mcp_normalizer.engine.catalog import build_entry
from mcp_normalizer.engine.exchange import Exchange
from mcp_normalizer.engine.normalize import Normalizer
from mcp_normalizer.engine.schema import SchemaCompiler
from mcp_normalizer.engine.scopes import ScopeStore
from mcp_normalizer.engine.transform import ResponseTransformer
from mcp_normalizer.hop.announcer import LIST_CHANGED_EVENT, Announcer, AnnouncingSend
from mcp_normalizer.types import Message

pytestmark = pytest.mark.inprocess

EVENT = b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message","params":{"data":"\\u00e9 1e3"}}\n\n'


class SlowClient:
    """A client ``send`` that records each body and, while ``gate`` is shut, holds the first one."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.gate = anyio.Event()
        self.inside = anyio.Event()

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.body" and not self.bodies:
            self.inside.set()
            await self.gate.wait()
        if message["type"] == "http.response.body":
            self.bodies.append(message["body"])


def stream(client: SlowClient, max_event_bytes: int = 1 << 20) -> AnnouncingSend:
    state = ScopeStore().state("s")
    exchange = Exchange({}, "2025-11-25", "s", state)
    transformer = ResponseTransformer(
        exchange, Normalizer(NormalizerConfig()), AuditLog("test"), max_event_bytes=max_event_bytes
    )
    return AnnouncingSend(client, transformer, None)


START: Message = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}


@pytest.mark.anyio
async def test_a_notice_during_the_streams_own_send_goes_after_it_whole() -> None:
    client = SlowClient()
    send = stream(client)
    await send(START)
    async with anyio.create_task_group() as tg:
        tg.start_soon(send, {"type": "http.response.body", "body": EVENT, "more_body": True})
        await client.inside.wait()  # the stream's own event is half way out
        assert await send.announce(LIST_CHANGED_EVENT)
        assert client.bodies == []  # held: it never goes inside the event
        client.gate.set()
    await send({"type": "http.response.body", "body": EVENT, "more_body": False})
    assert client.bodies == [EVENT, LIST_CHANGED_EVENT, EVENT]
    assert not await send.announce(LIST_CHANGED_EVENT)  # the stream ended: nothing more goes on it


@pytest.mark.anyio
async def test_a_stream_not_started_or_passed_through_takes_no_notice() -> None:
    client = SlowClient()
    client.gate.set()
    send = stream(client, max_event_bytes=16)
    assert not await send.announce(LIST_CHANGED_EVENT)  # no start yet
    await send(START)
    await send({"type": "http.response.body", "body": EVENT[:40], "more_body": True})  # too big to split
    assert not await send.announce(LIST_CHANGED_EVENT)
    await send({"type": "http.response.body", "body": EVENT[40:], "more_body": False})
    assert b"".join(client.bodies) == EVENT


@pytest.mark.anyio
async def test_a_stream_that_never_reads_is_skipped_and_the_others_are_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """``tools_changed`` tells every stream whose session lists the tool with that definition,
    all at once; one whose client stopped reading costs at most the notice timeout, alone; a
    session listing another definition, or the one the call stream told, hears nothing."""
    monkeypatch.setattr("mcp_normalizer.hop.announcer.NOTICE_TIMEOUT", 0.2)
    store = ScopeStore()
    clients = [SlowClient() for _ in range(4)]
    for client in clients[1:]:
        client.gate.set()
    sends = [stream(client) for client in clients]
    states = [store.state(name) for name in "abcd"]
    definitions = ["d" * 32, "d" * 32, "e" * 32, "d" * 32]
    tool = {"name": "caf\u00e9.t", "inputSchema": {"type": "object"}}
    for state, definition in zip(states, definitions, strict=True):
        entry = build_entry(tool, (), SchemaCompiler(), definition=definition)
        state.catalog.learn([entry], first_page=True)
    announcer = Announcer()
    with ExitStack() as streams:
        for send, state in zip(sends, states, strict=True):
            await send(START)
            streams.enter_context(announcer.listening(state, send))
        told = await announcer.tools_changed([("caf\u00e9.t", "d" * 32)], states[3])
    assert told == 1 and len(announcer) == 0
    assert [client.bodies for client in clients] == [[], [LIST_CHANGED_EVENT], [], []]
