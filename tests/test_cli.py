"""The command line as users and other tools drive it: a real process, real clients, exit codes."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx
import orjson
import pytest

from mcp_normalizer.demo.clients import run_node
from mcp_normalizer.demo.upstream import FORBIDDEN, RUNTIMES, protean_server
from mcp_normalizer.hop.server import bind
from mcp_normalizer.types import Receive, Scope, Send

from .support import EXE, HEADERS, PROBLEM_KEY, free_port, listening, run_cli, running, serve

pytestmark = pytest.mark.wire


STEPS = [
    {"op": "listTools"},
    {"op": "callTool", "name": "protean.scope_list"},
    {"op": "callTool", "name": "protean.list_runtimes"},
]


def assert_protean_fixed(record: dict[str, object], problem_key: str = PROBLEM_KEY) -> None:
    steps = record["steps"]
    assert isinstance(steps, list) and all(step["ok"] for step in steps), steps
    scope_list, list_runtimes = steps[1]["value"], steps[2]["value"]
    assert scope_list["isError"] is True and scope_list["_meta"][problem_key] == FORBIDDEN
    assert [b["text"] for b in scope_list["content"]] == ["[SCOPE_DENIED] token lacks scope 'scopes:read'"]
    assert list_runtimes["structuredContent"] == RUNTIMES


@pytest.mark.anyio
async def test_cli_proxy_fixes_protean_for_the_ts_sdk_1_client(tmp_path: Path) -> None:
    port = free_port()
    rules = write(tmp_path, '[normalizer]\nproblem_meta_key = "com.example/problem"\n')  # a rule file is read
    with serve(protean_server()) as up:
        direct = (await run_node("v1", [{"url": up + "/mcp", "steps": STEPS}]))[0]
        with running([EXE, "--upstream", up + "/mcp", "--port", str(port), "--config", rules], port) as log:
            proxied = (await run_node("v1", [{"url": f"http://127.0.0.1:{port}/mcp", "steps": STEPS}]))[0]
    assert not direct["steps"][1]["ok"] and not direct["steps"][2]["ok"]  # both throw directly
    assert_protean_fixed(proxied, "com.example/problem")  # list_runtimes by the interventions table
    lines = [orjson.loads(line) for line in log]  # every log line is JSON
    rewrites = [line for line in lines if line.get("event") == "rewrite"]
    assert sorted(line["rule"] for line in rewrites) == ["error_problem", "nullable"]


@pytest.mark.anyio
async def test_python_m_proxy_reads_its_settings_from_the_environment() -> None:
    port = free_port()
    with serve(protean_server("json")) as up:
        env = {"MCP_NORMALIZER_UPSTREAM": up + "/mcp", "MCP_NORMALIZER_PORT": str(port)}  # no rule file
        with running([sys.executable, "-m", "mcp_normalizer"], port, env):
            proxied = (await run_node("v1", [{"url": f"http://127.0.0.1:{port}/mcp", "steps": STEPS}]))[0]
    assert_protean_fixed(proxied)


@pytest.mark.anyio
async def test_uvicorn_factory_command_from_the_readme() -> None:
    port = free_port()
    with serve(protean_server()) as up:
        argv = [sys.executable, "-m", "uvicorn", "mcp_normalizer.app:create_app", "--factory", "--port", str(port)]
        env = {"MCP_NORMALIZER_UPSTREAM": up + "/mcp"}
        with running(argv, port, env) as log:
            proxied = (await run_node("v2", [{"url": f"http://127.0.0.1:{port}/mcp", "steps": STEPS}]))[0]
    assert_protean_fixed(proxied)
    assert any('"rule":"error_problem"' in line for line in log)  # the rewrite log is on


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "rules.toml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("make_args", "names"),
    [
        (lambda tmp: ["--upstream", "http://127.0.0.1:9/mcp", "--bogus"], "--bogus"),
        (lambda tmp: [], "upstream"),
        (lambda tmp: ["--upstream", "ftp://example.com/mcp"], "ftp://example.com/mcp"),
        (lambda tmp: ["--upstream", "http://127.0.0.1:9/mcp", "--port", "http"], "--port"),
        (lambda tmp: ["--upstream", "http://127.0.0.1:9/mcp", "--port", "70000"], "70000"),
        (lambda tmp: ["--upstream", "http://127.0.0.1:9/mcp", "--log-level", "loud"], "loud"),
        (lambda tmp: ["--upstream", "http://127.0.0.1:9/mcp", "--workers", "0"], "workers"),
        (lambda tmp: ["--upstream", "http://alice:pw@127.0.0.1:9/mcp"], "credentials"),
        (lambda tmp: ["--upstream", "http://127.0.0.1:9/mcp", "--config", str(tmp / "missing.toml")], "missing.toml"),
        (lambda tmp: ["--upstream", "http://127.0.0.1:9/mcp", "--config", write(tmp, "[rules\n")], "TOML"),
        (
            lambda tmp: ["--upstream", "http://127.0.0.1:9/mcp", "--config", write(tmp, '[rules]\nnope = "on"\n')],
            "nope",
        ),
        (
            lambda tmp: [
                "--upstream",
                "http://127.0.0.1:9/mcp",
                "--config",
                write(tmp, '[rules]\ntext_mirror = "x"\n'),
            ],
            "text_mirror",
        ),
        (
            lambda tmp: [
                "--upstream",
                "http://127.0.0.1:9/mcp",
                "--config",
                write(tmp, '[tools."t"]\nnullable = ["runtimes/*"]\n'),
            ],
            "runtimes/*",
        ),
        (
            lambda tmp: [
                "--upstream",
                "http://127.0.0.1:9/mcp",
                "--config",
                write(tmp, '[normalizer]\nproblem_meta_key = "bad key!"\n'),
            ],
            "bad key!",
        ),
    ],
)
def test_bad_input_gives_one_line_naming_the_problem_and_exit_code_2(
    tmp_path: Path, make_args: Callable[[Path], list[str]], names: str
) -> None:
    port = free_port()
    args = make_args(tmp_path)
    done = run_cli(*args) if "--port" in args else run_cli(*args, "--port", str(port))
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mcp-normalizer: error: "), done.stderr
    assert names in lines[0]
    assert not listening(port)


def test_a_taken_port_is_reported_in_one_line() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = run_cli("--upstream", "http://127.0.0.1:9/mcp", "--port", str(port))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and f"127.0.0.1:{port}" in done.stderr


def test_a_flag_wins_over_an_environment_variable_that_would_not_parse() -> None:
    with socket.socket() as busy:  # a taken port, so the run ends right after the settings are read
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = run_cli("--upstream", "http://127.0.0.1:9/mcp", "--port", str(port), env={"MCP_NORMALIZER_PORT": "abc"})
    assert "not a port number" not in done.stderr and f"127.0.0.1:{port}" in done.stderr


def test_a_config_file_that_is_not_utf8_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes('[normalizer]\nproblem_meta_key = "caf\xe9"\n'.encode("latin-1"))
    done = run_cli("--upstream", "http://127.0.0.1:9/mcp", "--config", str(path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "not UTF-8" in done.stderr


@pytest.mark.parametrize(
    ("upstream", "text", "env", "says"),
    [
        (
            "http://127.0.0.1:9/mcp",
            "[proxy]\ngraceful_shutdown = nan\n",
            {},
            "graceful_shutdown must be a finite number",
        ),
        ("http://127.0.0.1:9/mcp", "[proxy]\nidle_timeout = inf\n", {}, "idle_timeout must be a finite number"),
        ("http://127.0.0.1:9/mcp", "", {"MCP_NORMALIZER_CONNECT_TIMEOUT": "nan"}, "must be a finite number"),
        ("http://127.0.0.1:9/mcp", '[proxy]\nadmin_prefix = "/mcp/admin"\n', {}, "under it"),
        ("http://127.0.0.1:9/mcp/", '[proxy]\nadmin_prefix = "/mcp"\n', {}, "under it"),
        ("http://127.0.0.1:9/mcp", '[proxy]\npublic_url = "https://mcp.example.com/team/mcp"\n', {}, "public_url"),
        ("http://127.0.0.1:9/mcp", "", {"MCP_NORMALIZER_TRUSTED_PROXIES": "10.0.0.0/8,lb.internal"}, "lb.internal"),
        ("http://127.0.0.1:9/mcp", '[proxy]\nhttp = "h2"\n', {}, "httptools"),
        # issue 22: each started silently and then refused every request, or could never work
        ("http://127.0.0.1:9/mcp", '[proxy]\nallowed_hosts = ["*.example.com"]\n', {}, "allowed_hosts"),
        ("http://127.0.0.1:9/mcp", "", {"MCP_NORMALIZER_ALLOWED_HOSTS": "http://mcp.example.com"}, "allowed_hosts"),
        ("http://127.0.0.1:9/mcp", "", {"MCP_NORMALIZER_ALLOWED_ORIGINS": "localhost:3000"}, "has no scheme"),
        ("http://127.0.0.1:9/mcp", '[proxy]\ncapture_file = "/nonexistent-dir/c.jsonl"\n', {}, "capture_file"),
        ("http://127.0.0.1:9/mcp", "", {"MCP_NORMALIZER_CAPTURE_FILE": "/"}, "is a directory"),
        ("http://127.0.0.1:9/mcp", "[proxy]\nworkers = 100000\n", {}, "workers must be at most 256"),
        ("http://127.0.0.1:9/mcp", "", {"MCP_NORMALIZER_MAX_SCOPES": "abc"}, "MCP_NORMALIZER_MAX_SCOPES"),
        ("http://127.0.0.1:9/mcp", "", {"MCP_NORMALIZER_FETCH_TIMEOUT": "0"}, "FETCH_TIMEOUT must be greater"),
    ],
)
def test_a_setting_that_cannot_work_is_one_line_and_exit_2(
    tmp_path: Path, upstream: str, text: str, env: dict[str, str], says: str
) -> None:
    """Not a number (which never compares), or the proxy's own endpoints hiding the MCP endpoint
    or the upstream's paths below it: refused before listening."""
    done = run_cli("--upstream", upstream, "--config", write(tmp_path, text), "--port", "0", env=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and says in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("flags", "text", "env"),
    [
        (["--workers", "2"], "", {}),
        ([], "", {"MCP_NORMALIZER_WORKERS": "2"}),
        ([], "[proxy]\nworkers = 2\n", {}),
        (["--workers", "3"], '[proxy]\nstate_url = ""\n', {"MCP_NORMALIZER_STATE_URL": ""}),
    ],
)
def test_workers_above_1_without_state_url_are_refused_naming_both_settings(
    tmp_path: Path, flags: list[str], text: str, env: dict[str, str]
) -> None:
    """Issue 37: two workers, each with its own sessions, repaired one session's tools/list for its
    host on some calls and not on others. Without a store they share, more than one is refused."""
    port = free_port()
    done = run_cli(
        "--upstream", "http://127.0.0.1:9/mcp", "--config", write(tmp_path, text), "--port", str(port), *flags, env=env
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "workers" in done.stderr and "needs state_url" in done.stderr and "MCP_NORMALIZER_STATE_URL" in done.stderr
    assert not listening(port)


def test_workers_above_1_with_a_state_url_are_accepted() -> None:
    from mcp_normalizer.config import Settings

    environ = {"MCP_NORMALIZER_WORKERS": "2", "MCP_NORMALIZER_STATE_URL": "redis://127.0.0.1:1/0"}
    config = Settings.from_env(environ, upstream="http://127.0.0.1:9/mcp").load_config()
    assert config.proxy.workers == 2


def test_admin_endpoints_beside_a_root_mcp_path_are_accepted() -> None:
    """With the MCP endpoint at ``/``, the default admin prefix does not hide it: the proxy starts."""
    from mcp_normalizer.config import Settings

    config = Settings.from_env({}, upstream="http://127.0.0.1:9/").load_config()
    assert config.proxy.admin_prefix == "/.mcp-normalizer" and config.path == "/"


@pytest.mark.parametrize(
    ("signum", "code"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 0)],  # SIGTERM is the normal stop, also when not PID 1
    ids=["ctrl-c", "sigterm"],
)
@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["", "started-with-sigint-ignored"])
def test_a_signal_stops_the_proxy_quietly_with_its_exit_code(
    signum: signal.Signals, code: int, sigint_ignored: bool
) -> None:
    """Also when the proxy was started with SIGINT ignored (nohup, background jobs, some CI runners):
    uvicorn re-raises the signal it caught, which does nothing then; the exit code must still say it."""
    port = free_port()

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    process = subprocess.Popen(
        [EXE, "--upstream", "http://127.0.0.1:9/mcp", "--port", str(port)],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ignore_sigint if sigint_ignored else None,
    )
    deadline = time.monotonic() + 20
    while not listening(port):
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signum)
    _, err = process.communicate(timeout=20)
    assert process.returncode == code and "Traceback" not in err


