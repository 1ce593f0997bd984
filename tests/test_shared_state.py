"""Replicas sharing scope state in Redis (``state_url``, issue 14 section 4): two real proxy
processes in front of one upstream and a real ``redis-server`` (Debian's package; ``.ci/run``
installs it). A task started through one replica and polled through the other is normalized, a
response resumed on a GET through the other replica too; killing Redis mid-run loses no response;
no value of a result is ever stored."""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest
import redis

from mcp_normalizer import NormalizerConfig, NormalizerMiddleware
from mcp_normalizer.config import ProxyConfig
from mcp_normalizer.demo.upstream import FORBIDDEN
from mcp_normalizer.engine.rules.learned import Learned
from mcp_normalizer.engine.scopes import Changes, Limits
from mcp_normalizer.errors import ConfigError
from mcp_normalizer.ops.metrics import Metrics
from mcp_normalizer.ops.shared_state import RedisState
from mcp_normalizer.types import Receive, Scope, Send
from mcp_normalizer.wire.jsonrpc import PendingRequest
from mcp_normalizer.wire.pointer import PointerPattern
from mcp_normalizer.wire.responses import respond

from .support import (
    EXE,
    HEADERS,
    PROBLEM_KEY,
    free_port,
    headers,
    initialize,
    params,
    read_body,
    resuming_upstream,
    rpc,
    run_cli,
    running,
    serve,
    task_server,
)

pytestmark = pytest.mark.wire

#: Strings of the upstream's results: none may reach Redis.
RESULT_VALUES = ("token lacks scope", "SCOPE_DENIED", "svc-deployer@team-a", "problems/forbidden")
WARNING = "shared state store unreachable"


class RedisServer:
    """A ``redis-server`` on a free loopback port, nothing persisted."""

    def __init__(self) -> None:
        found = shutil.which("redis-server")
        if found is None:
            if os.environ.get("MCP_NORMALIZER_REQUIRE_SHARED") == "1":
                raise FileNotFoundError(
                    "redis-server is required (MCP_NORMALIZER_REQUIRE_SHARED=1; apt-get install redis-server)"
                )
            pytest.skip("needs redis-server on PATH (apt-get install redis-server)")
        self.exe = found
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_timeout=1, socket_connect_timeout=1)
        deadline = time.monotonic() + 20
        try:
            while True:  # polled until it answers PING, as test_cli polls a proxy until it listens
                assert self.process.poll() is None, "redis-server exited"
                try:
                    if client.ping():
                        return
                except redis.ConnectionError:
                    pass
                assert time.monotonic() < deadline, "redis-server did not answer PING"
                time.sleep(0.02)
        finally:
            client.close()

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def dump(self) -> list[bytes]:
        """Every key and every value in the server."""
        client = redis.Redis(port=self.port)
        out: list[bytes] = []
        try:
            for key in client.scan_iter():
                out.append(key)
                kind = client.type(key)
                if kind == b"string":
                    out.append(_bytes(client.get(key) or b""))
                elif kind == b"hash":
                    for name, value in client.hgetall(key).items():
                        out += [_bytes(name), _bytes(value)]
                else:
                    raise AssertionError(f"unexpected {kind!r} at {key!r}")
        finally:
            client.close()
        return out


def _bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


@contextmanager
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        if server.process is not None and server.process.poll() is None:
            server.kill()


@contextmanager
def replicas(
    upstream: str, state_url: str | None, log_level: str = "warning"
) -> Iterator[tuple[list[str], list[list[str]]]]:
    """Two ``mcp-normalizer`` processes in front of ``upstream`` (sharing ``state_url`` when given);
    yields their base URLs and, once they stopped, their stderr lines."""
    env = {"MCP_NORMALIZER_STATE_URL": state_url or "", "MCP_NORMALIZER_STATE_SECRET": "test-secret"}
    env["MCP_NORMALIZER_LOG_LEVEL"] = log_level
    with ExitStack() as stack:
        urls, logs = [], []
        for _ in range(2):
            port = free_port()
            logs.append(stack.enter_context(running([EXE, "--upstream", upstream, "--port", str(port)], port, env)))
            urls.append(f"http://127.0.0.1:{port}")
        yield urls, logs


WANTS_TASKS = params()
WANTS_TASKS["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {
    "extensions": {"io.modelcontextprotocol/tasks": {}}
}


