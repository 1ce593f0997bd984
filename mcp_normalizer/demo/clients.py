"""Drive real MCP clients against a URL and report what they received (used by the demo and the tests).

- :func:`run_node`: ``@modelcontextprotocol/sdk`` 1.x or ``@modelcontextprotocol/client`` 2.x through
  Node: the script and the lock file ship in the package (``demo/node/``); :func:`install_node_clients`
  installs them with ``npm ci`` (in a checkout ``scripts/bootstrap`` does, next to the script; an
  installed package puts them in the user's cache).
- :func:`run_python`: the Python ``mcp`` ``ClientSession`` (legacy handshake), if ``mcp`` is installed.

Both take a plan of steps (``{"op": "listTools"}``, ``{"op": "callTool", "name": ..., "arguments":
..., "progress": true}``) and return ``{"steps": [{"ok": bool, "value" | "error": ...}], "progress":
[...]}`` per session, the shape ``demo/node/client.mjs`` prints.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

#: The shipped script, ``package.json`` and ``package-lock.json`` of the Node clients.
NODE_HOME = Path(__file__).resolve().parent / "node"
_NODE_FILES = ("client.mjs", "package.json", "package-lock.json")
_STAMP = ".mcp-normalizer-lock"

Step = Mapping[str, Any]


class ClientUnavailable(Exception):
    """The requested client is not installed here."""


def _lock_hash() -> str:
    return hashlib.sha256((NODE_HOME / "package-lock.json").read_bytes()).hexdigest()


def node_dir() -> Path:
    """Where the Node clients run from: ``MCP_NORMALIZER_NODE_DIR`` if set; else the shipped folder
    when its ``node_modules`` is there (a checkout after ``scripts/bootstrap``); else a folder of the
    user's cache named after the lock file (``$XDG_CACHE_HOME``, default ``~/.cache``)."""
    chosen = os.environ.get("MCP_NORMALIZER_NODE_DIR")
    if chosen:
        return Path(chosen)
    if (NODE_HOME / "node_modules").is_dir():
        return NODE_HOME
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "mcp-normalizer" / f"node-clients-{_lock_hash()[:12]}"


def node_available() -> bool:
    """True when Node and the npm clients (:func:`node_dir`) are installed."""
    where = node_dir()
    return (
        shutil.which("node") is not None
        and (where / "node_modules" / "@modelcontextprotocol").is_dir()
        and all((where / name).is_file() for name in _NODE_FILES)
    )


async def install_node_clients(target: Path | None = None) -> Path:
    """Install the shipped Node clients with ``npm ci`` into ``target`` (default :func:`node_dir`),
    copying the script and the lock file there first; a folder installed from the same lock file
    is left as it is. Returns the folder.

    Raises:
        ClientUnavailable: ``node`` or ``npm`` is not on ``PATH``, or ``npm ci`` failed.
    """
    where = target if target is not None else node_dir()
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise ClientUnavailable("node and npm are needed for the TS clients")
    stamp = where / "node_modules" / _STAMP
    if stamp.is_file() and stamp.read_text() == _lock_hash():
        return where
    where.mkdir(parents=True, exist_ok=True)
    if where.resolve() != NODE_HOME:
        for name in _NODE_FILES:
            shutil.copyfile(NODE_HOME / name, where / name)
    done = await anyio.run_process(
        ["npm", "ci", "--omit=dev", "--no-audit", "--no-fund", "--loglevel=error"], cwd=where, check=False
    )
    if done.returncode != 0:
        raise ClientUnavailable(f"npm ci in {where} failed: {done.stderr.decode(errors='replace')[-2000:]}")
    stamp.write_text(_lock_hash())
    return where


def python_available() -> bool:
    """True when the Python ``mcp`` client is importable."""
    try:
        import mcp.client.session  # noqa: F401
    except ImportError:
        return False
    return True


