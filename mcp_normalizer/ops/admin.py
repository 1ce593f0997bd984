"""``Admin``: the proxy's own endpoints under a prefix no upstream path uses.

- ``{prefix}/livez``: 200 while the process serves (a liveness probe).
- ``{prefix}/readyz``: 200 when the upstream accepts connections, else 503 (a readiness probe; the
  check is cached for a second so probes cannot load the upstream).
- ``{prefix}/metrics``: the Prometheus metrics (:mod:`mcp_normalizer.ops.metrics`).
- ``{prefix}/lessons``: what results taught of their tools' schemas (:mod:`mcp_normalizer.engine.lessons`),
  as JSON ``{"lessons": [{"tool", "definition", "drop_output_schema", "relax", "nullable", "first":
  {"pointers"}}]}``: names and places, never a value, nor the JSON-RPC id and time of the result
  that taught it (these endpoints have no authentication: any client that reaches them would
  learn which tools others called, and when; the state file keeps them, ``0600``).
- ``{prefix}/withheld``: the tools withheld from each host lately (rule ``withhold_tools``,
  :mod:`mcp_normalizer.ops.withheld`), as JSON ``{"withheld": [{"host", "tool", "fault", "rule",
  "reason", "listings"}]}``: the host's profile, the tool's name, the host fault no repair made
  acceptable, the rule that repairs it (``none``), the log's reason and how many listings left it out.

The prefix is ``/.mcp-normalizer`` by default (``[proxy] admin_prefix``).
:class:`~mcp_normalizer.hop.front.FrontDoor` routes the prefix here, after its ``Host``/``Origin`` check.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from ..types import Send
from ..wire.responses import respond
from .metrics import Metrics


class Admin:
    """The admin endpoints.

    Args:
        prefix: path prefix of the admin endpoints.
        metrics: the metrics to expose.
        ready: an async check that the upstream can be reached.
        lessons: the lesson book's JSON, ``None`` for no ``lessons`` endpoint.
        withheld: the withheld tools' JSON, ``None`` for no ``withheld`` endpoint.
    """

    def __init__(
        self,
        *,
        prefix: str,
        metrics: Metrics,
        ready: Callable[[], Awaitable[bool]],
        lessons: Callable[[], bytes] | None = None,
        withheld: Callable[[], bytes] | None = None,
    ) -> None:
        self.prefix = prefix
        self._lessons = lessons
        self._withheld = withheld
        self.metrics = metrics
        self._ready = ready
        self._checked_at = 0.0
        self._was_ready = False

    async def answer(self, name: str, send: Send) -> None:
        """Answer the endpoint ``name`` (the path after ``{prefix}/``); 404 for an unknown one."""
        if name == "livez":
            await respond(send, 200, b"ok\n", b"text/plain")
        elif name == "readyz":
            ready = await self._upstream_ready()
            await respond(
                send, 200 if ready else 503, b"ready\n" if ready else b"upstream unreachable\n", b"text/plain"
            )
        elif name == "metrics":
            await respond(send, 200, self.metrics.exposition(), b"text/plain; version=0.0.4; charset=utf-8")
        elif name == "lessons" and self._lessons is not None:
            await respond(send, 200, self._lessons(), b"application/json")
        elif name == "withheld" and self._withheld is not None:
            await respond(send, 200, self._withheld(), b"application/json")
        else:
            await respond(send, 404, b"not found\n", b"text/plain")

    async def _upstream_ready(self) -> bool:
        now = time.monotonic()
        if now - self._checked_at >= 1.0:
            self._was_ready = await self._ready()
            self._checked_at = time.monotonic()
        return self._was_ready