async def task_through(http: httpx.AsyncClient, start: str, poll: str, tool: str, rid: int) -> dict[str, Any]:
    """Start a 2026-07-28 task of ``tool`` through the replica ``start``, poll it through ``poll``."""
    created = await rpc(http, start, "tools/call", {**WANTS_TASKS, "name": tool}, rid, **headers("tools/call", tool))
    handle = created["result"]
    assert handle["resultType"] == "task"
    got = await rpc(http, poll, "tasks/get", params(taskId=handle["taskId"]), rid + 1, **headers("tasks/get"))
    assert got["result"]["status"] == "completed"
    return dict(got["result"]["result"])


@pytest.mark.anyio
@pytest.mark.parametrize("shared", [True, False])
async def test_a_task_started_through_one_replica_is_normalized_when_polled_through_the_other(shared: bool) -> None:
    with redis_server() as store, serve(task_server()) as up:
        with replicas(up + "/mcp", store.url if shared else None) as (urls, logs):
            a, b = (url + "/mcp" for url in urls)
            async with httpx.AsyncClient(timeout=30) as http:
                scope_list = await task_through(http, a, b, "protean.scope_list", 1)
                whoami = await task_through(http, b, a, "protean.whoami", 3)
        stored = store.dump()
    assert scope_list["_meta"][PROBLEM_KEY] == FORBIDDEN  # a problem object moves whatever the tool
    if not shared:  # the replica that did not see the call cannot know the task's tool (no outputSchema)
        assert whoami["structuredContent"] == {}
        return
    assert "structuredContent" not in whoami  # dropped: the tool declares no outputSchema
    assert stored and not any(value.encode() in item for item in stored for value in RESULT_VALUES)
    assert {item for item in stored if not item.startswith(b"mcp-normalizer:")} >= {b"protean.scope_list"}
    assert not any(WARNING in line for log in logs for line in log)


@pytest.mark.anyio
async def test_a_response_resumed_on_a_get_through_the_other_replica_is_normalized() -> None:
    app, gets = resuming_upstream()
    with redis_server() as store, serve(app) as up, replicas(up + "/mcp", store.url) as (urls, _):
        a, b = (url + "/mcp" for url in urls)
        async with httpx.AsyncClient(timeout=30) as http:
            session = await initialize(http, a)
            call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "protean.scope_list"}}
            primed = await http.post(a, content=orjson.dumps(call), headers={**HEADERS, **session})
            assert primed.text == "id: r-0\ndata: \nretry: 10\n\n"
            resumed = await http.get(b, headers={**session, "accept": "text/event-stream", "last-event-id": "r-0"})
        stored = store.dump()
    assert gets[0]["last-event-id"] == "r-0"
    data = [line[5:].strip() for line in resumed.text.splitlines() if line.startswith("data:")]
    message = orjson.loads(data[0])
    assert message["id"] == 7 and message["result"]["_meta"][PROBLEM_KEY] == FORBIDDEN
    assert not any(value.encode() in item for item in stored for value in RESULT_VALUES)
    assert b"raw" in stored  # the session's client name (answered requests are gone)


