"""The container image and the deployment examples, checked without a Docker engine.

No Docker engine runs on the dev machines or in CI, so the image is never built here. These tests
read the Dockerfile's final stage (its ``ENV``, ``ENTRYPOINT``/``CMD``, ``HEALTHCHECK``) and run that
exact command line on this machine: ``.venv/bin`` stands in for the image's venv on ``PATH``, the
environment is the Dockerfile's ``ENV`` plus ``MCP_NORMALIZER_UPSTREAM`` (a fixture upstream on
loopback) and ``MCP_NORMALIZER_PORT`` (a free port). Two deliberate differences from the image:
``MCP_NORMALIZER_HOST`` is ``127.0.0.1`` (tests listen on loopback only), and the interpreter is the
venv's, not the image's. Where ``unshare`` can, the command runs as PID 1 of a PID namespace of its
own, as the exec-form ``ENTRYPOINT`` does in a container (PID 1 matters for signals).

``config/compose.yaml`` and ``config/k8s/sidecar.yaml`` are read and held to the proxy: their probe
paths are its admin endpoints, every ``MCP_NORMALIZER_*`` variable is one it reads (and their values
load), and their ports and URLs agree with each other, with the image and with the MCP server they run.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import orjson
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from mcp_normalizer.config import NormalizerConfig, ProxyConfig, Settings
from mcp_normalizer.demo.clients import run_node, run_python
from mcp_normalizer.demo.upstream import (
    FORBIDDEN,
    RUNTIMES,
    ScriptedServer,
    ToolCall,
    ToolSpec,
    protean_server,
    protean_tools,
)
from mcp_normalizer.keys import variables
from mcp_normalizer.types import JSONObject
from mcp_normalizer.wire.hosts import HostPolicy

from .support import HEADERS, PROBLEM_KEY, ROOT, free_port, listening, serve

pytestmark = pytest.mark.wire

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
COMPOSE = ROOT / "config" / "compose.yaml"
K8S = ROOT / "config" / "k8s" / "sidecar.yaml"
VENV_BIN = Path(sys.executable).parent  # stands in for the image's venv
EVERYTHING = ROOT / "tests" / "node" / "node_modules" / "@modelcontextprotocol" / "server-everything"
EXIT_BOUND = 60.0  # seconds: a generous upper bound on any process exit, never a measurement


# -- reading the Dockerfile ------------------------------------------------------------------------


@dataclass(frozen=True)
class Stage:
    """One build stage: its base image, its name and its instructions (keyword upper case, rest)."""

    base: str
    name: str | None
    instructions: tuple[tuple[str, str], ...]

    def all(self, keyword: str) -> list[str]:
        return [rest for kw, rest in self.instructions if kw == keyword]

    def last(self, keyword: str) -> str:
        found = self.all(keyword)
        assert found, f"the stage has no {keyword}"
        return found[-1]


def instructions(text: str) -> list[tuple[str, str]]:
    """The Dockerfile's instructions, continuation lines joined, comments and blank lines dropped."""
    found: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue  # a comment inside a continued instruction is dropped too, as Docker does
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, rest = (pending + line).partition(" ")
        found.append((keyword.upper(), rest.strip()))
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued instruction"
    return found


def stages(text: str) -> list[Stage]:
    result: list[Stage] = []
    current: list[tuple[str, str]] = []
    base, name = "", None
    for keyword, rest in instructions(text):
        if keyword == "FROM":
            if base:
                result.append(Stage(base, name, tuple(current)))
            words = rest.split()
            assert not words[0].startswith("--"), "FROM flags are not read here"
            base, name, current = words[0], (words[2] if len(words) == 3 and words[1].upper() == "AS" else None), []
        else:
            current.append((keyword, rest))
    result.append(Stage(base, name, tuple(current)))
    return result


def env_of(stage: Stage) -> dict[str, str]:
    """The stage's ``ENV`` values as written (``$VAR`` references not expanded)."""
    env: dict[str, str] = {}
    for rest in stage.all("ENV"):
        words = shlex.split(rest)
        if "=" not in words[0]:  # the legacy form: ENV KEY value with spaces
            env[words[0]] = rest.split(None, 1)[1]
            continue
        for word in words:
            key, sep, value = word.partition("=")
            assert sep, f"ENV {rest!r}: {word!r} is not KEY=value"
            env[key] = value
    return env


def exec_form(rest: str, what: str) -> list[str]:
    """A JSON-array (exec form) instruction argument; the shell form fails the test (no signals to PID 1)."""
    try:
        argv = json.loads(rest)
    except json.JSONDecodeError:
        pytest.fail(f"{what} {rest!r} is not in exec form (a JSON array)")
    assert isinstance(argv, list) and all(isinstance(arg, str) for arg in argv), rest
    return argv


@functools.cache
def final_stage() -> Stage:
    return stages(DOCKERFILE.read_text(encoding="utf-8"))[-1]


