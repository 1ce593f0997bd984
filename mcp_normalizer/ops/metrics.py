"""The proxy's Prometheus metrics, on a registry of its own (several apps can live in one process).

Metrics (all prefixed ``mcp_normalizer_``):

- ``requests_total{http_method, rpc_method, status}``: requests answered; ``http_method`` is one
  of GET, POST, DELETE, HEAD, OPTIONS, PUT, PATCH, else ``other``; ``rpc_method`` is the
  watched JSON-RPC method (``tools/call``, ``tools/list``, ...), the ``Mcp-Method`` header of a
  2026-07-28 request, or ``other``.
- ``rewrites_total{rule, tool, event, applied}``: rewrite log lines (``event``: rewrite,
  unrepaired, skipped, fault; ``applied``: false in report mode).
- ``tools_withheld_total{host, fault, rule}``: tools left out of a host's ``tools/list`` (one per
  tool and listing; rule ``withhold_tools``): ``host`` is the host's profile, ``fault`` the host
  fault no repair made acceptable, ``rule`` the rule that repairs it (``none`` when none exists).
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

The metrics every request moves (``requests``, ``rewrites``, ``bytes``, ``upstream_latency``,
``open_streams``) are counted in plain Python numbers (:class:`FastCounter`, :class:`FastHistogram`,
:class:`FastGauge`) that the registry reads when it is scraped: prometheus-client's own metric
objects take a lock on every increment, and a small call moved five of them (a few per cent of
its CPU). Only the proxy's event loop thread counts them; the exposition is the same.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

if TYPE_CHECKING:
    from ..engine.scopes import ScopeStore

MAX_TOOL_LABELS = 500
_MAX_TOOL_NAME = 128
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class _Count:
    """One label set's count of a :class:`FastCounter`."""

    __slots__ = ("created", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1.0) -> None:
        """Add ``amount`` (never negative)."""
        self.value += amount


class FastCounter(Collector):
    """A Prometheus counter (``NAME_total``, ``NAME_created``) with labels, counted without a lock.

    Args:
        name: the metric's name, without ``_total``.
        documentation: its help text.
        labelnames: its label names (none: :meth:`inc` counts directly).
        registry: where it is exported.
    """

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str] = (), *, registry: CollectorRegistry
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._counts: dict[tuple[str, ...], _Count] = {}
        registry.register(self)

    def labels(self, *values: str, **named: str) -> _Count:
        """The count of one label set (by position, or by name)."""
        key = values if values else tuple(named[name] for name in self.labelnames)
        count = self._counts.get(key)
        if count is None:
            if len(key) != len(self.labelnames):
                raise ValueError(f"{self.name} takes labels {self.labelnames}, got {key}")
            count = self._counts[key] = _Count()
        return count

    def inc(self, amount: float = 1.0) -> None:
        """Count a metric without labels."""
        self.labels().inc(amount)

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for key, count in list(self._counts.items()):
            family.add_metric(list(key), count.value, created=count.created)
        yield family

    def describe(self) -> Iterator[CounterMetricFamily]:
        yield CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)


class FastHistogram(Collector):
    """A Prometheus histogram without labels (``_bucket``, ``_count``, ``_sum``), counted without a lock."""

    def __init__(self, name: str, documentation: str, buckets: Sequence[float], *, registry: CollectorRegistry) -> None:
        self.name = name
        self.documentation = documentation
        self.bounds = tuple(buckets)
        self._counts = [0] * (len(self.bounds) + 1)  # the last: above every bound (+Inf)
        self._sum = 0.0
        self.created = time.time()
        registry.register(self)

    def observe(self, value: float) -> None:
        """Count one observation."""
        self._counts[bisect.bisect_left(self.bounds, value)] += 1
        self._sum += value

    def collect(self) -> Iterator[HistogramMetricFamily]:
        cumulative, total = [], 0
        for bound, count in zip((*map(repr, map(float, self.bounds)), "+Inf"), self._counts, strict=True):
            total += count
            cumulative.append((bound, float(total)))
        family = HistogramMetricFamily(self.name, self.documentation)
        family.add_metric([], cumulative, self._sum, timestamp=None)
        family.samples.append(Sample(self.name + "_created", {}, self.created))  # (as prometheus-client's own)
        yield family

    def describe(self) -> Iterator[HistogramMetricFamily]:
        yield HistogramMetricFamily(self.name, self.documentation)


class FastGauge(Collector):
    """A Prometheus gauge without labels, moved without a lock."""

    def __init__(self, name: str, documentation: str, *, registry: CollectorRegistry) -> None:
        self.name = name
        self.documentation = documentation
        self.value = 0.0
        registry.register(self)

    def inc(self, amount: float = 1.0) -> None:
        """Raise the gauge."""
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        """Lower the gauge."""
        self.value -= amount

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(self.name, self.documentation, value=self.value)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(self.name, self.documentation)


class Metrics:
    """Counters, gauges and histograms of one proxy app.

    Args:
        registry: where the metrics live; a new registry by default.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.requests = FastCounter(
            "mcp_normalizer_requests", "Requests answered", ["http_method", "rpc_method", "status"], registry=r
        )
        self.rewrites = FastCounter(
            "mcp_normalizer_rewrites", "Rewrite log lines", ["rule", "tool", "event", "applied"], registry=r
        )
        self.tools_withheld = FastCounter(
            "mcp_normalizer_tools_withheld",
            "Tools withheld from a host whose model API refuses them after every repair",
            ["host", "fault", "rule"],
            registry=r,
        )
        self.upstream_errors = Counter("mcp_normalizer_upstream_errors", "Upstream failures", ["kind"], registry=r)
        self.client_errors = Counter(
            "mcp_normalizer_client_errors", "Responses the client side could not be given", ["kind"], registry=r
        )
        self.upstream_latency = FastHistogram(
            "mcp_normalizer_upstream_latency_seconds",
            "Seconds from forwarding a request to the upstream's response headers",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.open_streams = FastGauge("mcp_normalizer_open_streams", "Response bodies being relayed", registry=r)
        self.bytes = FastCounter("mcp_normalizer_bytes", "Body bytes relayed", ["direction"], registry=r)
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
