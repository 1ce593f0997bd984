"""A raw stdio MCP server for the tests: newline-delimited JSON-RPC on stdin/stdout, the standard
library only, so each fault of a child process can be staged exactly.

Usage: ``python stdio_server.py PLAN_JSON`` where the plan is::

    {"tools": [<Tool>...], "results": {"<tool>": <CallToolResult>}, "faults": {...}}

Faults (all optional):
  ``noise``: lines written to stdout before each response (a server that logs to stdout);
  ``stderr``: lines written to stderr at start;
  ``crash_on``: the name of a tool whose call makes the server exit (status ``crash_status``)
      without answering, after ``crash_after`` bytes of a half-written line;
  ``big``: bytes of a text block added to every result of tool ``big_tool`` (one long line);
  ``silent_on``: a tool whose calls are never answered;
  ``ignore_term``: SIGTERM is ignored and stdin's end is not an exit (the process must be killed);
  ``exit_status``: the status to exit with when stdin ends;
  ``progress_on``: a tool whose call sends one ``notifications/progress`` (for the request's
      ``progressToken``), then holds its result until the client sends ``notifications/release``.
  ``ask_on``: a tool whose call sends the client a ``roots/list`` request, then answers with the
      roots the client's response names (as text: ``roots: <uri>,<uri>``);
  ``where_on``: a tool answering with this process's pid, working directory, ``$FIXTURE_NOTE``,
      open descriptors (number -> what it links to) and ``environ``: the environment it was started
      with (``/proc/self/environ``: this interpreter's own changes, such as PEP 538's ``LC_CTYPE``,
      are not in it);
  ``orphan_on``: a tool whose call leaves a process behind that exits: a child that starts a
      grandchild and exits at once (reaped here), the grandchild writing its pid and exiting; the
      call answers with that pid once the grandchild has closed its end of the pipe (it exited), an
      orphan for the proxy's PID namespace's init to reap;
  ``close_stdout_on``: a tool whose call closes stdout and then keeps running, reading stdin;
  ``nan_on``: a tool whose result holds ``NaN`` (Python's ``json.dumps`` default: not JSON);
  a tool named ``release`` answers at once and releases what ``progress_on`` holds (the stateless
      era has no client notification to do it with);
  ``flood_on``: a tool whose call writes ``flood`` progress notifications of ``flood_bytes`` each as
      fast as stdout takes them, then its result, then ``flooded`` on stderr.

  ``js_numbers``: it reads JSON as JavaScript's ``JSON.parse`` (and pydantic's lax mode) do: a number
      written ``1.0`` is the integer ``1`` (so a progress token ``1.0`` is echoed ``1``);
  ``answer_ids``: a ``tools/call`` whose arguments hold ``ids`` (a list of spellings) is answered once
      per spelling, in order, its text ``answered as <spelling>``: ``=`` is the request's id as sent,
      ``float`` that id as a JSON number with a fraction (``float(id)``), any other spelling a string,
      ``spelling.format(id)`` (``" {}"`` writes ``" 7"`` for ``7``).

Every ``notifications/cancelled`` it receives is written to stderr (``cancelled: <requestId>``).

A plan with ``"modern": true`` is a server that speaks only 2026-07-28 over stdio
(``S2026-07-28/basic/index.mdx``): ``initialize`` and every request without the era's
``params._meta`` protocol version get ``-32022`` (``UnsupportedProtocolVersionError``, with the
versions it supports; ``faults.refuse_code`` another code); ``ping`` and the other methods the era
removed get ``-32601``; it answers ``server/discover`` (``serverInfo`` in ``_meta``) and every
result carries ``resultType`` (and ``ttlMs``/``cacheScope`` on ``tools/list``). Each request's
protocol version, ``clientInfo`` name and ``clientCapabilities`` are written to stderr
(``request: <method> <version> <name> <capabilities>``), and each refused one's method
(``refused: <method>``). Its faults:
  ``progress_on``: sends two progress notifications (for the request's ``progressToken``), then
      asks ``Go on?`` (``input_required``: a client reads the progress before it answers); the
      retry's result says whether it carried the same ``progressToken``;
  ``elicit_on``: answers ``input_required`` with an ``elicitation/create`` question under the key
      ``region`` and a ``requestState``; the retry (``inputResponses``, the state echoed) is answered
      with ``{"answer": <the elicitation result>, "state": <the state echoed>}`` as
      ``structuredContent`` and as text;
  ``whoami``: a tool answering with the ``_meta`` the request came with (as ``structuredContent``);
  ``subscriptions/listen`` is acknowledged and stays open: a call of the tool ``touch`` sends
      ``notifications/tools/list_changed`` on it (with its ``subscriptionId``); a
      ``notifications/cancelled`` for it is logged like any other.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any


def modern(params: dict[str, Any]) -> dict[str, Any]:
    """What a 2026-07-28 result carries beside its own members (``resultType``) for ``params``."""
    meta = params.get("_meta") or {}
    return (
        {"resultType": "complete"}
        if str(meta.get("io.modelcontextprotocol/protocolVersion", "")) >= "2026-07-28"
        else {}
    )


def main() -> int:
    plan: dict[str, Any] = json.loads(sys.argv[1])
    faults: dict[str, Any] = plan.get("faults", {})
    out = sys.stdout.buffer
    for line in faults.get("stderr", []):
        sys.stderr.write(line + "\n")
    sys.stderr.flush()
    if faults.get("ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    replies: list[list[Any]] = []  # while a batch is handled: its responses, written as one batch

    def write(message: Any) -> None:
        for noise in faults.get("noise", []):
            out.write(noise.encode() + b"\n")
        out.write(json.dumps(message, ensure_ascii=False).encode() + b"\n")
        out.flush()

    def send(message: dict[str, Any]) -> None:
        if replies and "method" not in message:
            replies[0].append(message)
        else:
            write(message)

    def js_float(text: str) -> float | int:
        value = float(text)
        return int(value) if value.is_integer() else value

    parse_float = js_float if faults.get("js_numbers") else float

    def incoming() -> Any:
        for raw in sys.stdin.buffer:
            decoded = json.loads(raw, parse_float=parse_float)
            if not isinstance(decoded, list):
                yield decoded
                continue
            replies.append([])
            yield from decoded
            answered = replies.pop()
            if answered:
                write(answered)

    if plan.get("modern"):
        return modern_main(plan, faults, send, incoming())
    held: list[Any] = []  # calls of progress_on waiting for notifications/release
    asked: dict[Any, Any] = {}  # roots/list requests sent, by id: the call waiting for each
    for message in incoming():
        method, rid = message.get("method"), message.get("id")
        if method == "notifications/cancelled":
            sys.stderr.write(f"cancelled: {message['params']['requestId']}\n")
            sys.stderr.flush()
            continue
        if method is None and rid in asked:  # the client's answer to roots/list
            roots = ",".join(root["uri"] for root in message.get("result", {}).get("roots", []))
            text = {"type": "text", "text": f"roots: {roots}"}
            send({"jsonrpc": "2.0", "id": asked.pop(rid), "result": {"content": [text]}})
            continue
        if method == "notifications/release":
            for waiting in held:
                send({"jsonrpc": "2.0", "id": waiting, "result": {"content": [{"type": "text", "text": "released"}]}})
            held.clear()
            continue
        if rid is None or method is None:
            continue  # a notification or a response
        params = message.get("params") or {}
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "stdio-fixture", "version": "1.0.0"},
            }
        elif method == "tools/list":
            result = {"tools": plan["tools"]}
        elif method == "tools/call":
            name = params.get("name")
            if name == faults.get("silent_on"):
                continue
            spellings = (params.get("arguments") or {}).get("ids") if faults.get("answer_ids") else None
            if spellings:
                for spelling in spellings:
                    sid = rid if spelling == "=" else float(rid) if spelling == "float" else spelling.format(rid)
                    text = {"type": "text", "text": f"answered as {spelling}"}
                    send({"jsonrpc": "2.0", "id": sid, "result": {"content": [text], **modern(params)}})
                continue
            if name == faults.get("progress_on"):
                token = (params.get("_meta") or {}).get("progressToken")
                progress = {"progressToken": token, "progress": 1, "total": 2, "message": "half way: 12.50 \u2713"}
                send({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
                held.append(rid)
                continue
            if name == faults.get("ask_on"):
                ask = f"roots-{len(asked) + 1}"
                asked[ask] = rid
                send({"jsonrpc": "2.0", "id": ask, "method": "roots/list"})
                continue
            if name == faults.get("flood_on"):
                token = (params.get("_meta") or {}).get("progressToken")
                for i in range(faults["flood"]):
                    filler = f"{i} " + "\u00e9" * (faults["flood_bytes"] // 2)
                    send(
                        {
                            "jsonrpc": "2.0",
                            "method": "notifications/progress",
                            "params": {"progressToken": token, "progress": i, "message": filler},
                        }
                    )
                send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "flood done"}]}})
                sys.stderr.write("flooded\n")
                sys.stderr.flush()
                continue
            if name == "release":
                for waiting in held:
                    text = {"type": "text", "text": "released"}
                    send({"jsonrpc": "2.0", "id": waiting, "result": {"content": [text], **modern(params)}})
                held.clear()
                send({"jsonrpc": "2.0", "id": rid, "result": {"content": [], **modern(params)}})
                continue
            if name == faults.get("orphan_on"):
                read_end, write_end = os.pipe()
                helper = os.fork()
                if helper == 0:  # the helper: starts the grandchild and exits without waiting for it
                    os.close(read_end)
                    if os.fork() == 0:
                        os.write(write_end, str(os.getpid()).encode())
                    os._exit(0)
                os.close(write_end)
                os.waitpid(helper, 0)
                chunks = []
                while chunk := os.read(read_end, 64):  # to the end: the grandchild has exited
                    chunks.append(chunk)
                os.close(read_end)
                text = {"type": "text", "text": b"".join(chunks).decode()}
                send({"jsonrpc": "2.0", "id": rid, "result": {"content": [text]}})
                continue
            if name == faults.get("close_stdout_on"):
                os.close(1)
                continue
            if name == faults.get("nan_on"):
                out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"x": float("nan")}}).encode() + b"\n")
                out.flush()
                continue
            if name == faults.get("where_on"):
                note = os.environ.get("FIXTURE_NOTE")
                fds = {}
                for fd in os.listdir("/proc/self/fd"):
                    try:
                        fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
                    except OSError:
                        continue  # listdir's own, closed by now
                with open("/proc/self/environ", "rb") as fh:
                    pairs = [entry.partition(b"=") for entry in fh.read().split(b"\0") if entry]
                environ = {os.fsdecode(name): os.fsdecode(value) for name, _, value in pairs}
                where = json.dumps(
                    {"pid": os.getpid(), "cwd": os.getcwd(), "note": note, "fds": fds, "environ": environ}
                )
                send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": where}]}})
                continue
            if name == faults.get("crash_on"):
                out.write(b'{"jsonrpc":"2.0","id":'[: faults.get("crash_after", 10)])
                out.flush()
                os._exit(faults.get("crash_status", 3))
            result = json.loads(json.dumps(plan["results"][name]))
            if name == faults.get("big_tool"):
                result["content"].append({"type": "text", "text": "x" * faults["big"]})
        elif method == "ping":
            result = {}
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})
            continue
        if str((params.get("_meta") or {}).get("io.modelcontextprotocol/protocolVersion", "")) >= "2026-07-28":
            result = {**result, "resultType": "complete"}  # a stateless-era request: that era's result
            if method == "tools/list":
                result.update(ttlMs=0, cacheScope="public")
        send({"jsonrpc": "2.0", "id": rid, "result": result})
    if faults.get("ignore_term"):
        while True:
            signal.pause()
    return int(faults.get("exit_status", 0))


MODERN_VERSION = "2026-07-28"
VERSION_META = "io.modelcontextprotocol/protocolVersion"
SUBSCRIPTION_META = "io.modelcontextprotocol/subscriptionId"


def modern_main(plan: dict[str, Any], faults: dict[str, Any], send: Any, messages: Any) -> int:
    """The ``"modern": true`` server (see the module docstring)."""
    listening: list[Any] = []  # the ids of the open subscriptions/listen requests
    for message in messages:
        method, rid = message.get("method"), message.get("id")
        params = message.get("params") or {}
        meta = params.get("_meta") or {}
        if method == "notifications/cancelled":
            requested = params.get("requestId")
            sys.stderr.write(f"cancelled: {requested}\n")
            sys.stderr.flush()
            if requested in listening:
                listening.remove(requested)
            continue
        if rid is None or method is None:
            continue  # a notification or a response: the era's client sends no responses
        if meta.get(VERSION_META) != MODERN_VERSION:
            sys.stderr.write(f"refused: {method}\n")
            sys.stderr.flush()
            code = faults.get("refuse_code", -32022)
            data = {"supported": [MODERN_VERSION], "requested": meta.get(VERSION_META, params.get("protocolVersion"))}
            error = {"code": code, "message": "Unsupported protocol version", "data": data}
            send({"jsonrpc": "2.0", "id": rid, "error": error})
            continue
        info = meta.get("io.modelcontextprotocol/clientInfo") or {}
        caps = meta.get("io.modelcontextprotocol/clientCapabilities")
        sys.stderr.write(f"request: {method} {meta.get(VERSION_META)} {info.get('name')} {json.dumps(caps)}\n")
        sys.stderr.flush()
        result: dict[str, Any]
        if method == "server/discover":
            result = {
                "supportedVersions": [MODERN_VERSION],
                "capabilities": {"tools": {"listChanged": True}},
                "instructions": "Ask for the weather in Zürich.",
                "ttlMs": 0,
                "cacheScope": "public",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern-stdio-fixture", "version": "2.0.0"}},
            }
        elif method == "subscriptions/listen":
            listening.append(rid)
            ack = {"notifications": params.get("notifications") or {}, "_meta": {SUBSCRIPTION_META: rid}}
            send({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": ack})
            continue
        elif method == "tools/list":
            result = {"tools": plan["tools"], "ttlMs": 0, "cacheScope": "public"}
        elif method == "tools/call":
            name = params.get("name")
            if name == faults.get("silent_on"):
                continue
            if name == "touch":
                for listen in listening:
                    changed = {"_meta": {SUBSCRIPTION_META: listen}}
                    send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": changed})
                result = {"content": []}
            elif name == faults.get("progress_on") and "inputResponses" not in params:
                token = meta.get("progressToken")
                for step, note in ((1, "half way: 12.50 \u2713"), (2, "done")):
                    progress = {"progressToken": token, "progress": step, "total": 2, "message": note}
                    send({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
                schema = {"type": "object", "properties": {}}
                confirm = {
                    "method": "elicitation/create",
                    "params": {"message": "Go on? \u2713", "requestedSchema": schema},
                }
                state = json.dumps({"token": token})
                asks = {"confirm": confirm}
                result = {"resultType": "input_required", "inputRequests": asks, "requestState": state}
                send({"jsonrpc": "2.0", "id": rid, "result": result})
                continue
            elif name == faults.get("progress_on"):
                kept = json.loads(params["requestState"])["token"] == meta.get("progressToken")
                result = json.loads(json.dumps(plan["results"][name]))
                result["content"].append({"type": "text", "text": f"the progress token came back: {kept}"})
            elif name == faults.get("elicit_on") and "inputResponses" not in params:
                question = {
                    "method": "elicitation/create",
                    "params": {
                        "message": "Which region? (Zürich or 東京)",
                        "requestedSchema": {"type": "object", "properties": {"region": {"type": "string"}}},
                    },
                }
                state = "asked=région;n=12.50"  # (opaque: the client echoes it as it came)
                result = {"resultType": "input_required", "inputRequests": {"region": question}, "requestState": state}
                send({"jsonrpc": "2.0", "id": rid, "result": result})
                continue
            elif name == faults.get("elicit_on"):
                answer = {"answer": params["inputResponses"].get("region"), "state": params.get("requestState")}
                text = {"type": "text", "text": json.dumps(answer, ensure_ascii=False)}
                result = {"content": [text], "structuredContent": answer}
            elif name == "whoami":
                text = {"type": "text", "text": json.dumps(meta, ensure_ascii=False)}
                result = {"content": [text], "structuredContent": meta}
            else:
                result = json.loads(json.dumps(plan["results"][name]))
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})
            continue
        send({"jsonrpc": "2.0", "id": rid, "result": {**result, "resultType": "complete"}})
    return int(faults.get("exit_status", 0))


if __name__ == "__main__":
    sys.exit(main())