def image_env() -> dict[str, str]:
    return env_of(final_stage())


def image_command() -> list[str]:
    """``ENTRYPOINT`` followed by ``CMD``, as the container runs them."""
    stage = final_stage()
    return exec_form(stage.last("ENTRYPOINT"), "ENTRYPOINT") + exec_form(stage.last("CMD"), "CMD")


def healthcheck_command() -> list[str]:
    rest = final_stage().last("HEALTHCHECK")
    match = re.fullmatch(r"((?:--[a-z-]+=\S+\s+)*)CMD\s+(.+)", rest, re.DOTALL)
    assert match, f"HEALTHCHECK {rest!r} is not [--option=value ...] CMD [...]"
    return exec_form(match[2], "HEALTHCHECK CMD")


def image_user() -> tuple[int, int]:
    user, _, group = final_stage().last("USER").partition(":")
    assert user.isdigit() and (not group or group.isdigit()), "USER must be numeric (runAsNonRoot checks it)"
    return int(user), int(group or user)


def local_env(**extra: str) -> dict[str, str]:
    """This process's environment (less any ``MCP_NORMALIZER_*``), the image's ``ENV`` with the venv
    mapped to this one, then ``extra``."""
    base = {key: value for key, value in os.environ.items() if not key.startswith("MCP_NORMALIZER_")}
    env = dict(base)
    written = image_env()
    venv = written["VIRTUAL_ENV"]
    for key, value in written.items():
        if key == "VIRTUAL_ENV":
            env[key] = str(VENV_BIN.parent)
        elif key == "PATH":
            assert value == f"{venv}/bin:$PATH", "PATH puts the image's venv first"
            env[key] = f"{VENV_BIN}{os.pathsep}{base.get('PATH', os.defpath)}"
        else:
            assert "$" not in value, f"ENV {key}={value!r}: expand it here"
            env[key] = value
    env.update(extra)
    return env


# -- running the image's command -------------------------------------------------------------------


@functools.cache
def as_pid_1() -> tuple[str, ...]:
    """An ``unshare`` prefix that runs a command as PID 1 of a new PID namespace, or ``()`` where this
    machine does not allow it (then the command runs as an ordinary child)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return ()
    for prefix in (
        (unshare, "--pid", "--fork", "--kill-child"),
        (unshare, "--user", "--map-root-user", "--pid", "--fork", "--kill-child"),
    ):
        if subprocess.run([*prefix, "true"], capture_output=True, timeout=30, check=False).returncode == 0:
            return prefix
    return ()


def exit_codes_after_sigterm() -> set[int]:
    """What the image's process exits with after SIGTERM: 0, as PID 1 (the container) or not."""
    return {0}


def healthcheck(env: Mapping[str, str]) -> int:
    """Run the Dockerfile's HEALTHCHECK command; its exit code."""
    done = subprocess.run(healthcheck_command(), env=dict(env), capture_output=True, timeout=30, check=False)
    return done.returncode


@dataclass
class ImageProcess:
    """The image's command running here."""

    process: subprocess.Popen[bytes]
    env: dict[str, str]
    log: Path

    @property
    def port(self) -> int:
        return int(self.env["MCP_NORMALIZER_PORT"])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_lines(self) -> list[dict[str, Any]]:
        return [orjson.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines() if line.strip()]

    def proxy_pid(self) -> int:
        """The proxy's own process: the namespace's PID 1 (``unshare``'s child), else the process started."""
        if not as_pid_1():
            return self.process.pid
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        assert len(children) == 1, children
        return int(children[0])

    def sigterm(self) -> None:
        os.kill(self.proxy_pid(), signal.SIGTERM)

    def wait(self) -> int:
        return self.process.wait(timeout=EXIT_BOUND)


def wait_until(condition: Callable[[], bool], what: str, process: subprocess.Popen[bytes] | None = None) -> None:
    """Poll ``condition`` (a bounded loop: the interval is not a synchronisation)."""
    deadline = time.monotonic() + EXIT_BOUND
    while not condition():
        assert process is None or process.poll() is None, f"the process exited ({process.returncode}) before {what}"
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


@contextmanager
def image_process(upstream: str, log: Path, **extra: str) -> Iterator[ImageProcess]:
    """Run the image's command in front of ``upstream`` until its HEALTHCHECK passes; on leaving, stop it
    with SIGTERM (if it still runs) and wait for it."""
    port = free_port()
    while port == int(image_env()["MCP_NORMALIZER_PORT"]):  # not the default: the port must come from the env
        port = free_port()
    env = local_env(
        **{
            "MCP_NORMALIZER_HOST": "127.0.0.1",
            "MCP_NORMALIZER_UPSTREAM": upstream,
            "MCP_NORMALIZER_PORT": str(port),
            **extra,
        }
    )
    workdir = (final_stage().all("WORKDIR") or ["/"])[-1]
    with log.open("wb") as err:
        process = subprocess.Popen([*as_pid_1(), *image_command()], env=env, cwd=workdir, stdout=err, stderr=err)
    running = ImageProcess(process, env, log)
    try:
        wait_until(lambda: healthcheck(env) == 0, "the HEALTHCHECK passed", process)
        yield running
    finally:
        if process.poll() is None:
            with suppress(AssertionError, OSError):  # the proxy already gone: unshare ends by itself
                running.sigterm()
            try:
                process.wait(timeout=EXIT_BOUND)
            except subprocess.TimeoutExpired:
                process.kill()  # --kill-child takes the proxy along
                process.wait()