@pytest.mark.anyio
async def test_the_upstream_urls_query_is_sent_on_every_request_and_never_logged() -> None:
    seen: list[bytes] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        seen.append(scope["query_string"])
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})

    port = free_port()
    env = {"MCP_NORMALIZER_ACCESS_LOG": "true"}
    with serve(app) as up:
        argv = [EXE, "--upstream", up + "/mcp?api_key=s3cret-key", "--port", str(port), "--log-level", "debug"]
        with running(argv, port, env) as log:
            async with httpx.AsyncClient(timeout=10) as http:
                plain = await http.get(f"http://127.0.0.1:{port}/mcp")
                with_own = await http.get(f"http://127.0.0.1:{port}/other?page=2")
    assert plain.status_code == with_own.status_code == 200
    assert seen == [b"api_key=s3cret-key", b"api_key=s3cret-key&page=2"]
    assert any("api_key=***" in line for line in log)  # the startup line names the upstream, redacted
    assert not any("s3cret" in line for line in log)


@pytest.mark.anyio
async def test_request_heads_are_bounded_and_the_access_log_has_one_json_line_per_request() -> None:
    port = free_port()
    env = {"MCP_NORMALIZER_MAX_HEADER_BYTES": "4096", "MCP_NORMALIZER_ACCESS_LOG": "true"}
    with serve(protean_server("json")) as up:
        with running([EXE, "--upstream", up + "/mcp", "--port", str(port)], port, env) as log:
            async with httpx.AsyncClient(timeout=10) as http:
                small = await http.get(f"http://127.0.0.1:{port}/.mcp-normalizer/livez", headers={"x-pad": "a" * 1024})
                huge = await http.post(f"http://127.0.0.1:{port}/mcp", headers={**HEADERS, "x-pad": "a" * 8192})
                secret = {"authorization": "Bearer sekrit-token"}
                listed = await http.post(
                    f"http://127.0.0.1:{port}/mcp",
                    content=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
                    headers={**HEADERS, **secret, "mcp-protocol-version": "2025-11-25"},
                )
    assert small.status_code == 200 and listed.status_code == 200
    assert huge.status_code == 431
    assert huge.json()["error"]["message"] == (
        "request header fields too large (over 4096 bytes); the proxy's setting max_header_bytes "
        "(MCP_NORMALIZER_MAX_HEADER_BYTES) allows it"
    )
    access = [line for line in map(orjson.loads, log) if line.get("event") == "access"]
    assert [(a["method"], a["path"], a["status"]) for a in access] == [
        ("POST", "/mcp", 431),
        ("POST", "/mcp", 200),
    ]  # the proxy's own endpoints are not in the access log
    assert access[1]["rpc_method"] == "tools/list" and access[1]["bytes"] > 0
    assert access[1]["era"] == "2025-11-25" and access[0]["era"] is None  # the version each request names
    assert not any("sekrit" in line for line in log)


