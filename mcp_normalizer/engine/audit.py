"""The rewrite log: one JSON line per rewrite, on the logger ``mcp_normalizer.rewrite`` (DESIGN section 4).

Each line carries the time, rule, the fault kind it repairs (``cases/faults.md``), action, tool,
JSON-RPC id, the hashed session/authorization scope, the era, the client it was made for, the JSON
pointers touched and a short reason (validator path and keyword). Payload values
and header values are never written: the scope is a hash and reasons are built without values.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..types import JSON
from .normalize import Record
from .rules import RULES_BY_NAME
from .rules.host_profiles import host_for
from .rules.withhold import repairing_rule

if TYPE_CHECKING:
    from ..ops.metrics import Metrics  # counted into when given; the engine never builds one

REWRITE_LOGGER = "mcp_normalizer.rewrite"
#: Something else that hears of each record: ``sink(record, jsonrpc_id, client)``.
Sink = Callable[[Record, JSON, str], None]


def kind_of(rule: str, event: str) -> str:
    """The fault kind behind a log line (and a span event): its rule's, or the event's
    (``unrepaired``, ``skipped``...)."""
    found = RULES_BY_NAME.get(rule)
    return found.kind if found is not None and event in ("rewrite", "withheld") else event


class AuditLog:
    """Writes :class:`~mcp_normalizer.engine.normalize.Record` objects as rewrite log lines.

    Args:
        upstream: a label for the upstream (its URL, or ``"in-process"``), added to each line.
        logger: where lines go (default ``mcp_normalizer.rewrite``).
        metrics: also count each line in ``rewrites_total``.
    """

    def __init__(
        self,
        upstream: str,
        logger: logging.Logger | None = None,
        metrics: Metrics | None = None,
        sinks: tuple[Sink, ...] = (),
    ) -> None:
        self.upstream = upstream
        self.logger = logger or logging.getLogger(REWRITE_LOGGER)
        self.metrics = metrics
        self.sinks = sinks

    def with_sink(self, sink: Sink) -> AuditLog:
        """This log, also handing each record to ``sink`` (``sink(record, jsonrpc_id, client)``,
        after the line is written; a traced exchange's span events, for one)."""
        return AuditLog(self.upstream, self.logger, self.metrics, (*self.sinks, sink))

    def emit(
        self,
        record: Record,
        *,
        method: str,
        jsonrpc_id: JSON,
        scope: str,
        era: str | None,
        listed: bool = True,
        client: str = "unknown",
        upstream_era: str | None = None,
    ) -> None:
        """Log one record as one line (``extra["audit"]`` holds the fields for formatters and tests).

        ``listed`` says whether the upstream listed the record's tool: a name it did not list (any
        client can send any name) is counted under ``tool="unlisted"``, so clients cannot fill the
        bounded set of tool labels. ``client`` is who the message went to (its ``clientInfo`` name,
        or ``unknown``: the repair was then made for every client; :mod:`mcp_normalizer.engine.rules.clients`).
        """
        rewrite = record.rewrite
        fields = {
            "event": record.event,
            "rule": rewrite.rule,
            "kind": kind_of(rewrite.rule, record.event),
            "action": rewrite.action,
            "applied": record.applied,
            "method": method,
            "tool": record.tool,
            "jsonrpc_id": jsonrpc_id,
            "scope": scope,
            "era": era,
            "client": client,
            "upstream": self.upstream,
            "pointers": list(rewrite.pointers),
            "reason": rewrite.reason,
        }
        if upstream_era is not None:
            fields["upstream_era"] = upstream_era  # the era bridge speaks another era upstream
        if rewrite.for_clients:
            fields["client_fault"] = rewrite.for_clients  # made for clients not known to accept the original
        if rewrite.lossy:
            fields["lossy"] = True  # the client no longer gets something where it reads it (rule degrade)
        if rewrite.fix:
            fields["fix"] = rewrite.fix  # the TOML that would repair what no default repair does
        if rewrite.host_fault:
            fields["host_fault"] = rewrite.host_fault  # the host fault it is about (a tool withheld: why)
        level = logging.INFO if record.event == "rewrite" else logging.WARNING
        # The text says what the JSON fields say, for a host whose handler formats only the message
        # (middleware mode): rule, action, tool, id, pointers; never a value.
        self.logger.log(
            level,
            "%s %s: %s (applied=%s method=%s tool=%r id=%r pointers=%s client=%r)",
            record.event,
            rewrite.rule,
            rewrite.action,
            str(record.applied).lower(),
            method,
            record.tool,
            jsonrpc_id,
            ",".join(rewrite.pointers) or "-",
            client,
            extra={"audit": fields},
        )
        if self.metrics is not None:
            tool = self.metrics.tool_label(record.tool) if listed else "unlisted"
            self.metrics.rewrites.labels(rewrite.rule, tool, record.event, str(record.applied).lower()).inc()
            if record.event == "withheld" and record.applied:
                host = host_for(client)
                profile = host.profile if host is not None else "unknown"
                self.metrics.tools_withheld.labels(
                    profile, rewrite.host_fault, repairing_rule(rewrite.host_fault)
                ).inc()
        for sink in self.sinks:
            sink(record, jsonrpc_id, client)
