"""Log lines as JSON objects, one per line, for every ``mcp_normalizer`` logger (and uvicorn's)."""

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


def configure_logging(level: str) -> None:
    """Send ``mcp_normalizer`` and ``uvicorn`` logs to stderr as JSON lines at ``level``."""
    handler = logging.StreamHandler()
    handler.setFormatter(JSONFormatter())
    for name in ("mcp_normalizer", "uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers = [handler] if name in ("mcp_normalizer", "uvicorn") else []
        logger.propagate = name not in ("mcp_normalizer", "uvicorn")
        logger.setLevel(level.upper())