# -- the Dockerfile --------------------------------------------------------------------------------


def test_the_image_is_a_slim_multi_stage_build_of_the_package_run_as_a_non_root_user() -> None:
    builder, *_, final = stages(DOCKERFILE.read_text(encoding="utf-8"))
    env = image_env()
    venv = env["VIRTUAL_ENV"]
    # The venv is built in the builder and copied whole; both stages share the interpreter it links to.
    assert builder.base == final.base and "slim" in final.base and ":" in final.base
    assert f"--from={builder.name} {venv} {venv}" in final.all("COPY")
    assert not any(re.search(r"\b(pip|apt-get|apk)\b", run) for run in final.all("RUN")), "the final stage installs"
    assert any(re.search(r"\bwheel\b.*\s\.\s", run) for run in builder.all("RUN")), "the builder builds the package"
    uid, gid = image_user()
    assert uid != 0 and gid != 0
    assert env["MCP_NORMALIZER_HOST"] == "0.0.0.0"
    # On 0.0.0.0 the image does what the MCP SDKs do: no allow-list, so a container that dials the
    # service by name is served; the deployment files name their own lists (tests below).
    assert not {"MCP_NORMALIZER_ALLOWED_HOSTS", "MCP_NORMALIZER_ALLOWED_ORIGINS"} & set(env)
    image_hosts = HostPolicy()
    assert image_hosts.check("normalizer:8765", None, "172.17.0.2") is None  # by a compose service name
    assert image_hosts.check("127.0.0.1:8765", None, "127.0.0.1") is None  # the HEALTHCHECK's
    assert final.last("EXPOSE").split() == [env["MCP_NORMALIZER_PORT"]]
    assert image_command()[0] == "mcp-normalizer"
    assert "livez" in " ".join(healthcheck_command())
    # Every file the builder copies is let into the build context by the .dockerignore whitelist.
    allowed = {line[1:].rstrip("/") for line in DOCKERIGNORE.read_text().splitlines() if line.startswith("!")}
    for copy in builder.all("COPY"):
        *sources, _ = copy.split()
        for source in sources:
            assert source.rstrip("/") in allowed, f"COPY {source} is excluded by .dockerignore"
            assert (ROOT / source).exists(), source


def test_the_healthcheck_fails_until_the_image_command_serves_then_passes(tmp_path: Path) -> None:
    with serve(protean_server()) as up:
        unstarted = local_env(MCP_NORMALIZER_PORT=str(free_port()))
        assert healthcheck(unstarted) != 0  # nothing listens there: the check is not vacuous
        with image_process(up + "/mcp", tmp_path / "proxy.log") as image:
            assert healthcheck(image.env) == 0
            assert image.port != int(image_env()["MCP_NORMALIZER_PORT"])  # the check read MCP_NORMALIZER_PORT
            ready = httpx.get(image.url + "/.mcp-normalizer/readyz", timeout=10)
            assert ready.status_code == 200
            image.sigterm()
            assert image.wait() in exit_codes_after_sigterm()
        assert healthcheck(image.env) != 0
    assert any(line.get("message", "").startswith("listening on") for line in image.log_lines())


STEPS: list[dict[str, Any]] = [
    {"op": "listTools"},
    {"op": "callTool", "name": "protean.scope_list"},
    {"op": "callTool", "name": "protean.list_runtimes"},
]


@pytest.mark.anyio
async def test_real_clients_get_normalized_results_through_the_image_command(tmp_path: Path) -> None:
    mounted = tmp_path / "normalizer.toml"  # the operator's rule file, mounted into the container
    mounted.write_text('[tools."protean.list_runtimes"]\nnullable = ["/runtimes/*/scope"]\n', encoding="utf-8")
    logged = tmp_path / "proxy.log"
    with serve(protean_server()) as up, image_process(up + "/mcp", logged, MCP_NORMALIZER_CONFIG=str(mounted)) as image:
        python = await run_python(image.url + "/mcp", STEPS)
        ts_sdk_1 = (await run_node("v1", [{"url": image.url + "/mcp", "steps": STEPS}]))[0]
    for client, record in {"python": python, "ts-sdk-1": ts_sdk_1}.items():
        steps = record["steps"]
        assert all(step["ok"] for step in steps), (client, steps)
        scope_list, list_runtimes = steps[1]["value"], steps[2]["value"]
        assert scope_list["isError"] is True and "structuredContent" not in scope_list, client
        assert scope_list["_meta"][PROBLEM_KEY] == FORBIDDEN, client
        assert list_runtimes["structuredContent"] == RUNTIMES, client
    rules = sorted(line["rule"] for line in image.log_lines() if line.get("event") == "rewrite")
    assert rules == ["error_problem", "error_problem", "nullable", "nullable"]  # one client each