async def run_node(
    sdk: str, sessions: Sequence[Mapping[str, Any]], *, request_timeout: float = 30, timeout: float = 300
) -> list[dict[str, Any]]:
    """Run the TS client (``sdk`` ``"v1"`` or ``"v2"``) over ``sessions``
    (``{"url", "headers"?, "clientName"?, "clientVersion"?, "steps"}``).

    ``request_timeout`` (seconds) bounds each MCP request: a response the client cannot parse is
    never matched to its request, and the client would otherwise wait 60 s for it.

    Raises:
        ClientUnavailable: Node or the npm clients are missing.
        RuntimeError: the script failed or printed something that is not its JSON report.
    """
    if not node_available():
        raise ClientUnavailable(f"node and the npm clients are needed in {node_dir()} (install_node_clients)")
    plan = json.dumps({"sdk": sdk, "timeoutMs": int(request_timeout * 1000), "sessions": list(sessions)})
    where = node_dir()
    with anyio.fail_after(timeout):
        done = await anyio.run_process(["node", str(where / "client.mjs")], input=plan.encode(), check=False, cwd=where)
    if done.returncode != 0:
        raise RuntimeError(f"node client exited {done.returncode}: {done.stderr.decode(errors='replace')[-2000:]}")
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(f"node client printed {done.stdout[-2000:]!r}") from None
    sessions_out: list[dict[str, Any]] = report["sessions"]
    return sessions_out


