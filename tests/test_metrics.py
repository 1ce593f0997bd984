"""The lock-free metrics (``FastCounter``, ``FastHistogram``, ``FastGauge``) expose exactly what
prometheus-client's own objects expose for the same operations (their ``_created`` times aside)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from mcp_normalizer.ops.metrics import FastCounter, FastGauge, FastHistogram

pytestmark = pytest.mark.pure

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.25, 1.0, 300.0)
LABELS = st.sampled_from(["POST", "GET", "other", "tools/call", 'quo"te', "back\\slash", "line\nfeed", "é"])
AMOUNTS = st.one_of(st.integers(0, 2**53), st.floats(0, 1e300, allow_nan=False), st.just(12.5), st.just(1e-7))


def _exposed(registry: CollectorRegistry) -> str:
    return re.sub(r"(_created(\{[^}]*\})?) \S+", r"\1 T", generate_latest(registry).decode())


@given(
    counts=st.lists(st.tuples(LABELS, LABELS, AMOUNTS), max_size=30),
    observations=st.lists(st.one_of(st.floats(0, 1e6, allow_nan=False), st.sampled_from(BUCKETS)), max_size=30),
    moves=st.lists(st.integers(-3, 3), max_size=30),
)
def test_the_fast_metrics_expose_what_prometheus_clients_own_expose(
    counts: list[tuple[str, str, float]], observations: list[float], moves: list[int]
) -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    counter = Counter("x_requests", "Requests", ["a", "b"], registry=theirs)
    fast_counter = FastCounter("x_requests", "Requests", ["a", "b"], registry=ours)
    histogram = Histogram("x_latency_seconds", "Latency", buckets=BUCKETS, registry=theirs)
    fast_histogram = FastHistogram("x_latency_seconds", "Latency", buckets=BUCKETS, registry=ours)
    gauge = Gauge("x_open", "Open", registry=theirs)
    fast_gauge = FastGauge("x_open", "Open", registry=ours)
    for a, b, amount in counts:
        counter.labels(a, b).inc(amount)
        fast_counter.labels(a, b).inc(amount)
    for value in observations:
        histogram.observe(value)
        fast_histogram.observe(value)
    for move in moves:
        (gauge.inc if move >= 0 else gauge.dec)(abs(move))
        (fast_gauge.inc if move >= 0 else fast_gauge.dec)(abs(move))
    assert _exposed(ours) == _exposed(theirs)
    for a, b, _ in counts:
        sample = {"a": a, "b": b}
        assert ours.get_sample_value("x_requests_total", sample) == theirs.get_sample_value("x_requests_total", sample)