def own_address() -> str:
    """An address of this machine that is not loopback (how a container's peers reach it), or skip."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: the kernel only picks the source address
        except OSError:
            pytest.skip("this machine has no route off loopback: a peer container cannot be stood in for")
        address: str = probe.getsockname()[0]
    if address.startswith("127."):
        pytest.skip("this machine has no address but loopback")
    return address


def initialize(url: str, host: str) -> httpx.Response:
    """An ``initialize`` POST to ``url`` naming ``host`` in its ``Host`` header (a name only DNS on
    the deployment's network resolves)."""
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "caf\u00e9", "version": "1"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    return httpx.post(url, content=orjson.dumps(body), headers={**HEADERS, "host": host}, timeout=30)


def test_the_image_as_shipped_is_called_by_a_service_name_and_says_its_check_is_off(tmp_path: Path) -> None:
    """The image's exact command and environment (``MCP_NORMALIZER_HOST=0.0.0.0`` kept, for once:
    the connection must arrive on a non-loopback address, as it does in a container), called the
    way another container calls it: ``http://normalizer:PORT/mcp``."""
    address = own_address()
    logged = tmp_path / "proxy.log"
    with serve(protean_server()) as up:
        with image_process(up + "/mcp", logged, MCP_NORMALIZER_HOST=image_env()["MCP_NORMALIZER_HOST"]) as image:
            answer = initialize(f"http://{address}:{image.port}/mcp", f"normalizer:{image.port}")
            refused = initialize(f"{image.url}/mcp", f"normalizer:{image.port}")  # on loopback: loopback names only
    assert answer.status_code == 200, answer.text
    assert '"serverInfo":{"name":"protean-legacy"' in answer.text  # the server's answer (SSE)
    assert refused.status_code == 421
    lines = image.log_lines()
    warnings = [line["message"] for line in lines if line["level"] == "warning" and "message" in line]
    assert any("Host and Origin not checked" in message and "ALLOWED_HOSTS" in message for message in warnings)


def test_a_refused_call_is_logged_once_with_its_setting_counted_and_named_in_the_body(tmp_path: Path) -> None:
    """The compose file's environment: its service name is served; a name it does not list gets 421,
    with the setting in the body, one log line for three refusals, and a count in /metrics."""
    address = own_address()
    services = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]
    (name,) = (n for n, service in services.items() if "build" in service)
    allowed = services[name]["environment"]["MCP_NORMALIZER_ALLOWED_HOSTS"]
    logged = tmp_path / "proxy.log"
    with serve(protean_server()) as up:
        extra = {"MCP_NORMALIZER_HOST": "0.0.0.0", "MCP_NORMALIZER_ALLOWED_HOSTS": allowed}
        with image_process(up + "/mcp", logged, **extra) as image:
            url = f"http://{address}:{image.port}/mcp"
            served = initialize(url, f"{name}:{image.port}")
            refusals = [initialize(url, "rebind.evil.example") for _ in range(3)]
            metrics = httpx.get(f"{image.url}/.mcp-normalizer/metrics", timeout=30).text
    assert served.status_code == 200, served.text
    for refused in refusals:
        assert refused.status_code == 421
        error = refused.json()["error"]
        assert refused.json()["id"] is None and "allowed_hosts" in error["message"]
        assert "MCP_NORMALIZER_ALLOWED_HOSTS" in error["message"] and "rebind" not in error["message"]
    lines = [line for line in image.log_lines() if line.get("event") == "refusal"]
    assert len(lines) == 1, lines
    (line,) = lines
    assert (line["cause"], line["status"], line["setting"], line["peer"]) == ("host", 421, "allowed_hosts", address)
    assert "rebind.evil.example" in line["detail"]
    assert 'mcp_normalizer_refusals_total{cause="host"} 3.0' in metrics


def post(url: str, method: str, params: JSONObject, rid: int) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    return httpx.post(url, content=orjson.dumps(body), headers=HEADERS, timeout=30)


