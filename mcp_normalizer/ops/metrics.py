"""The proxy's Prometheus metrics, on a registry of its own (several apps can live in one process).

Metrics (all prefixed ``mcp_normalizer_``):

- ``requests_total{http_method, rpc_method, status}``: requests answered; ``http_method`` is one
  of GET, POST, DELETE, HEAD, OPTIONS, PUT, PATCH, else ``other``; ``rpc_method`` is the
  watched JSON-RPC method (``tools/call``, ``tools/list``, ...), the ``Mcp-Method`` header of a
  2026-07-28 request, or ``other``.
- ``rewrites_total{rule, tool, event, applied}``: rewrite log lines (``event``: rewrite,
  unrepaired, skipped, fault; ``applied``: false in report mode).
- ``upstream_errors_total{kind}``: ``unreachable``, ``timeout`` (connect or first byte), ``idle``
  (a body silent for longer than ``idle_timeout``), ``broken`` (the upstream broke off a body),
  ``foreign_response`` (a reply to no request of its POST: refused with 502, its connection closed).
- ``client_errors_total{kind}``: ``send_timeout`` (a client took no response bytes for
  ``send_timeout`` seconds: its connection was closed).
- ``upstream_latency_seconds``: from forwarding a request to the upstream's response headers.
- ``open_streams``: response bodies being relayed right now.
- ``bytes_total{direction}``: body bytes relayed (``request``, ``response``).
- ``passthrough_oversize_total``: responses passed through unrewritten for their size.
- ``state_errors_total{op}``: calls to the shared state store (``state_url``) that failed, timed
  out, or were skipped while it was unreachable (``op``: ``read``, ``write``, ``forget``).
- ``scopes``, ``catalogs``, ``catalog_bytes``: scopes remembered, the distinct tool catalogs they
  hold (scopes listing the same tools share one) and those catalogs' estimated bytes (bounded by
  ``max_catalog_bytes``).

Label values a client controls (tool names) are bounded: after :data:`MAX_TOOL_LABELS` distinct
names, further ones count as ``other``; a name longer than 128 characters (the MCP bound,
2025-11-25 ``server/tools.mdx`` "Tool Names") or holding a character that is not printable (an
ESC, a CR: the exposition format escapes only backslashes, quotes and line feeds) counts as ``invalid``,
so none reaches a dashboard, a terminal or a scraper's parser.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

if TYPE_CHECKING:
    from ..engine.scopes import ScopeStore

MAX_TOOL_LABELS = 500
_MAX_TOOL_NAME = 128
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class Metrics:
    """Counters, gauges and histograms of one proxy app.

    Args:
        registry: where the metrics live; a new registry by default.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "mcp_normalizer_requests", "Requests answered", ["http_method", "rpc_method", "status"], registry=r
        )
        self.rewrites = Counter(
            "mcp_normalizer_rewrites", "Rewrite log lines", ["rule", "tool", "event", "applied"], registry=r
        )
        self.upstream_errors = Counter("mcp_normalizer_upstream_errors", "Upstream failures", ["kind"], registry=r)
        self.client_errors = Counter(
            "mcp_normalizer_client_errors", "Responses the client side could not be given", ["kind"], registry=r
        )
        self.upstream_latency = Histogram(
            "mcp_normalizer_upstream_latency_seconds",
            "Seconds from forwarding a request to the upstream's response headers",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.open_streams = Gauge("mcp_normalizer_open_streams", "Response bodies being relayed", registry=r)
        self.bytes = Counter("mcp_normalizer_bytes", "Body bytes relayed", ["direction"], registry=r)
        self.oversize = Counter(
            "mcp_normalizer_passthrough_oversize", "Responses passed through unrewritten for their size", registry=r
        )
        self.refusals = Counter("mcp_normalizer_refusals", "Requests the proxy refused itself", ["cause"], registry=r)
        self.state_errors = Counter(
            "mcp_normalizer_state_errors",
            "Shared state store calls that failed, or were skipped while it was unreachable",
            ["op"],
            registry=r,
        )
        self._tools: set[str] = set()
        self._children: dict[tuple[object, tuple[str, ...]], Any] = {}

    def child(self, metric: Counter, *labels: str) -> Any:
        """``metric.labels(*labels)``, looked up once per label set (``labels()`` validates and takes
        a lock on every call; the hot path counts two or three per request). Only for metrics
        whose label values are bounded sets."""
        key = (metric, labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def watch_catalogs(self, scopes: ScopeStore) -> None:
        """Export what ``scopes`` remembers: scopes, distinct tool catalogs and their bytes."""
        r = self.registry
        Gauge("mcp_normalizer_scopes", "Scopes (session/authorization) remembered", registry=r).set_function(
            lambda: len(scopes)
        )
        Gauge("mcp_normalizer_catalogs", "Distinct tool catalogs held (shared by scopes)", registry=r).set_function(
            lambda: len(scopes.pool)
        )
        Gauge("mcp_normalizer_catalog_bytes", "Bytes the distinct tool catalogs hold", registry=r).set_function(
            lambda: scopes.pool.bytes
        )

    def watch_children(self, running: Callable[[], int]) -> None:
        """Export how many stdio server processes run (``--upstream-cmd``): ``running()`` says."""
        Gauge(
            "mcp_normalizer_stdio_children", "stdio server processes running (one per session)", registry=self.registry
        ).set_function(running)

    def tool_label(self, tool: str | None) -> str:
        """A bounded label for a tool name (``none`` when unknown, ``invalid`` when too long or not
        printable, ``other`` past the bound)."""
        if tool is None:
            return "none"
        if not (0 < len(tool) <= _MAX_TOOL_NAME and tool.isprintable()):
            return "invalid"
        if tool in self._tools:
            return tool
        if len(self._tools) < MAX_TOOL_LABELS:
            self._tools.add(tool)
            return tool
        return "other"

    def exposition(self) -> bytes:
        """The text exposition format (``text/plain; version=0.0.4``)."""
        return generate_latest(self.registry)