def metric(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


@pytest.mark.anyio
async def test_killing_redis_mid_run_loses_no_response_and_is_counted_and_logged_once() -> None:
    results: list[dict[str, Any]] = []
    with redis_server() as store, serve(task_server()) as up:
        with replicas(up + "/mcp", store.url) as (urls, logs):
            a, b = (url + "/mcp" for url in urls)
            async with httpx.AsyncClient(timeout=30) as http:
                for n in range(20):
                    if n == 10:
                        store.kill()
                    start, poll = (a, b) if n % 2 == 0 else (b, a)
                    results.append(await task_through(http, start, poll, "protean.whoami", 10 * n))
                scrapes = [(await http.get(url + "/.mcp-normalizer/metrics")).text for url in urls]
    assert len(results) == 20
    assert all("structuredContent" not in r for r in results[:10])  # shared: normalized
    for r in results[10:]:  # the store is gone: each answered, normalized or as the upstream sent it
        assert (
            r["content"] == [{"type": "text", "text": "svc-deployer@team-a"}] and r.get("structuredContent", {}) == {}
        )
    assert all(metric(text, "mcp_normalizer_state_errors_total") > 0 for text in scrapes)
    assert [sum(WARNING in line for line in log) for log in logs] == [1, 1]  # one line per 30 s interval


@pytest.mark.anyio
async def test_the_store_fails_open_and_is_used_again_once_it_answers(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "mcp_normalizer.ops.shared_state")
    metrics = Metrics()
    with redis_server() as store:
        state = RedisState(store.url, secret="s", limits=Limits(), metrics=metrics, retry_after=0.0, timeout=5.0)
        scope = state.scope_id("up", "session", None, None)
        assert scope == RedisState(store.url, secret="s").scope_id("up", "session", None, None)  # every replica
        assert scope != RedisState(store.url, secret="t").scope_id("up", "session", None, None)
        changes = Changes(
            tasks={"task-1": "tool.a"},
            awaited={
                ("n", 7): PendingRequest("tools/call", tool="tool.b"),
                ("s", "p2"): PendingRequest("tools/list", cursor="p\u00e9ge-2"),  # cursor_loop reads it
                ("s", "p3"): PendingRequest("tools/list", cursor="x" * 2000),  # kept, without its long cursor
            },
            client="claude-code",
            client_version="2.1.233-\u00e9",
            learned=True,
        )
        learned = {"tool.c": Learned(relax=(PointerPattern.parse("/x/*/y"),))}
        await state.write(scope, changes, learned)
        found = await state.read(scope, ["task-1", "task-2"], pending=True)
        assert found is not None
        assert found.tasks == {"task-1": "tool.a"} and found.client == "claude-code"
        assert found.client_version == "2.1.233-\u00e9"  # a host's version ranges read it on every replica
        assert found.pending == {
            ("n", 7): PendingRequest("tools/call", tool="tool.b"),
            ("s", "p2"): PendingRequest("tools/list", cursor="p\u00e9ge-2"),
            ("s", "p3"): PendingRequest("tools/list"),
        }
        assert found.learned == learned
        await state.write(scope, Changes(answered={("n", 7), ("s", "p2"), ("s", "p3")}), {})
        again = await state.read(scope, [], pending=True)
        assert again is not None and again.pending == {}
        store.kill()
        assert await state.read(scope, ["task-1"], pending=True) is None
        await state.write(scope, changes, learned)  # dropped, never raised
        assert metrics.registry.get_sample_value("mcp_normalizer_state_errors_total", {"op": "read"}) == 1
        assert metrics.registry.get_sample_value("mcp_normalizer_state_errors_total", {"op": "write"}) == 1
        assert [r.levelname for r in caplog.records if WARNING in r.getMessage()] == ["WARNING"]  # once per interval
        store.start()  # the same port, empty
        back = await state.read(scope, ["task-1"], pending=True)
        assert back is not None and back.tasks == {}
        assert any("reachable again" in r.getMessage() for r in caplog.records)
        await state.close()


@pytest.mark.anyio
async def test_what_cannot_or_should_not_be_stored_is_left_out_alone_and_the_store_stays_up() -> None:
    """A 39-digit id, a lone surrogate, a 1 MB tool name (any client can send them): those entries
    are not shared (the replica keeps them), the others are, and the store is not counted down."""
    metrics = Metrics()
    with redis_server() as store:
        state = RedisState(store.url, limits=Limits(), metrics=metrics, timeout=5.0)
        scope = state.scope_id("up", "session", None, None)
        changes = Changes(
            tasks={"task-ok": "tool.a", "task-huge": "t" * 2**20, "task-\ud800": "tool.a"},
            awaited={
                ("n", 10**30): PendingRequest("tools/call", tool="tool.b"),
                ("n", 8): PendingRequest("tools/call", tool="\ud800"),
                ("n", 9): PendingRequest("tools/call", tool="x" * 2**20),
                ("n", 7): PendingRequest("tools/call", tool="tool.b"),
            },
            client="\ud800",
        )
        await state.write(scope, changes, {})
        found = await state.read(scope, ["task-ok", "task-huge"], pending=True)
        assert found is not None
        assert found.tasks == {"task-ok": "tool.a"} and found.client is None
        assert found.pending == {("n", 7): PendingRequest("tools/call", tool="tool.b")}
        assert metrics.registry.get_sample_value("mcp_normalizer_state_errors_total", {"op": "write"}) is None
        used = sum(map(len, store.dump()))
        assert used < 4096  # nothing of the megabyte names reached the store
        await state.close()


@pytest.mark.anyio
async def test_requests_the_upstream_refuses_leave_nothing_in_the_store() -> None:
    """Calls in sessions the upstream does not know (404, as the SDKs answer): no later GET carries
    their answers, so nothing of them is shared, however many sessions a client makes up."""

    async def refusing(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await read_body(receive)
            error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "Session not found"}}
            await respond(send, 404, orjson.dumps(error))

    with redis_server() as store:
        config = NormalizerConfig.shipped().with_proxy({"state_url": store.url})
        app = NormalizerMiddleware(refusing, config)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:1") as http:
            for i in range(20):
                call = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "tool.a"}}
                session = {"mcp-session-id": f"made-up-{i}", "mcp-protocol-version": "2025-06-18"}
                response = await http.post("/mcp", content=orjson.dumps(call), headers={**HEADERS, **session})
                assert response.status_code == 404
        assert app.scopes.shared is not None
        await app.scopes.shared.close()  # (what the lifespan's shutdown does)
        assert store.dump() == []


