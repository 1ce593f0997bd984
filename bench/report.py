"""Statistics of benchmark runs, the printed table, the ratios and the targets."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from .load import Run
from .manytools import ManyToolsRun

DIRECT, PASS, NORMALIZER = "direct", "pass-through", "normalizer"
TARGETS = (DIRECT, PASS, NORMALIZER)
#: The floor (``../shared/tools/lean_hop.py``): with this project's rules, and without.
FLOOR, FLOOR_PASS = "floor", "floor-pass"
FLOORS = (FLOOR_PASS, FLOOR)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by nearest rank; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


@dataclass(frozen=True, slots=True)
class Summary:
    """One run in numbers (times in ms, CPU in microseconds per call and percent of one CPU)."""

    workload: str
    target: str
    connections: int
    calls: int
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    events: int
    delay_p50_ms: float
    delay_p99_ms: float
    delay_max_ms: float
    late_events: int
    client_cpu_pct: float
    proxy_cpu_pct: float
    upstream_cpu_pct: float
    proxy_us_per_call: float

    @classmethod
    def of(cls, run: Run) -> Summary:
        """Summarize ``run``."""
        out = run.outcome
        calls = len(out.latencies)
        window = run.window or math.nan
        proxy_cpu = run.cpu.get("proxy", math.nan)
        gap = float(run.workload.arguments.get("gap_ms", 0)) if run.workload.progress else 0.0
        return cls(
            workload=run.workload.name,
            target=run.target,
            connections=run.connections,
            calls=calls,
            rps=calls / window,
            p50_ms=percentile(out.latencies, 0.5) * 1000,
            p99_ms=percentile(out.latencies, 0.99) * 1000,
            errors=out.errors,
            events=len(out.delays_ms),
            delay_p50_ms=percentile(out.delays_ms, 0.5),
            delay_p99_ms=percentile(out.delays_ms, 0.99),
            delay_max_ms=max(out.delays_ms, default=math.nan),
            late_events=sum(delay >= gap for delay in out.delays_ms) if gap else 0,
            client_cpu_pct=100 * out.cpu / window,
            proxy_cpu_pct=100 * proxy_cpu / window,
            upstream_cpu_pct=100 * run.cpu.get("upstream", math.nan) / window,
            proxy_us_per_call=1e6 * proxy_cpu / calls if calls else math.nan,
        )

    def as_dict(self) -> dict[str, object]:
        """The fields, NaN as ``None`` (for JSON)."""
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


def _num(value: float, digits: int = 1) -> str:
    return "-" if math.isnan(value) else f"{value:,.{digits}f}"


def _plain(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def _ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(a) and not math.isnan(b) else math.nan


def call_table(summaries: Sequence[Summary]) -> list[str]:
    """The request/response workloads: one line per workload and target."""
    head = (
        f"{'workload':<14}{'target':<14}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'calls':>8}{'errors':>7}"
        f"{'proxy µs/call':>15}{'CPU% client':>13}{'proxy':>7}{'upstream':>10}"
    )
    return [
        head,
        "-" * len(head),
        *(
            f"{s.workload:<14}{s.target:<14}{_num(s.rps, 0):>9}{_num(s.p50_ms, 2):>9}{_num(s.p99_ms, 2):>9}"
            f"{s.calls:>8}{s.errors:>7}{_num(s.proxy_us_per_call, 0):>15}{_num(s.client_cpu_pct, 0):>13}"
            f"{_num(s.proxy_cpu_pct, 0):>7}{_num(s.upstream_cpu_pct, 0):>10}"
            for s in summaries
        ),
    ]


def progress_table(summaries: Sequence[Summary]) -> list[str]:
    """The SSE progress workload: the delay distribution per target (``>= gap``: events that took at
    least the emit gap, as one held back until the next event's chunk would)."""
    head = f"{'target':<14}{'events':>8}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'>= gap':>8}{'streams':>9}{'errors':>8}"
    return [
        head,
        "-" * len(head),
        *(
            f"{s.target:<14}{s.events:>8}{_num(s.delay_p50_ms, 3):>9}{_num(s.delay_p99_ms, 3):>9}"
            f"{_num(s.delay_max_ms, 3):>9}{s.late_events:>8}{s.connections:>9}{s.errors:>8}"
            for s in summaries
        ),
    ]


def ratios(summaries: Sequence[Summary]) -> tuple[list[str], dict[str, dict[str, float | None]]]:
    """Per workload: normalizer/pass-through and pass-through/direct, throughput and p99."""
    by = {(s.workload, s.target): s for s in summaries}
    lines: list[str] = []
    data: dict[str, dict[str, float | None]] = {}
    for workload in dict.fromkeys(s.workload for s in summaries):
        direct, passing, normal = (by.get((workload, t)) for t in TARGETS)
        if direct is None or passing is None or normal is None:
            continue
        values = {
            "normalizer/pass-through throughput": _ratio(normal.rps, passing.rps),
            "normalizer/pass-through p99": _ratio(normal.p99_ms, passing.p99_ms),
            "pass-through/direct throughput": _ratio(passing.rps, direct.rps),
            "pass-through/direct p99": _ratio(passing.p99_ms, direct.p99_ms),
        }
        floor, floor_pass = by.get((workload, FLOOR)), by.get((workload, FLOOR_PASS))
        if floor is not None and floor_pass is not None:
            values["normalizer/floor CPU per call"] = _ratio(normal.proxy_us_per_call, floor.proxy_us_per_call)
            values["pass-through/floor-pass CPU per call"] = _ratio(
                passing.proxy_us_per_call, floor_pass.proxy_us_per_call
            )
        data[workload] = {k: None if math.isnan(v) else v for k, v in values.items()}
        lines.append(f"{workload}: " + ", ".join(f"{k} {_plain(v)}x" for k, v in values.items()))
    return lines, data


@dataclass(frozen=True, slots=True)
class Target:
    """A target judged PASS or MISS."""

    name: str
    passed: bool
    detail: str

    def line(self) -> str:
        """``PASS name: detail``."""
        return f"{'PASS' if self.passed else 'MISS'} {self.name}: {self.detail}"


def targets(summaries: Sequence[Summary], small: str, progress: str, gap_ms: float) -> list[Target]:
    """The hop's targets: small-result throughput and p99 against pass-through, throughput against
    direct and proxy CPU per small call, progress delay."""
    by = {(s.workload, s.target): s for s in summaries}
    out: list[Target] = []
    normal, passing = by.get((small, NORMALIZER)), by.get((small, PASS))
    if normal is not None and passing is not None:
        throughput = _ratio(normal.rps, passing.rps)
        out.append(
            Target(
                f"normalizer throughput >= 0.9x pass-through ({small})",
                throughput >= 0.9,
                f"{_num(throughput, 2)}x ({_num(normal.rps, 0)} vs {_num(passing.rps, 0)} req/s)",
            )
        )
        p99 = _ratio(normal.p99_ms, passing.p99_ms)
        out.append(
            Target(
                f"normalizer p99 <= 1.2x pass-through p99 ({small})",
                p99 <= 1.2,
                f"{_num(p99, 2)}x ({_num(normal.p99_ms, 2)} vs {_num(passing.p99_ms, 2)} ms)",
            )
        )
    direct = by.get((small, DIRECT))
    if normal is not None and direct is not None:
        share = _ratio(normal.rps, direct.rps)
        out.append(
            Target(
                f"normalizer throughput >= 0.45x direct ({small})",
                share >= 0.45,
                f"{_num(share, 2)}x ({_num(normal.rps, 0)} vs {_num(direct.rps, 0)} req/s)",
            )
        )
    if normal is not None:
        out.append(
            Target(
                f"normalizer proxy CPU <= 400 µs per call ({small})",
                normal.proxy_us_per_call <= 400,
                f"{_num(normal.proxy_us_per_call, 0)} µs",
            )
        )
    sse = by.get((progress, NORMALIZER))
    if sse is not None:
        bound = gap_ms / 2
        out.append(
            Target(
                f"SSE progress delay p99 through the normalizer < {bound:g} ms (half the {gap_ms:g} ms emit gap)",
                sse.delay_p99_ms < bound,
                f"p99 {_num(sse.delay_p99_ms, 3)} ms, max {_num(sse.delay_max_ms, 3)} ms, "
                f"{sse.late_events} of {sse.events} events took >= {gap_ms:g} ms",
            )
        )
    return out


def floor_targets(summaries: Sequence[Summary], small: str) -> list[Target]:
    """The hop against the floor in the same run (issue 27): proxy CPU per call of the normalizer
    within 1.5x the floor's on a small call and 1.2x on a 1 MiB result, and pass-through within
    1.2x the floor without rules; nothing when the floor did not run."""
    by = {(s.workload, s.target): s for s in summaries}
    out: list[Target] = []
    for workload, mine, theirs, bound in (
        (small, NORMALIZER, FLOOR, 1.5),
        (small, PASS, FLOOR_PASS, 1.2),
        ("1 MiB", NORMALIZER, FLOOR, 1.2),
    ):
        a, b = by.get((workload, mine)), by.get((workload, theirs))
        if a is None or b is None or not a.calls or not b.calls:
            continue
        ratio = _ratio(a.proxy_us_per_call, b.proxy_us_per_call)
        out.append(
            Target(
                f"{mine} proxy CPU per call <= {bound:g}x {theirs} ({workload})",
                ratio <= bound,
                f"{_num(ratio, 2)}x ({_num(a.proxy_us_per_call, 0)} vs {_num(b.proxy_us_per_call, 0)} µs)",
            )
        )
    return out


def cost_targets(summaries: Sequence[Summary], normalizer_peak_mib: float | None, concurrency: int) -> list[Target]:
    """The inspection-cost targets: proxy CPU per call on large results, decimals as cheap as
    integers, a single 10 MiB SSE event, and the memory held for 16 large calls in flight."""
    by = {(s.workload, s.target): s for s in summaries}
    out: list[Target] = []

    def cpu(workload: str, target: str = NORMALIZER) -> float | None:
        found = by.get((workload, target))
        return found.proxy_us_per_call / 1000 if found is not None and found.calls else None

    for workload, target, bound in (("1 MiB", NORMALIZER, 8.0), ("1 MiB", PASS, 2.5), ("10 MiB", NORMALIZER, 20.0)):
        ms = cpu(workload, target)
        if ms is not None:
            out.append(Target(f"{target} proxy CPU <= {bound:g} ms per call ({workload})", ms <= bound, f"{ms:.2f} ms"))
    floats, ints = cpu("1 MiB floats"), cpu("1 MiB")
    if floats is not None and ints is not None:
        ratio = _ratio(floats, ints)
        out.append(
            Target(
                "normalizer CPU on 1 MiB floats <= 1.3x 1 MiB integers",
                ratio <= 1.3,
                f"{_num(ratio, 2)}x ({floats:.2f} vs {ints:.2f} ms)",
            )
        )
    event, direct = by.get(("10 MiB SSE event", NORMALIZER)), by.get(("10 MiB SSE event", DIRECT))
    if event is not None and direct is not None:
        ratio = _ratio(event.p50_ms, direct.p50_ms)
        out.append(
            Target(
                "10 MiB SSE event through the normalizer <= 3x direct (p50 time per call)",
                ratio <= 3,
                f"{_num(ratio, 2)}x ({_num(event.p50_ms, 0)} vs {_num(direct.p50_ms, 0)} ms)",
            )
        )
    if normalizer_peak_mib is not None and by.get(("10 MiB", NORMALIZER)) is not None:
        bound = 4 * 10 * concurrency
        out.append(
            Target(
                f"normalizer peak RSS <= 4x the bytes of {concurrency} 10 MiB calls in flight ({bound} MiB)",
                normalizer_peak_mib <= bound,
                f"{normalizer_peak_mib:.0f} MiB",
            )
        )
    return out


def many_tools_table(runs: Sequence[ManyToolsRun]) -> list[str]:
    """One line per target: list times, proxy CPU per list, the probe's latency idle and during."""
    if not runs:
        return []
    lines = [
        f"{runs[0].tools:,}-tool tools/list, twice (cold, then warm), while one other session calls "
        "bench.small every 10 ms; added = the probe's p99 during a list - its p50 before",
        f"{'target':<14}{'cold s':>8}{'warm s':>8}{'CPU/list s':>12}{'probe p50':>11}{'p99 during':>12}"
        f"{'max during':>12}{'added p99':>11}{'calls':>7}",
    ]
    for run in runs:
        idle = percentile(run.idle_ms, 50) if run.idle_ms else math.nan
        p99 = percentile(run.during_ms, 99) if run.during_ms else math.nan
        worst = max(run.during_ms, default=math.nan)
        cold = run.list_seconds[0] if run.list_seconds else math.nan
        warm = run.list_seconds[-1] if len(run.list_seconds) > 1 else math.nan
        cpu = "/".join(f"{c:.2f}" for c in run.proxy_cpu) or "-"
        lines.append(
            f"{run.target:<14}{_num(cold, 2):>8}{_num(warm, 2):>8}{cpu:>12}{_num(idle, 1):>11}"
            f"{_num(p99, 1):>12}{_num(worst, 1):>12}{_num(p99 - idle, 1):>11}{len(run.during_ms):>7}"
        )
    return lines


def many_tools_target(
    runs: Sequence[ManyToolsRun], bound_ms: float = 20.0, cold_seconds_per_50k: float = 1.0
) -> list[Target]:
    """The normalizer on the huge list (issue 27): the added p99 delay of a concurrent small call
    while it passes, and the proxy's CPU for the cold list (``cold_seconds_per_50k`` for 50,000
    tools, in proportion for other counts)."""
    found = next((run for run in runs if run.target == NORMALIZER), None)
    if found is None:
        return []
    targets = []
    if found.during_ms and found.idle_ms:
        added = percentile(found.during_ms, 99) - percentile(found.idle_ms, 50)
        name = f"normalizer: a small call's p99 added delay <= {bound_ms:g} ms while a {found.tools:,}-tool list passes"
        targets.append(
            Target(
                name,
                added <= bound_ms,
                f"{added:.1f} ms over {len(found.during_ms)} calls",
            )
        )
    if found.proxy_cpu:
        bound = cold_seconds_per_50k * found.tools / 50_000
        cold = found.proxy_cpu[0]
        targets.append(
            Target(
                f"normalizer proxy CPU <= {bound:.3g} s for a cold {found.tools:,}-tool list",
                cold <= bound,
                f"{cold:.2f} s",
            )
        )
    return targets