def test_a_mounted_config_file_named_by_mcp_normalizer_config_is_honoured(tmp_path: Path) -> None:
    mounted = tmp_path / "etc" / "mcp-normalizer" / "normalizer.toml"
    mounted.parent.mkdir(parents=True)
    mounted.write_text(
        "[normalizer]\nreport_only = true\n\n[proxy]\naccess_log = true\n\n"
        '[tools."protean.list_runtimes"]\nnullable = ["/runtimes/*/scope"]\n',
        encoding="utf-8",
    )
    calls = [("tools/list", {}), ("tools/call", {"name": "protean.scope_list", "arguments": {}})]
    with (
        serve(protean_server("json")) as up,
        image_process(up + "/mcp", tmp_path / "proxy.log", MCP_NORMALIZER_CONFIG=str(mounted)) as image,
    ):
        for rid, (method, params) in enumerate(calls, start=1):
            direct = post(up + "/mcp", method, params, rid)
            proxied = post(image.url + "/mcp", method, params, rid)
            assert proxied.status_code == direct.status_code == 200
            assert proxied.content == direct.content, method  # report_only: not one byte changed
    lines = image.log_lines()
    rewrites = [line for line in lines if line.get("event") == "rewrite"]
    assert {(line["rule"], line["applied"]) for line in rewrites} == {("error_problem", False), ("nullable", False)}
    assert any(line.get("event") == "access" for line in lines)  # the file's [proxy] table is read too


# -- SIGTERM ---------------------------------------------------------------------------------------


@dataclass
class HeldCall:
    """An upstream whose ``held`` tool sends one progress notification, then waits for ``release``
    before answering with the Protean problem (so the proxy has something to normalize)."""

    release: threading.Event

    def server(self) -> ScriptedServer:
        async def held(call: ToolCall) -> JSONObject:
            await call.progress(1, 2, "holding")
            await anyio.to_thread.run_sync(self.release.wait, abandon_on_cancel=True)
            return {"content": [], "structuredContent": FORBIDDEN, "isError": True}

        tool = {**protean_tools()[0].tool, "name": "held"}
        return ScriptedServer([ToolSpec(tool, held)])