def test_the_listening_socket_gives_accepted_connections_tcp_nodelay() -> None:
    """With Nagle on, a response written as head then body waits ~40 ms for the client's delayed ACK.

    uvicorn serves the CLI's socket through ``loop.create_server(sock=...)``; the accepted
    connection's socket is inspected there, as the proxy's would be.
    """

    async def accepted_nodelay() -> int:
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            conn = writer.get_extra_info("socket")
            seen.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        listener = bind("127.0.0.1", 0)
        server = await asyncio.start_server(on_connection, sock=listener)
        async with server:
            _, writer = await asyncio.open_connection(*listener.getsockname())
            value = await asyncio.wait_for(seen, 10)
            writer.close()
            return value

    assert asyncio.run(accepted_nodelay()) != 0


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()] if path.exists() else []


@pytest.mark.anyio
async def test_workers_share_one_port_and_stop_together() -> None:
    port = free_port()
    with serve(protean_server("json")) as up:
        argv = [EXE, "--upstream", up + "/mcp", "--port", str(port), "--workers", "2"]
        # Two workers need a store they share; one that refuses connections is worked around (fail-open).
        env = {**os.environ, "MCP_NORMALIZER_STATE_URL": f"redis://127.0.0.1:{free_port()}/0"}
        process = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=env)
        try:
            deadline = time.monotonic() + 20
            while not listening(port) or len(_children(process.pid)) < 2:
                assert process.poll() is None and time.monotonic() < deadline, "the workers did not start"
                time.sleep(0.05)
            workers = _children(process.pid)
            async with httpx.AsyncClient(timeout=10) as http:
                for _ in range(20):  # new connections each time: the kernel spreads them over the workers
                    async with httpx.AsyncClient(timeout=10) as fresh:
                        answer = await fresh.post(
                            f"http://127.0.0.1:{port}/mcp",
                            content=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
                            headers=HEADERS,
                        )
                        assert answer.status_code == 200 and "tools" in answer.json()["result"]
                assert (await http.get(f"http://127.0.0.1:{port}/.mcp-normalizer/livez")).status_code == 200
        finally:
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=30)
    assert len(workers) == 2
    assert process.returncode == 0 and "Traceback" not in err
    assert not any(Path(f"/proc/{worker}").exists() for worker in workers)  # none outlives the stop


