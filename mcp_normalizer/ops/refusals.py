"""Refusals: every request the proxy turns away itself, with its cause, the setting that would
allow it, a count in ``/metrics`` and a log line once per cause and peer.

A refusal is the proxy's own answer to a request it will not pass on: a ``Host`` or ``Origin``
not allowed (421, 403), a head or body too large (431, 413), a head or body too slow (408), too
many connections or stdio children (503), a proxy shutting down (503). An operator who sees one
wants to know why and what to change; a client flooding refused requests must not flood the log.

- :data:`CAUSES` names each cause: its HTTP status, what it means, and the ``[proxy]`` setting (and
  its ``MCP_NORMALIZER_*`` variable) that changes it.
- :func:`refusal_message` is the JSON-RPC error message the client gets: the cause and the setting.
- :class:`RefusalLog` counts each refusal (``mcp_normalizer_refusals_total{cause}``) and logs it at
  ``WARNING`` on logger ``mcp_normalizer.refusals``: the first of a cause from a peer, then at most
  one per ``interval`` seconds for that pair, carrying how many were not logged since
  (``suppressed``). Each line is a JSON object with ``event: "refusal"``, ``cause``, ``status``,
  ``peer``, ``setting``, ``env`` and ``detail``.

Pure bookkeeping: no I/O but the log call.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..types import Scope
    from .metrics import Metrics

logger = logging.getLogger("mcp_normalizer.refusals")  # a name operators filter on, not the module path


@dataclass(frozen=True, slots=True)
class Cause:
    """Why a request is refused.

    Attributes:
        key: its name (the ``cause`` label and log field).
        status: the HTTP status of the refusal.
        meaning: what happened, as the client is told.
        setting: the ``[proxy]`` key that changes it, ``""`` when no setting does.
    """

    key: str
    status: int
    meaning: str
    setting: str = ""

    @property
    def env(self) -> str:
        """The environment variable of :attr:`setting` (``""`` when there is none)."""
        return f"MCP_NORMALIZER_{self.setting.upper()}" if self.setting else ""


HOST = Cause("host", 421, "Host not allowed", "allowed_hosts")
ORIGIN = Cause("origin", 403, "Origin not allowed", "allowed_origins")
DUPLICATE_HOST = Cause("duplicate_host", 400, "more than one Host header")
DUPLICATE_ORIGIN = Cause("duplicate_origin", 400, "more than one Origin header")
HEAD_SIZE = Cause("head_size", 431, "request header fields too large", "max_header_bytes")
HEAD_TIMEOUT = Cause("head_timeout", 408, "request head not received in time", "head_timeout")
BODY_TIMEOUT = Cause("body_timeout", 408, "request body not received in time", "body_timeout")
BODY_SIZE = Cause("body_size", 413, "request body too large", "max_request_bytes")
CONNECTIONS = Cause("connections", 503, "too many connections", "max_connections")
CHILDREN = Cause("children", 503, "too many stdio server sessions", "max_children")
SHUTTING_DOWN = Cause("shutting_down", 503, "the proxy is shutting down")

#: Every cause, by key (the troubleshooting table of the docs is made from it).
CAUSES: dict[str, Cause] = {
    cause.key: cause
    for cause in (
        HOST,
        ORIGIN,
        DUPLICATE_HOST,
        DUPLICATE_ORIGIN,
        HEAD_SIZE,
        HEAD_TIMEOUT,
        BODY_TIMEOUT,
        BODY_SIZE,
        CONNECTIONS,
        CHILDREN,
        SHUTTING_DOWN,
    )
}


def refusal_message(cause: Cause, detail: str = "") -> str:
    """The error message a refused client gets: what happened, ``detail`` (a limit, never a value
    the client sent), and the setting that changes it."""
    text = f"{cause.meaning} ({detail})" if detail else cause.meaning
    if cause.setting:
        text += f"; the proxy's setting {cause.setting} ({cause.env}) allows it"
    return text


class RefusalLog:
    """Counts refusals and logs each cause and peer at most once per ``interval`` seconds.

    Args:
        metrics: where ``mcp_normalizer_refusals_total{cause}`` is counted (``None``: not counted).
        interval: seconds between two log lines of one cause and peer; ``0`` logs every refusal.
        max_pairs: cause and peer pairs remembered; past it the least recently refused is forgotten
            (its next refusal is logged again), so a scan from many addresses holds bounded memory.
    """

    def __init__(self, metrics: Metrics | None = None, *, interval: float = 60.0, max_pairs: int = 4096) -> None:
        self.interval = interval
        self.max_pairs = max_pairs
        self._counter = metrics.refusals if metrics is not None else None
        self._pairs: OrderedDict[tuple[str, str], list[float]] = OrderedDict()  # -> [logged at, not logged since]

    def refused(self, cause: Cause, peer: str | None, detail: str = "", *, told: str | None = None) -> str:
        """Record one refusal of ``cause`` to ``peer`` (the client's address, ``None`` unknown);
        ``detail`` says what was refused (the value or the limit) in the log line.

        Returns:
            The error message for the client (:func:`refusal_message`), with ``told`` as its
            detail (``detail`` when not given; ``""`` for a value the client sent, never echoed).
        """
        message = refusal_message(cause, detail if told is None else told)
        if self._counter is not None:
            self._counter.labels(cause.key).inc()
        who = peer or "unknown"
        pair = (cause.key, who)
        now = time.monotonic()
        seen = self._pairs.get(pair)
        if seen is not None:
            self._pairs.move_to_end(pair)
            if self.interval > 0 and now - seen[0] < self.interval:
                seen[1] += 1
                return message
        suppressed = int(seen[1]) if seen is not None else 0
        self._pairs[pair] = [now, 0]
        if len(self._pairs) > self.max_pairs:
            self._pairs.popitem(last=False)
        fields = {
            "event": "refusal",
            "cause": cause.key,
            "status": cause.status,
            "peer": who,
            "setting": cause.setting,
            "env": cause.env,
            "detail": detail,
        }
        if suppressed:
            fields["suppressed"] = suppressed
        logger.warning(
            "refused a request from %s: %s (%d)%s%s",
            who,
            f"{cause.meaning}: {detail}" if detail else cause.meaning,
            cause.status,
            f"; allow it with {cause.setting} ({cause.env})" if cause.setting else "",
            f"; {suppressed} more not logged since" if suppressed else "",
            extra={"audit": fields},
        )
        return message


def peer_of(scope: Scope) -> str | None:
    """The address of an ASGI request's client (``scope["client"]``), as a refusal names it."""
    client = scope.get("client")
    return client[0] if client else None