def sse_data(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """The decoded ``data`` of each SSE event of ``response``, as it arrives."""
    data: list[str] = []
    for line in response.iter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield orjson.loads("\n".join(data))
            data = []


@contextmanager
def held_stream(image: ImageProcess) -> Iterator[Iterator[dict[str, Any]]]:
    """A ``tools/call`` of ``held`` through the image's process, once its first event (the progress
    notification) has come through: the SSE stream is open end to end. Yields the rest of the events."""
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "held", "arguments": {}, "_meta": {"progressToken": "p"}},
    }
    with (
        httpx.Client(timeout=EXIT_BOUND) as http,
        http.stream("POST", image.url + "/mcp", content=orjson.dumps(body), headers=HEADERS) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse_data(response)
        assert next(events)["method"] == "notifications/progress"
        yield events


def test_sigterm_lets_an_open_stream_finish_then_the_process_exits(tmp_path: Path) -> None:
    upstream = HeldCall(threading.Event())
    try:
        with (
            serve(upstream.server()) as up,
            image_process(up + "/mcp", tmp_path / "proxy.log", MCP_NORMALIZER_GRACEFUL_SHUTDOWN="30") as image,
            held_stream(image) as events,
        ):
            image.sigterm()
            # The proxy has begun its graceful shutdown once it stops accepting connections.
            wait_until(lambda: not listening(image.port), "the proxy stopped listening")
            assert image.process.poll() is None  # still serving the open stream
            upstream.release.set()
            rest = list(events)
            code = image.wait()
    finally:
        upstream.release.set()
    assert [event.get("id") for event in rest] == [7]
    result = rest[0]["result"]
    assert result["isError"] is True and result["_meta"][PROBLEM_KEY] == FORBIDDEN  # normalized while draining
    assert code in exit_codes_after_sigterm()
    assert not any("graceful shutdown exceeded" in line.get("message", "") for line in image.log_lines())


def test_sigterm_cuts_a_stream_that_outlasts_graceful_shutdown_and_the_process_still_exits(tmp_path: Path) -> None:
    upstream = HeldCall(threading.Event())
    received: list[dict[str, Any]] = []
    try:
        with (
            serve(upstream.server()) as up,
            image_process(up + "/mcp", tmp_path / "proxy.log", MCP_NORMALIZER_GRACEFUL_SHUTDOWN="1") as image,
            held_stream(image) as events,
        ):
            image.sigterm()
            with pytest.raises(httpx.TransportError):  # the body ends without its last chunk
                received.extend(events)
            code = image.wait()
    finally:
        upstream.release.set()
    assert received == []  # the held result never came
    assert code in exit_codes_after_sigterm()
    assert any("graceful shutdown exceeded" in line.get("message", "") for line in image.log_lines())


# -- compose and Kubernetes ------------------------------------------------------------------------


def known_variables() -> set[str]:
    """Every ``MCP_NORMALIZER_*`` variable the proxy reads (process settings and ``[proxy]`` keys)."""
    return variables(Settings, ProxyConfig)


def everything_server() -> tuple[str, str, int]:
    """server-everything as the tests install it: its version, its MCP path and its default port."""
    version = json.loads((EVERYTHING / "package.json").read_text(encoding="utf-8"))["version"]
    source = (EVERYTHING / "dist" / "transports" / "streamableHttp.js").read_text(encoding="utf-8")
    path = re.search(r'app\.post\("([^"]+)"', source)
    port = re.search(r"process\.env\.PORT \|\| (\d+)", source)
    assert path and port, "server-everything's transport changed: read it again"
    return version, path[1], int(port[1])


def assert_runs_everything(command: list[str], env: Mapping[str, str]) -> int:
    """The MCP server's command runs the tests' server-everything version; returns the port it listens on."""
    version, _, default_port = everything_server()
    assert f"@modelcontextprotocol/server-everything@{version}" in command
    assert command[-1] == "streamableHttp"
    return int(env.get("PORT", default_port))


def loaded(env: Mapping[str, str], mounts: Mapping[str, Path]) -> tuple[Settings, NormalizerConfig]:
    """Load ``env`` as the proxy would, the config file read from where it is mounted from."""
    environ = dict(env)
    if "MCP_NORMALIZER_CONFIG" in environ:
        environ["MCP_NORMALIZER_CONFIG"] = str(mounts[environ["MCP_NORMALIZER_CONFIG"]])
    settings = Settings.from_env(environ)
    return settings, settings.load_config()


def test_deployment_files_name_only_variables_the_proxy_reads() -> None:
    known = known_variables()
    for path in (DOCKERFILE, COMPOSE, K8S):
        named = set(re.findall(r"MCP_NORMALIZER_[A-Z_]+", path.read_text(encoding="utf-8")))
        assert named and named <= known, (path.name, sorted(named - known))


def seconds(duration: str) -> float:
    match = re.fullmatch(r"(\d+)s", duration)
    assert match, f"{duration!r}: write compose durations in seconds"
    return float(match[1])


def test_compose_puts_the_sidecar_in_front_of_the_server_and_publishes_only_its_port() -> None:
    services: dict[str, Any] = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]
    (name,) = (n for n, service in services.items() if "build" in service)
    (server_name,) = (n for n in services if n != name)
    normalizer, server = services[name], services[server_name]
    assert (COMPOSE.parent / normalizer["build"]["context"]).resolve() == ROOT
    assert normalizer["build"].get("dockerfile", "Dockerfile") == DOCKERFILE.name

    env: dict[str, str] = normalizer["environment"]
    assert all(isinstance(value, str) for value in env.values()), "quote every value"
    assert {key for key in env if key.startswith("MCP_NORMALIZER_")} <= known_variables()
    mounts = {}
    for volume in normalizer.get("volumes", []):
        source, target, *_ = volume.split(":")
        mounts[target] = (COMPOSE.parent / source).resolve()
    settings, config = loaded(env, mounts)

    server_port = assert_runs_everything(server["command"], server["environment"])
    upstream = urlsplit(settings.upstream)
    assert (upstream.hostname, upstream.port, upstream.path) == (server_name, server_port, everything_server()[1])
    assert [str(port) for port in server["expose"]] == [str(server_port)]
    assert "ports" not in server  # only the normalizer is published
    published = [str(port).rsplit(":", 1) for port in normalizer["ports"]]
    assert [int(container) for _, container in published] == [settings.port]
    assert settings.port == int(image_env()["MCP_NORMALIZER_PORT"])  # the port the image exposes
    # The published loopback port is what clients dial: loopback names pass, a rebound name does not,
    # although the container sees the connection arrive on its own (non-loopback) address.
    hosts = HostPolicy(config.proxy.allowed_hosts, config.proxy.allowed_origins)
    assert hosts.check(f"localhost:{settings.port}", "http://localhost:3000", "172.18.0.3") is None
    assert hosts.check(f"{name}:{settings.port}", None, "172.18.0.3") is None  # by its service name
    assert hosts.check("rebind.evil.example", None, "172.18.0.3") is not None
    assert hosts.check(f"localhost:{settings.port}", "http://rebind.evil.example", "172.18.0.3") is not None

    assert normalizer["depends_on"][server_name]["condition"] == "service_healthy" and "healthcheck" in server
    assert seconds(normalizer["stop_grace_period"]) > config.proxy.graceful_shutdown
    assert normalizer["read_only"] is True and normalizer["cap_drop"] == ["ALL"]