@pytest.mark.anyio
async def test_a_flood_of_half_sent_heads_under_a_small_descriptor_limit_is_survived() -> None:
    """250 connections that never finish their head, a 200-descriptor limit: the default connection
    limit (a third of the descriptors, less 64) keeps accept() from failing, the flood gets 503s, the log
    stays a few lines, and once the head timeout drops the flood, requests are served again."""
    import resource

    def small_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))

    port = free_port()
    env = {**os.environ, "MCP_NORMALIZER_HEAD_TIMEOUT": "2"}
    with serve(protean_server("json")) as up:
        argv = [EXE, "--upstream", up + "/mcp", "--port", str(port)]
        process = subprocess.Popen(argv, stderr=subprocess.PIPE, env=env, preexec_fn=small_limit)
        flood: list[socket.socket] = []
        try:
            deadline = time.monotonic() + 20
            while not listening(port):
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
            for _ in range(250):
                sock = socket.create_connection(("127.0.0.1", port))
                sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-")
                flood.append(sock)
            async with httpx.AsyncClient(timeout=10) as http:
                during = await http.get(f"http://127.0.0.1:{port}/.mcp-normalizer/livez")
                for _ in range(100):  # the head timeout (2 s) frees the held connections
                    after = await http.get(f"http://127.0.0.1:{port}/.mcp-normalizer/livez")
                    if after.status_code == 200:
                        break
                    await anyio.sleep(0.1)
        finally:
            for sock in flood:
                sock.close()
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=30)
    assert during.status_code in (200, 503)  # an answer, never a hang
    assert after.status_code == 200
    lines = err.decode().splitlines()
    assert len(lines) < 20 and len(err) < 10_000, err[-2000:]  # throttled: one line per kind and interval
    assert all(line.startswith("{") for line in lines)  # JSON lines only, never a bare traceback
    refused = [r for r in map(orjson.loads, lines) if r.get("event") == "refusal" and r["cause"] == "connections"]
    assert len(refused) == 1  # the flood's peer, once in the interval
    assert (refused[0]["status"], refused[0]["env"]) == (503, "MCP_NORMALIZER_MAX_CONNECTIONS")
