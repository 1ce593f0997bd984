"""Replay a capture of real traffic through the auditor, offline: nothing is called.

Input: JSON lines. Each line is either a capture record as the proxy writes it
(``{"ts", "scope", "era", "message"}``, see :mod:`proxy.capture`) or a bare JSON-RPC message (one
conversation: ids must be unique in the file). Requests are paired with their responses by
scope and JSON-RPC id; ``tools/list`` results teach the auditor the tools of their scope, and
``tools/call`` results (and ``tasks/result`` results of a task-augmented call) are audited with the
tool's schema. For bare messages, the era comes from an ``initialize`` request or a request's
``_meta`` protocol version. Lines that are not JSON, and responses to requests the file does not
hold, are counted in the audit's notes, never fatal.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import DecodeError
from ..jsoncodec import loads
from ..jsonrpc import PROTOCOL_VERSION_META, TASKS_RESULT, TOOLS_CALL, TOOLS_LIST, IdKey, id_key
from ..types import JSON, JSONObject
from .auditor import Auditor


def replay(lines: Iterable[bytes], auditor: Auditor) -> None:
    """Feed every request/response pair of ``lines`` to ``auditor``."""
    pending: dict[tuple[str, IdKey], tuple[str, str | None]] = {}
    eras: dict[str, str | None] = {}
    tasks: dict[tuple[str, str], str | None] = {}
    skipped = unpaired = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            record = loads(line)
        except DecodeError:
            skipped += 1
            continue
        if not isinstance(record, dict):
            skipped += 1
            continue
        if "message" in record and "jsonrpc" not in record:
            scope = str(record.get("scope") or "")
            era = record.get("era") if isinstance(record.get("era"), str) else None
            message = record["message"]
        else:
            scope, era, message = "", None, record
        if not isinstance(message, dict):
            skipped += 1
            continue
        era = era or eras.get(scope) or _era_of(message)
        if era is not None:
            eras.setdefault(scope, era)
        key = id_key(message.get("id"))
        if isinstance(message.get("method"), str):
            if key is not None:
                params = message.get("params")
                name = params.get("name") if isinstance(params, dict) else None
                if message["method"] == TASKS_RESULT and isinstance(params, dict):
                    name = tasks.get((scope, str(params.get("taskId"))))
                pending[(scope, key)] = (message["method"], name if isinstance(name, str) else None)
            continue
        request = pending.pop((scope, key), None) if key is not None else None
        result = message.get("result")
        if not isinstance(result, dict):
            continue
        if request is None:
            unpaired += 1
            continue
        method, tool = request
        if method == "initialize" and isinstance(result.get("protocolVersion"), str):
            eras[scope] = result["protocolVersion"]  # the server's choice, not the client's offer
        elif method == TOOLS_LIST:
            auditor.tools_list(result, era, scope)
        elif method == TOOLS_CALL and isinstance(result.get("task"), dict):
            tasks[(scope, str(result["task"].get("taskId")))] = tool  # the real result comes via tasks/result
        elif method in (TOOLS_CALL, TASKS_RESULT):
            auditor.tools_call(tool, result, era, scope)
    if skipped:
        auditor.audit.notes.append(f"{skipped} lines are not JSON-RPC messages or capture records: skipped")
    if unpaired:
        auditor.audit.notes.append(f"{unpaired} responses answer requests the capture does not hold: skipped")


def _era_of(message: JSONObject) -> str | None:
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    version: JSON = meta.get(PROTOCOL_VERSION_META) if isinstance(meta, dict) else None
    if version is None and message.get("method") == "initialize":
        version = params.get("protocolVersion")
    return version if isinstance(version, str) else None