def k8s_env(variables: list[dict[str, Any]], fields: Mapping[str, str]) -> dict[str, str]:
    """A container's environment as Kubernetes gives it: literal values, downward-API ``fieldRef``
    values from ``fields`` (field path -> value), and ``$(NAME)`` replaced by an earlier variable's
    value (an unknown name stays as written, ``$$`` is a literal ``$``)."""
    env: dict[str, str] = {}
    for variable in variables:
        name = variable["name"]
        if "valueFrom" in variable:
            path = variable["valueFrom"]["fieldRef"]["fieldPath"]
            assert path in fields, f"{name}: the downward API field {path} is not modelled"
            env[name] = fields[path]
            continue
        value = variable.get("value")
        assert isinstance(value, str), f"{name}: a literal string value"

        def expand(match: re.Match[str]) -> str:
            return "$" if match[0] == "$$" else env.get(match[1], match[0])

        env[name] = re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", expand, value)
    return env


def k8s_ports(container: Mapping[str, Any]) -> dict[str | int, int]:
    """A container's ports by name and by number."""
    ports: dict[str | int, int] = {}
    for port in container.get("ports", []):
        ports[port["containerPort"]] = port["containerPort"]
        if "name" in port:
            ports[port["name"]] = port["containerPort"]
    return ports


