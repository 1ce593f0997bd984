"""Log lines as JSON objects, one per line, for the ``mcp_normalizer`` loggers (and, in the CLI, uvicorn's)."""

from __future__ import annotations

import json
import logging
import time

import orjson


class JSONFormatter(logging.Formatter):
    """Format a record as one JSON object: ``ts``, ``level``, ``logger``, then either the audit
    fields of a rewrite line or ``message`` (plus ``exc`` when an exception is attached)."""

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        line: dict[str, object] = {"ts": ts, "level": record.levelname.lower(), "logger": record.name}
        audit = getattr(record, "audit", None)
        if isinstance(audit, dict):
            line.update(audit)
        else:
            line["message"] = record.getMessage()
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        suppressed = getattr(record, "suppressed", None)
        if suppressed:
            line["suppressed"] = suppressed  # lines like this one dropped since the last (Throttle)
        try:
            return orjson.dumps(line, default=str).decode()
        except (orjson.JSONEncodeError, TypeError):
            # Integers beyond 64 bits or lone surrogates (a client's JSON-RPC id, a tool name): the
            # standard library writes the integers, and lone surrogates become a visible "\udXXX"
            # text, so the line stays valid UTF-8 JSON; a rewrite is never left without its line.
            return json.dumps(printable(line), default=str, ensure_ascii=False)


def printable(value: object) -> object:
    """``value`` with every string made encodable (lone surrogates written as backslash escapes)."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {printable(k): printable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable(v) for v in value]
    return value


class Throttle(logging.Filter):
    """Lets through one warning or error of a kind per ``interval`` seconds, and counts the rest.

    A kind is the logger, the message template and the exception's type, if any. The first line
    of a kind in an interval passes; the others are dropped and counted, and the next line that
    passes carries the count as ``suppressed``. A flood (a failing accept loop, a peer sending
    garbage a thousand times a second) thus writes one line per interval, never megabytes. Lines
    below ``WARNING`` and the audit log's lines (rewrites, faults, access) always pass.

    Args:
        interval: seconds between two lines of one kind.
        max_kinds: kinds remembered; past it the oldest is forgotten.
    """

    def __init__(self, interval: float = 10.0, max_kinds: int = 1024) -> None:
        super().__init__()
        self.interval = interval
        self.max_kinds = max_kinds
        self._kinds: dict[tuple[str, object, object], list[float]] = {}  # kind -> [last passed at, dropped since]

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or getattr(record, "audit", None) is not None:
            return True  # a rewrite or fault line of the audit log is never dropped
        kind = (record.name, record.msg, record.exc_info[0] if record.exc_info else None)
        now = time.monotonic()
        seen = self._kinds.get(kind)
        if seen is not None and now - seen[0] < self.interval:
            seen[1] += 1
            return False
        if seen is not None and seen[1]:
            record.suppressed = int(seen[1])
        if seen is None and len(self._kinds) >= self.max_kinds:
            del self._kinds[next(iter(self._kinds))]
        self._kinds[kind] = [now, 0]
        return True


PROCESS_LOGGERS = ("uvicorn", "asyncio", "opentelemetry")
"""The loggers a process that owns its logging also sends through :func:`configure_logging` (the CLI does)."""


def configure_logging(level: str, file: str | None = None, *, process: bool = False) -> None:
    """Send the ``mcp_normalizer`` loggers to stderr (or appended to ``file``) as JSON lines at
    ``level``, warnings and errors throttled (:class:`Throttle`).

    Only the ``mcp_normalizer`` logger is touched: its handlers are replaced by the one this
    call makes, its level set, and it stops propagating (so its lines are not printed twice by
    a root handler). A host application's other loggers (uvicorn's, asyncio's, its own) keep
    their handlers. With ``process=True`` (the ``mcp-normalizer`` command, which owns its
    process) the :data:`PROCESS_LOGGERS` get the same treatment, and ``uvicorn.error`` and
    ``uvicorn.access`` lose their own handlers and propagate to ``uvicorn``'s.

    Raises:
        OSError: ``file`` cannot be opened for appending.
    """
    handler: logging.Handler = logging.FileHandler(file, encoding="utf-8") if file else logging.StreamHandler()
    handler.setFormatter(JSONFormatter())
    handler.addFilter(Throttle())
    roots = ("mcp_normalizer", *PROCESS_LOGGERS) if process else ("mcp_normalizer",)
    children = ("uvicorn.error", "uvicorn.access") if process else ()
    for name in (*roots, *children):
        logger = logging.getLogger(name)
        logger.handlers = [handler] if name in roots else []
        logger.propagate = name not in roots
        logger.setLevel(level.upper())