def test_state_url_must_name_redis() -> None:
    config = NormalizerConfig.shipped()
    for url in ("redis://127.0.0.1:6379/0", "rediss://cache.internal:6380", "unix:///run/redis.sock"):
        assert config.with_proxy({"state_url": url}).proxy.state_url == url
    with pytest.raises(ConfigError, match="state_url must be a redis://, rediss:// or unix:// URL"):
        config.with_proxy({"state_url": "http://127.0.0.1:6379"})
    for bad in ("redis://127.0.0.1:99999/0", "redis://[::1/0"):
        with pytest.raises(ConfigError, match="state_url is not a valid URL"):
            config.with_proxy({"state_url": bad})
    # One redis-py refuses only when it is used (a query argument): still one line and exit 2.
    env = {"MCP_NORMALIZER_STATE_URL": "redis://127.0.0.1:6379/0?socket_timeout=abc"}
    done = run_cli("--upstream", "http://127.0.0.1:9/mcp", "--port", str(free_port()), env=env)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "state_url is not a usable Redis URL" in done.stderr
    assert dataclasses.replace(ProxyConfig()).state_url == ""


def test_state_url_without_redis_py_is_one_line_and_exit_2(tmp_path: Path) -> None:
    hidden = tmp_path / "redis"  # an environment without the [redis] extra
    hidden.mkdir()
    (hidden / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'redis'\", name='redis')\n")
    env = {"MCP_NORMALIZER_STATE_URL": "redis://127.0.0.1:6379/0", "PYTHONPATH": str(tmp_path)}
    done = run_cli("--upstream", "http://127.0.0.1:9/mcp", "--port", str(free_port()), env=env)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "pip install 'mcp-normalizer[redis]'" in done.stderr