def pre_stop_sleep(container: Mapping[str, Any]) -> float:
    command = container["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep" and len(command) == 2, command
    return float(command[1])


def test_k8s_sidecar_probes_env_ports_and_grace_periods_agree_with_the_proxy(tmp_path: Path) -> None:
    docs = [doc for doc in yaml.safe_load_all(K8S.read_text(encoding="utf-8")) if doc]
    kinds = {doc["kind"]: doc for doc in docs}
    assert sorted(kinds) == sorted(doc["kind"] for doc in docs), "one object of each kind"
    deployment, service, config_map = kinds["Deployment"], kinds["Service"], kinds["ConfigMap"]
    pod = deployment["spec"]["template"]
    spec = pod["spec"]
    containers = {container["name"]: container for container in spec["containers"]}
    (name,) = (n for n, c in containers.items() if any(e["name"] == "MCP_NORMALIZER_UPSTREAM" for e in c["env"]))
    (server_name,) = (n for n in containers if n != name)
    normalizer, server = containers[name], containers[server_name]

    namespace = "tenant-a"  # not "default": the names must follow the pod's namespace
    env = k8s_env(normalizer["env"], {"metadata.namespace": namespace})
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    mounts = {}
    for mount in normalizer.get("volumeMounts", []):
        source = volumes[mount["name"]]["configMap"]
        assert source["name"] == config_map["metadata"]["name"]
        for key, text in config_map["data"].items():
            (tmp_path / key).write_text(text, encoding="utf-8")
            mounts[f"{mount['mountPath']}/{key}"] = tmp_path / key
    assert {key for key in env if key.startswith("MCP_NORMALIZER_")} <= known_variables()
    settings, config = loaded(env, mounts)  # the ConfigMap's rule file loads
    assert env.get("MCP_NORMALIZER_CONFIG") in mounts

    server_env = {variable["name"]: variable["value"] for variable in server["env"]}
    server_port = assert_runs_everything(server["command"], server_env)
    upstream = urlsplit(settings.upstream)
    assert upstream.hostname in ("127.0.0.1", "localhost")  # the server container, in the same pod
    assert (upstream.port, upstream.path) == (server_port, everything_server()[1])
    assert server_port in k8s_ports(server).values()

    ports = k8s_ports(normalizer)
    assert settings.port in ports.values()
    admin = config.proxy.admin_prefix
    hosts = HostPolicy(config.proxy.allowed_hosts, config.proxy.allowed_origins)
    pod_ip = "10.1.2.3"  # the kubelet's probes and the Service's traffic arrive on the pod's address
    for probe, endpoint in (("livenessProbe", "livez"), ("readinessProbe", "readyz")):
        get = normalizer[probe]["httpGet"]
        assert get["path"] == f"{admin}/{endpoint}", probe
        assert ports[get["port"]] == settings.port, probe
        probe_host = {h["name"].lower(): h["value"] for h in get.get("httpHeaders", [])}.get("host", pod_ip)
        assert hosts.check(probe_host, None, pod_ip) is None, f"{probe}: its Host is accepted"
    service_name = service["metadata"]["name"]
    for dialled in (service_name, f"{service_name}.{namespace}.svc", f"{service_name}.{namespace}.svc.cluster.local"):
        assert hosts.check(f"{dialled}:{settings.port}", None, pod_ip) is None  # what clients dial, any namespace
    assert hosts.check(f"{service_name}.default.svc:{settings.port}", None, pod_ip) is not None  # another's
    assert hosts.check("rebind.evil.example", None, pod_ip) is not None  # set explicitly: not "any"

    labels = pod["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= labels.items()
    targets = [port["targetPort"] for port in service["spec"]["ports"]]
    assert all(target in ports for target in targets), f"{targets}: the Service targets the normalizer only"
    assert [ports[target] for target in targets] == [settings.port]
    policy = kinds["NetworkPolicy"]["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    assert [ports[port["port"]] for rule in policy["ingress"] for port in rule["ports"]] == [settings.port]

    assert spec["securityContext"]["runAsNonRoot"] is True
    assert normalizer["securityContext"]["runAsUser"] == image_user()[0]
    for container in containers.values():
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False and context["capabilities"]["drop"] == ["ALL"]
        assert container["resources"]["requests"] and container["resources"]["limits"]

    # SIGTERM reaches both containers at once: the server outlives the normalizer's drain, and the pod's
    # grace period outlasts both.
    drain = pre_stop_sleep(normalizer) + config.proxy.graceful_shutdown
    assert pre_stop_sleep(server) >= drain
    assert spec["terminationGracePeriodSeconds"] > max(drain, pre_stop_sleep(server))


# -- the build: pinned, hashed, nothing resolved ----------------------------------------------------


def pinned(path: Path) -> dict[str, str]:
    """The ``name==version`` pins of a requirement file, every one checked to carry a hash."""
    pins: dict[str, str] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", path.read_text(encoding="utf-8")):
        match = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", block)
        if match is None:
            continue
        assert "--hash=sha256:" in block, f"{match[1]} has no hash"
        pins[canonicalize_name(match[1])] = match[2]
    return pins


def test_the_image_pins_and_hashes_every_dependency_of_the_package() -> None:
    pins = pinned(ROOT / "requirements" / "image.txt")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    for text in [*project["dependencies"], *extras["otel"], *extras["redis"]]:  # the image's extras too
        wanted = Requirement(text.split("#")[0])
        name = canonicalize_name(wanted.name)
        assert name in pins, f"{name} is not pinned in requirements/image.txt"
        assert pins[name] in wanted.specifier, (name, pins[name], str(wanted.specifier))
    build = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["build-system"]["requires"]
    backend = pinned(ROOT / "requirements" / "build.txt")
    for text in build:
        wanted = Requirement(text.split("#")[0])
        assert backend[canonicalize_name(wanted.name)] in wanted.specifier


def test_the_builder_stage_runs_as_written_from_the_pinned_hashes(tmp_path: Path) -> None:
    """The builder's RUN lines, run here as written (``/opt/venv``, ``/src`` and ``/tmp/wheel`` mapped
    into a temporary folder, its ``pip`` a fresh one of this Python): every install is by hash, the
    package without dependencies, and the venv it leaves runs the proxy."""
    (builder, _final) = stages(DOCKERFILE.read_text(encoding="utf-8"))
    src = tmp_path / "src"
    paths = {"/opt/venv": str(tmp_path / "venv"), "/tmp/wheel": str(tmp_path / "wheel")}
    tools = tmp_path / "builder"
    subprocess.run([sys.executable, "-m", "venv", str(tools)], check=True, timeout=120)
    env = {**os.environ, "PATH": f"{tools / 'bin'}{os.pathsep}{os.environ['PATH']}", **env_of(builder)}
    env.pop("VIRTUAL_ENV", None)
    runs, cwd = 0, tmp_path
    for keyword, rest in builder.instructions:
        for image_path, local in paths.items():
            rest = rest.replace(image_path, local)
        if keyword == "WORKDIR":
            assert rest == "/src"
            src.mkdir()
            cwd = src
        elif keyword == "COPY":
            *sources, target = rest.split()
            for source in sources:  # a folder's contents into the target folder; a file into it
                if (ROOT / source).is_dir():
                    left_out = shutil.ignore_patterns("node_modules", "__pycache__", "*.pyc")  # .dockerignore
                    shutil.copytree(ROOT / source, src / target, symlinks=True, dirs_exist_ok=True, ignore=left_out)
                else:
                    (src / target).mkdir(parents=True, exist_ok=True)
                    shutil.copy(ROOT / source, src / target)
        elif keyword == "RUN":
            for command in rest.split(" && "):
                if "install" in command and "-r requirements/" in command:
                    assert "--require-hashes" in command and "--no-deps" in command, command
                elif "install" in command:
                    assert "--no-deps" in command, command  # the package: its dependencies came pinned
            done = subprocess.run(rest, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, (rest, done.stderr[-3000:])
            runs += 1
    assert runs == 3
    venv = tmp_path / "venv" / "bin"
    done = subprocess.run([str(venv / "mcp-normalizer"), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "--upstream" in done.stdout, done.stderr
    names = "import importlib.metadata as m; print({d.metadata['Name'] for d in m.distributions()})"
    frozen = subprocess.run([str(venv / "python"), "-c", names], capture_output=True, text=True, check=True)
    installed = {canonicalize_name(name) for name in ast.literal_eval(frozen.stdout)}
    extras = "import redis.asyncio, opentelemetry.sdk.trace, opentelemetry.exporter.otlp.proto.http.trace_exporter"
    subprocess.run([str(venv / "python"), "-c", extras], check=True, timeout=60)  # the image traces, shares state
    assert installed == set(pinned(ROOT / "requirements" / "image.txt")) | {"mcp-normalizer"}
