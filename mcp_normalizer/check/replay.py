"""Replay a capture of real traffic through the proxy's own response path, offline: nothing is called.

Input: JSON lines. Each line is either a capture record as the proxy writes it
(``{"ts", "scope", "era", "message"}``, see :mod:`mcp_normalizer.engine.capture`) or a bare JSON-RPC message (one
conversation: ids must be unique in the file). Requests are paired with their responses by scope
and JSON-RPC id, and every response (and every notification) goes through a
:class:`~mcp_normalizer.engine.transform.ResponseTransformer`, the code the proxy runs on the wire, with the
auditor's report-only rules and one scope store for the whole file: so a replay sees what the proxy
saw (tool lists learned per scope and ``cacheScope: "public"`` lists for every scope, tasks and
their final results, ``resultType`` other than ``complete`` left alone). A capture has no clock:
the tool lists it holds stay valid until the next list or ``list_changed``. For bare messages the
era comes from the ``initialize`` exchange or a request's ``_meta`` protocol version. Lines that are
not JSON, and responses to requests the file does not hold, are counted in the audit's notes.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from typing import Any

from ..engine.audit import AuditLog
from ..engine.exchange import Exchange
from ..engine.normalize import Record
from ..engine.scopes import ScopeStore
from ..engine.transform import ResponseTransformer
from ..errors import DecodeError
from ..types import JSON, JSONObject
from ..wire.jsoncodec import dumps, loads
from ..wire.jsonrpc import PROTOCOL_VERSION_META, TOOLS_CALL, TOOLS_LIST, IdKey, PendingRequest, id_key, inspect_request
from .auditor import Auditor

_JSON = [(b"content-type", b"application/json")]


class _Records(AuditLog):
    """The transformer's rewrite log, handed to the auditor instead of written."""

    def __init__(self, auditor: Auditor) -> None:
        super().__init__("capture", logging.getLogger("mcp_normalizer.check"))
        self.auditor = auditor

    def emit(self, record: Record, *, method: str, **line: Any) -> None:
        self.auditor.add(record, "tools/list" if method == TOOLS_LIST else "tools/call")


def replay(lines: Iterable[bytes], auditor: Auditor) -> None:
    """Feed every request/response pair (and notification) of ``lines`` to ``auditor``."""
    store = ScopeStore()
    records = _Records(auditor)
    pending: dict[tuple[str, IdKey], PendingRequest] = {}
    eras: dict[str, str] = {}
    skipped = unpaired = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            record = loads(line)
        except DecodeError:
            skipped += 1
            continue
        envelope = isinstance(record, dict) and "message" in record and "jsonrpc" not in record
        message = record["message"] if envelope else record
        if not isinstance(message, dict):
            skipped += 1
            continue
        try:
            body = dumps(message)
        except DecodeError:  # a lone surrogate the stdlib decoder let through
            skipped += 1
            continue
        scope = str(record.get("scope") or "") if envelope else ""
        era = record.get("era") if envelope and isinstance(record.get("era"), str) else None
        era = era or eras.get(scope) or _era_of(message)
        if era is not None and scope not in eras:
            eras[scope] = era
        key = id_key(message.get("id"))
        method = message.get("method")
        if isinstance(method, str) and key is not None:  # a request: remembered until its response
            info = inspect_request(body, [])
            if info is not None:
                pending[(scope, key)] = info.pending[key]
            elif method == "initialize":
                pending[(scope, key)] = PendingRequest("initialize")
            continue
        watched: dict[IdKey, PendingRequest] = {}
        if not isinstance(method, str):  # a response
            request = pending.pop((scope, key), None) if key is not None else None
            if key is None or request is None:
                unpaired += "result" in message
                continue
            result = message.get("result")
            if request.method == "initialize":
                if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
                    eras[scope] = result["protocolVersion"]  # the server's choice, not the client's offer
                continue
            _observe(auditor, request, result, era, scope, store)
            watched = {key: request}
        _transform(body, watched, era, scope, store, auditor, records)  # responses and notifications
    if skipped:
        auditor.audit.notes.append(f"{skipped} lines are not JSON-RPC messages or capture records: skipped")
    if unpaired:
        auditor.audit.notes.append(f"{unpaired} responses answer requests the capture does not hold: skipped")


def _observe(
    auditor: Auditor, request: PendingRequest, result: JSON, era: str | None, scope: str, store: ScopeStore
) -> None:
    """What the transformer does not report: the shape of a tool list, the advisories of a result."""
    if not isinstance(result, dict):
        return
    auditor.era(era)
    if request.method == TOOLS_LIST:
        auditor.list_shape(result, scope, first_page=request.cursor is None)
    elif request.method == TOOLS_CALL and result.get("resultType", "complete") == "complete" and "task" not in result:
        exchange = Exchange({}, era, scope, store.state(scope), store.public)
        auditor.advise(request.tool, result, exchange.tool(request.tool), scope)


def _transform(
    body: bytes,
    pending: dict[IdKey, PendingRequest],
    era: str | None,
    scope: str,
    store: ScopeStore,
    auditor: Auditor,
    records: AuditLog,
) -> None:
    """Run one message (``body``) through the proxy's response path (report-only: nothing changes)."""
    exchange = Exchange(pending, era, scope, store.state(scope), store.public, lists_expire=False)
    transformer = ResponseTransformer(
        exchange, auditor.normalizer, records, slice_seconds=math.inf
    )  # offline: no loop to share
    transformer.start(200, _JSON)
    transformer.feed(body)
    transformer.finish()


def _era_of(message: JSONObject) -> str | None:
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    version: JSON = meta.get(PROTOCOL_VERSION_META) if isinstance(meta, dict) else None
    if version is None and message.get("method") == "initialize":
        version = params.get("protocolVersion")
    return version if isinstance(version, str) else None