def test_redis_is_imported_only_when_state_url_is_set() -> None:
    code = (
        "import sys\n"
        "from mcp_normalizer import Settings, create_app\n"
        "create_app(Settings(upstream='http://127.0.0.1:9/mcp'))\n"
        "assert 'redis' not in sys.modules, 'imported without state_url'\n"
        "import os; os.environ['MCP_NORMALIZER_STATE_URL'] = 'redis://127.0.0.1:9'\n"
        "create_app(Settings(upstream='http://127.0.0.1:9/mcp'))\n"
        "assert 'redis' in sys.modules\n"
    )
    done = subprocess.run([EXE.replace("mcp-normalizer", "python"), "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# -- issue 22, major 5: what a client may write, and one scope never turns the store off ---------


@pytest.mark.anyio
async def test_a_client_minting_sessions_writes_a_bounded_number_of_scopes() -> None:
    """Each made-up session of one client address writes its scope (its client's name) until the
    bound; past it the sessions work from the replica's memory, counted, logged once."""
    with redis_server() as store:
        config = NormalizerConfig.shipped().with_proxy({"state_url": store.url, "state_scopes_per_client": 10})
        app = NormalizerMiddleware(task_server(), config, metrics=(metrics := Metrics()))
        transport = httpx.ASGITransport(app=app, client=("203.0.113.9", 4000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:1") as http:
            for _ in range(40):
                await initialize(http, "/mcp")
        assert app.scopes.shared is not None
        await app.scopes.shared.close()
        keys = [item for item in store.dump() if item.startswith(b"mcp-normalizer:s:")]
    assert len(keys) == 10
    assert metrics.registry.get_sample_value("mcp_normalizer_state_errors_total", {"op": "capped"}) == 30


@pytest.mark.anyio
async def test_requests_the_upstream_rejects_as_unauthorized_are_not_shared() -> None:
    inner = task_server()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != b"Bearer good":
            await read_body(receive)
            await respond(send, 401, b'{"error":"invalid_token"}', headers=[(b"www-authenticate", b"Bearer")])
            return
        await inner(scope, receive, send)

    with redis_server() as store:
        config = NormalizerConfig.shipped().with_proxy({"state_url": store.url})
        app = NormalizerMiddleware(guarded, config)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:1") as http:
            for i in range(20):  # a new made-up credential and cookie each time
                bad = {"authorization": f"Bearer forged-{i}", "cookie": f"c={i}"}
                assert (
                    await http.post("/mcp", content=orjson.dumps(INIT_2025), headers={**HEADERS, **bad})
                ).status_code == 401
            good = await http.post(
                "/mcp", content=orjson.dumps(INIT_2025), headers={**HEADERS, "authorization": "Bearer good"}
            )
            assert good.status_code == 200
        assert app.scopes.shared is not None
        await app.scopes.shared.close()
        keys = [item for item in store.dump() if item.startswith(b"mcp-normalizer:")]
    assert len(keys) == 1  # the accepted session's, only


INIT_2025 = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}},
}


@pytest.mark.anyio
async def test_one_scopes_slow_read_never_turns_the_store_off_for_the_others() -> None:
    """A scope whose pending hash takes longer than the bound to read (100,000 fields written
    behind the proxy's back) times out alone: the next scope's read is served."""
    with redis_server() as store:
        state = RedisState(store.url, limits=Limits(), timeout=0.05, retry_after=60.0)
        heavy, light = state.scope_id("up", "heavy", None, None), state.scope_id("up", "light", None, None)
        await state.write(light, Changes(client="claude-code"), {})
        direct = redis.Redis(port=store.port)
        value = b'{"m":"tools/call","d":9999999999,"t":"' + b"x" * 400 + b'"}'
        for start in range(0, 100_000, 10_000):
            direct.hset(
                f"mcp-normalizer:p:{heavy}",
                mapping={orjson.dumps(["n", i]): value for i in range(start, start + 10_000)},
            )
        slow = await state.read(heavy, [], pending=True)
        assert direct.ping()  # (Redis is done sending that reply)
        direct.close()
        served = await state.read(light, [], pending=False)
        await state.close()
    assert slow is None  # (its own read gave up at the bound)
    assert served is not None and served.client == "claude-code"  # not skipped for retry_after


@pytest.mark.anyio
async def test_learned_schemas_are_stored_once_by_content_and_every_scope_points_at_them() -> None:
    with redis_server() as store:
        state = RedisState(store.url, limits=Limits(), timeout=5.0)
        learned = {"tool.\u00e9": Learned(relax=(PointerPattern.parse("/runtimes/*/scope"),))}
        scopes = [state.scope_id("up", f"s{i}", None, None) for i in range(50)]
        for scope in scopes:
            await state.write(scope, Changes(learned=True), learned)
        other = RedisState(store.url, limits=Limits(), timeout=5.0)  # another replica reads them back
        found = await other.read(scopes[7], [], pending=False)
        await state.close()
        await other.close()
        entries = [item for item in store.dump() if item.startswith(b"mcp-normalizer:l:")]
    assert found is not None and found.learned == learned
    assert len(entries) == 1


@pytest.mark.anyio
async def test_two_hundred_sessions_at_once_over_two_replicas_lose_nothing_and_log_little() -> None:
    """The load that gave 30,158 read errors and 605 lines: a bounded pool, a store marked down
    only when it refuses or times out calls in a row, one warning (and one recovery) per interval."""
    with redis_server() as store, serve(task_server()) as up:
        with replicas(up + "/mcp", store.url, "info") as (urls, logs):
            a, b = (url + "/mcp" for url in urls)
            answered: list[int] = []

            async def session(http: httpx.AsyncClient) -> None:
                ids = await initialize(http, a)
                for i in range(5):
                    call = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "protean.whoami"}}
                    reply = await http.post(a if i % 2 else b, content=orjson.dumps(call), headers={**HEADERS, **ids})
                    answered.append(reply.status_code)

            limits = httpx.Limits(max_connections=400, max_keepalive_connections=400)
            async with httpx.AsyncClient(timeout=60, limits=limits) as http, anyio.create_task_group() as tg:
                for _ in range(200):
                    tg.start_soon(session, http)
    assert answered == [200] * 1000
    for log in logs:
        assert sum(WARNING in line for line in log) <= 1 and sum("reachable again" in line for line in log) <= 1