async def run_python(
    url: str,
    steps: Sequence[Step],
    headers: Mapping[str, str] | None = None,
    *,
    mode: str = "legacy",
    client_name: str | None = None,
    command: Sequence[str] | None = None,
    offer_version: str | None = None,
    elicitation: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run the Python ``mcp`` client over ``steps``.

    Args:
        url: the MCP endpoint (ignored with ``command``).
        steps: the plan (see the module docstring).
        headers: extra request headers (``Authorization``, for example).
        mode: ``"legacy"`` drives ``ClientSession`` (``initialize``, 2025-11-25); any other value is
            the high-level ``Client``'s ``mode`` (``"2026-07-28"``: stateless requests, no handshake;
            ``"auto"``: probe with ``server/discover`` and fall back).
        client_name: the ``clientInfo`` name the client gives (``None``: the SDK's default, ``mcp``).
        command: a stdio server's argv: the client starts it (the SDK's ``stdio_client``; its
            stderr goes to this process's) and speaks the legacy handshake over its stdin and stdout.
        offer_version: the protocol version ``ClientSession`` offers in ``initialize`` (``None``: the
            SDK's newest), as a release of the SDK from that version's time does.
        elicitation: declare the capability and answer each ``elicitation/create`` with this
            (``{"action": "accept", "content": {...}}``, ``{"action": "decline"}``;
            ``{"action": "hang"}`` never answers); the requests are recorded under ``elicitations``.

    Besides ``listTools`` and ``callTool`` (``"cancelAfterProgress": true`` cancels the call when its
    first progress notification arrives), a legacy session takes ``{"op": "waitListChanged",
    "count": 1, "timeoutMs": ...}``: wait until that many ``notifications/tools/list_changed`` came,
    then list the tools again (as a list-changed handler does); every notification the session got
    is recorded under ``notifications`` (its method).

    Raises:
        ClientUnavailable: ``mcp`` is not installed.
    """
    try:
        import httpx2
        from mcp.client.client import Client
        from mcp.client.session import ClientSession
        from mcp.client.streamable_http import streamable_http_client
        from mcp.types import Implementation, PaginatedRequestParams
    except ImportError as exc:
        raise ClientUnavailable(f"the Python mcp client is not installed: {exc}") from None

    import mcp.client.session as session_module
    from mcp.types import ElicitResult

    record: dict[str, Any] = {"steps": [], "progress": [], "notifications": []}
    events = {"progress": anyio.Event(), "changed": anyio.Event()}
    changed = 0

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        record["progress"].append({"progress": progress, "total": total, "message": message})
        events["progress"].set()

    async def on_message(message: Any) -> None:
        nonlocal changed
        method = getattr(message, "method", None)
        if isinstance(method, str):
            record["notifications"].append(method)
            if method == "notifications/tools/list_changed":
                changed += 1
                events["changed"].set()

    async def on_elicit(context: Any, params: Any) -> Any:
        assert elicitation is not None
        record.setdefault("elicitations", []).append(params.model_dump(by_alias=True, mode="json", exclude_none=True))
        if elicitation.get("action") == "hang":
            await anyio.sleep_forever()
        return ElicitResult.model_validate(dict(elicitation))

    async def cancelled_call(session: Any, step: Step) -> bool:
        """Call and cancel at the first progress notification; False when the result came first."""
        events["progress"] = anyio.Event()
        answered = False
        async with anyio.create_task_group() as group:

            async def call() -> None:
                nonlocal answered
                await session.call_tool(step["name"], dict(step.get("arguments") or {}), progress_callback=on_progress)
                answered = True
                group.cancel_scope.cancel()

            async def cancel() -> None:
                await events["progress"].wait()
                group.cancel_scope.cancel()

            group.start_soon(call)
            group.start_soon(cancel)
        return not answered

    def describe(exc: BaseException) -> dict[str, Any]:
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        return {"name": type(exc).__name__, "message": str(exc)}

    async def drive(session: Any) -> None:
        for step in steps:
            try:
                if step["op"] == "listTools":
                    cursor = step.get("cursor")
                    if cursor is None:
                        value: Any = await session.list_tools()
                    elif isinstance(session, ClientSession):
                        value = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
                    else:
                        value = await session.list_tools(cursor=cursor)
                elif step["op"] == "callTool" and step.get("cancelAfterProgress"):
                    if await cancelled_call(session, step):
                        cancelled = {"name": "Cancelled", "message": "cancelled after the first progress notification"}
                        record["steps"].append({"ok": False, "error": cancelled})
                        continue
                    value = {"answered": "before it was cancelled"}
                    record["steps"].append({"ok": True, "value": value})
                    continue
                elif step["op"] == "waitListChanged":
                    with anyio.move_on_after(float(step.get("timeoutMs", 30_000)) / 1000):
                        while changed < int(step.get("count", 1)):
                            await events["changed"].wait()
                            events["changed"] = anyio.Event()
                    if changed < int(step.get("count", 1)):
                        raise TimeoutError("no list change")
                    value = await session.list_tools()
                elif step["op"] == "callTool":
                    value = await session.call_tool(
                        step["name"],
                        dict(step.get("arguments") or {}),
                        progress_callback=on_progress if step.get("progress") else None,
                    )
                else:
                    raise ValueError(f"unknown op {step['op']}")
                dumped = value.model_dump(by_alias=True, mode="json", exclude_none=True)
                record["steps"].append({"ok": True, "value": dumped})
            except Exception as exc:
                record["steps"].append({"ok": False, "error": describe(exc)})

    info = Implementation(name=client_name, version="0.0.1") if client_name is not None else None
    callbacks: dict[str, Any] = {}
    if elicitation is not None:
        callbacks["elicitation_callback"] = on_elicit
    if command is not None:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        server = StdioServerParameters(command=command[0], args=list(command[1:]))
        try:
            async with stdio_client(server) as (read, write), ClientSession(read, write, client_info=info) as session:
                await session.initialize()
                await drive(session)
        except Exception as exc:
            failed = describe(exc)
            record["steps"] += [{"ok": False, "error": failed}] * (len(steps) - len(record["steps"]))
        return record
    try:
        async with httpx2.AsyncClient(headers=dict(headers or {}), timeout=30) as http:
            transport = streamable_http_client(url, http_client=http)
            if mode == "legacy":
                legacy = {**callbacks, "message_handler": on_message}
                handshake = vars(session_module)  # where initialize() reads the version it offers
                newest = handshake["LATEST_HANDSHAKE_VERSION"]
                async with (
                    transport as (read, write),
                    ClientSession(read, write, client_info=info, **legacy) as session,
                ):
                    if offer_version is not None:
                        handshake["LATEST_HANDSHAKE_VERSION"] = offer_version
                    try:
                        await session.initialize()
                    finally:
                        handshake["LATEST_HANDSHAKE_VERSION"] = newest
                    record["protocolVersion"] = session.protocol_version
                    await drive(session)
            else:
                async with Client(transport, mode=mode, client_info=info, **callbacks) as client:
                    record["protocolVersion"] = client.protocol_version
                    await drive(client)
    except Exception as exc:
        failed = describe(exc)
        record["steps"] += [{"ok": False, "error": failed}] * (len(steps) - len(record["steps"]))
    return record
