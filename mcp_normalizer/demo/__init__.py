"""``mcp-normalizer demo``: the main job on a built-in example.

Starts the legacy Protean upstream (:func:`~mcp_normalizer.demo.upstream.protean_server`), puts the proxy in
front of it (the same app ``mcp-normalizer --upstream`` runs), calls every tool with each real strict
client available here (TS SDK 1.32.2 and ``@modelcontextprotocol/client`` 2.x through Node, the
Python ``mcp`` client) directly and through the proxy, prints what each got, and then keeps serving
both URLs so you can point your own client at them. The rewrite log goes to stderr as JSON lines.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
from typing import Any, Literal

import anyio
import uvicorn

from ..app import create_app
from ..config import Settings
from ..engine.audit import REWRITE_LOGGER
from ..hop.server import bind, uvicorn_config
from ..ops.logs import JSONFormatter, configure_logging
from .clients import (
    ClientUnavailable,
    install_node_clients,
    node_available,
    node_dir,
    python_available,
    run_node,
    run_python,
)
from .upstream import protean_server

CALLS = [
    ("protean.scope_list", {}),
    ("protean.list_runtimes", {}),
    ("protean.deploy", {"service": "billing"}),
    ("protean.whoami", {}),
]


def _cut(text: str, width: int) -> str:
    """``text`` shortened at a word boundary to at most ``width`` characters, marked with an ellipsis."""
    if len(text) <= width:
        return text
    return text[: width - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def _summary(step: dict[str, Any], progress: int) -> str:
    """One line for a table cell: what the client handed to its caller."""
    if not step["ok"]:
        return "THROWS " + _cut(str(step["error"]["message"]).replace("\n", " "), 120)
    value = step["value"]
    parts = ["isError" if value.get("isError") else "ok"]
    if progress:
        parts.append(f"{progress} progress notifications first")
    texts = [b.get("text", "") for b in value.get("content", []) if b.get("type") == "text"]
    parts.append("text " + json.dumps(_cut(texts[0], 70), ensure_ascii=False) if texts else "no text")
    meta = value.get("_meta") or {}
    problems = [k for k in meta if k.endswith("/problem")]
    if problems:
        parts.append(f"_meta[{problems[0]!r}].code={meta[problems[0]].get('code')!r}")
    if "structuredContent" in value:
        compact = json.dumps(value["structuredContent"], separators=(", ", ": "), ensure_ascii=False)
        parts.append("structuredContent " + _cut(compact, 110))
    return ", ".join(parts)


async def _compare(direct: str, proxied: str) -> list[tuple[str, str, str, str]]:
    steps = [{"op": "listTools"}] + [
        {"op": "callTool", "name": name, "arguments": args, "progress": True} for name, args in CALLS
    ]
    rows: list[tuple[str, str, str, str]] = []
    results: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    if not node_available() and shutil.which("node") and shutil.which("npm"):
        print(f"Installing the TS MCP clients once (npm ci) into {node_dir()} ...")
        sys.stdout.flush()
        await install_node_clients()
    if node_available():
        for sdk, label in (("v1", "TS SDK 1.32.2"), ("v2", "TS client 2.4.0")):
            got = await run_node(sdk, [{"url": direct, "steps": steps}, {"url": proxied, "steps": steps}])
            results[label] = (got[0], got[1])
    else:
        print("TS clients skipped: they need node and npm on PATH")
    if python_available():
        results["Python mcp 2.3.0"] = (await run_python(direct, steps), await run_python(proxied, steps))
    else:
        print("Python client skipped: the mcp package is not installed (pip install mcp)")
    for index, (name, _) in enumerate(CALLS, start=1):
        for label, (via_direct, via_proxy) in results.items():
            progress = name == "protean.deploy"
            rows.append(
                (
                    name,
                    label,
                    _summary(via_direct["steps"][index], len(via_direct["progress"]) if progress else 0),
                    _summary(via_proxy["steps"][index], len(via_proxy["progress"]) if progress else 0),
                )
            )
    return rows


def _print_rows(rows: list[tuple[str, str, str, str]]) -> None:
    if not rows:
        print("No real client is installed here (run scripts/bootstrap): nothing to compare.")
        return
    current = None
    for tool, client, direct, proxied in rows:
        if tool != current:
            print(f"\n{tool}")
            current = tool
        print(f"  {client}")
        print(f"    direct : {direct}")
        print(f"    proxied: {proxied}")


class _HeldLines(logging.Handler):
    """Keeps formatted log lines to print later."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(JSONFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def run_demo(
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    upstream_port: int = 8766,
    response_mode: Literal["sse", "json"] = "sse",
    once: bool = False,
) -> int:
    """Run the demo; returns the exit code (2 when a port cannot be bound)."""
    socks = []
    for wanted in (upstream_port, port):
        try:
            socks.append(bind(host, wanted))
        except OSError as exc:
            print(f"mcp-normalizer: error: cannot listen on {host}:{wanted}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    up_sock, px_sock = socks
    direct = f"http://{host}:{up_sock.getsockname()[1]}/mcp"
    proxied = f"http://{host}:{px_sock.getsockname()[1]}/mcp"
    configure_logging("info", process=True)
    # While the clients run, rewrite log lines are held and printed after the table, not between its rows.
    held = _HeldLines()
    rewrite_log = logging.getLogger(REWRITE_LOGGER)
    rewrite_log.addHandler(held)
    rewrite_log.propagate = False
    quiet = {
        "log_config": None,
        "log_level": "warning",
        "access_log": False,
        "server_header": False,
        "date_header": False,
    }
    upstream = uvicorn.Server(uvicorn.Config(protean_server(response_mode), **quiet))  # type: ignore[arg-type]
    settings = Settings(upstream=direct)  # no rule file: the shipped defaults
    config = settings.load_config()
    proxy = uvicorn.Server(uvicorn_config(create_app(settings, config=config), config.proxy, log_level="warning"))

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(upstream.serve, [up_sock])
            tg.start_soon(proxy.serve, [px_sock])
            while not (upstream.started and proxy.started):
                await anyio.sleep(0.05)
            print(f"Legacy Protean upstream: {direct}\nmcp-normalizer proxy:    {proxied}")
            print("What strict MCP clients get for each tool, directly and through the proxy:")
            try:
                _print_rows(await _compare(direct, proxied))
            except (ClientUnavailable, RuntimeError) as exc:
                print(f"client run failed: {exc}")
            print(f"\nThe rewrite log meanwhile ({len(held.lines)} lines, JSON; on stderr while serving):")
            for line in held.lines:
                print(line)
            rewrite_log.removeHandler(held)
            rewrite_log.propagate = True
            if once:
                upstream.should_exit = proxy.should_exit = True
                return
            print(f"\nServing. Point your client at {proxied} (or {direct} to see the raw server). Ctrl-C stops.")
            sys.stdout.flush()

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        pass
    return 0
