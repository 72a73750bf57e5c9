"""What changed along each series: latency steps per T, error changes per T, verdict changes, and the
summary the index shows (today's figures and the point where each last changed).

Latency: within one T, the points whose figure is of one kind (the paired ratio, or the absolute device
time of reports without a reference) form a run; `steps.detect_steps` finds its steps, each confirmed by
the diff engine's device-time gate between the neighbouring points. A ratio and an absolute time are never
fitted together, so a clock that moved both candidate and reference (absorbed by the ratio) is no step.
Errors against FP64 are deterministic (same seeds, same inputs): a change is one the diff engine's
`compare_error` calls WORSE or BETTER between neighbouring points.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from adaln_bench.reports.diff import Verdict, compare_error
from adaln_bench.reports.latency_gate import gate_device_time
from adaln_bench.reports.site.series import NOT_PROBED, Latency, Point, Series, _t_key
from adaln_bench.reports.site.steps import detect_steps, sample_noise
from adaln_bench.datamodel.stats import StatVerdict
from adaln_bench.reports.thresholds import Thresholds


@dataclass(frozen=True)
class Mark:
    """A change at point `index` of a series (the first point at the new value)."""

    index: int
    what: str  # "T=2048", "fwd T=3", "grad T=3", "verdict"
    direction: str  # "up", "down" or "changed"
    text: str


@dataclass
class Run:
    """Consecutive points of one T whose latency is of one kind (basis and metric)."""

    t: str
    basis: str
    metric: str
    indexes: list[int]  # into the series' points
    latencies: list[Latency]
    steps: list[Mark] = field(default_factory=list)


@dataclass
class Summary:
    verdict: str
    verdict_detail: str
    verdict_since: int  # index of the point where the verdict last changed (0: it never did)
    headline_t: Optional[str]
    latency: Optional[Latency]
    trend: str  # "up", "down" or "flat"
    trend_text: str
    latency_since: Optional[int]  # the last step's point, None when no step
    fwd_err: Optional[float]
    grad_err: Optional[float]
    error_since: Optional[int]  # the last error change's point, None when none
    latency_first: Optional[int] = None  # the first point with device time / with errors
    error_first: Optional[int] = None
    step_basis: Optional[str] = None  # what the last step was judged on: "ratio" or "absolute"


@dataclass
class SeriesHistory:
    series: Series
    runs: list[Run]
    error_changes: list[Mark]
    verdict_changes: list[Mark]
    summary: Summary

    def latency_steps(self) -> list[Mark]:
        return sorted((m for r in self.runs for m in r.steps), key=lambda m: (m.index, _t_key(m.what[2:])))

    def marks_at(self, index: int) -> list[Mark]:
        return [m for m in (*self.latency_steps(), *self.error_changes, *self.verdict_changes) if m.index == index]


def latency_runs(series: Series) -> list[Run]:
    runs: list[Run] = []
    for t in series.ts():
        current: Optional[Run] = None
        for i, p in enumerate(series.points):
            lat = p.latency.get(t)
            if lat is None:
                continue  # a point without this T neither breaks nor joins a run
            if current is None or (current.basis, current.metric) != (lat.basis, lat.metric):
                current = Run(t, lat.basis, lat.metric, [], [])
                runs.append(current)
            current.indexes.append(i)
            current.latencies.append(lat)
    return runs


def _step_runs(runs: list[Run], thresholds: Thresholds) -> None:
    for run in runs:
        def confirm(a: int, b: int, run: Run = run) -> bool:
            gate = gate_device_time(run.latencies[a].point, run.latencies[b].point, run.metric,
                                    thresholds.latency, thresholds.latency_alpha)
            return gate is not None and gate.verdict in (StatVerdict.WORSE, StatVerdict.BETTER)

        values = [lat.value for lat in run.latencies]
        noises = [sample_noise(lat.samples) for lat in run.latencies]
        for step in detect_steps(values, noises, thresholds.latency, confirm):
            before, after = run.latencies[step.index - 1], run.latencies[step.index]
            unit = "×{:.3f}" if run.basis == "ratio" else "{:.1f} µs"
            run.steps.append(Mark(run.indexes[step.index], f"T={run.t}", step.direction,
                                  f"{step.change:+.1%} ({unit.format(before.value)} → {unit.format(after.value)}, "
                                  f"{'paired ratio' if run.basis == 'ratio' else 'absolute device time'}, "
                                  f"level {step.before:.4g} → {step.after:.4g})"))


def _error_changes(series: Series, thresholds: Thresholds) -> list[Mark]:
    marks = []
    for kind, attr in (("fwd", "fwd_err"), ("grad", "grad_err")):
        for t in series.ts():
            last: Optional[tuple[int, float]] = None
            for i, p in enumerate(series.points):
                value = getattr(p, attr).get(t)
                if value is None:
                    continue
                if last is not None:
                    verdict, change, _ = compare_error(last[1], value, thresholds)
                    if verdict in (Verdict.WORSE, Verdict.BETTER):
                        marks.append(Mark(i, f"{kind} T={t}", "up" if value > last[1] else "down",
                                          f"{last[1]:.3e} → {value:.3e}"
                                          + (f" ({change:+.0%})" if change is not None else "")))
                last = (i, value)
    return sorted(marks, key=lambda m: m.index)


def _verdict_changes(series: Series) -> list[Mark]:
    """Where the verdict changed; a latency-only point (not probed) neither changes it nor keeps it."""
    marks, last = [], None
    for i, p in enumerate(series.points):
        if p.verdict == NOT_PROBED:
            continue
        if last is not None and p.verdict != last:
            marks.append(Mark(i, "verdict", "changed", f"{last} → {p.verdict}"))
        last = p.verdict
    return marks


def verdict_point(series: Series) -> tuple[int, Point]:
    """Today's verdict: of the newest point that probed invariance (a latency-only run did not), else the newest."""
    for i in range(len(series.points) - 1, -1, -1):
        if series.points[i].verdict != NOT_PROBED:
            return i, series.points[i]
    return len(series.points) - 1, series.points[-1]


def _newest(series: Series, has) -> Optional[int]:
    return next((i for i in range(len(series.points) - 1, -1, -1) if has(series.points[i])), None)


def _summary(series: Series, runs: list[Run], errors: list[Mark], verdicts: list[Mark]) -> Summary:
    """Today's figures, each from the newest point that has it (a latency-only run has no errors, a
    probes-only run no device time), and the point where each last changed."""
    v_index, v_point = verdict_point(series)
    l_index = _newest(series, lambda p: bool(p.latency))
    e_index = _newest(series, lambda p: bool(p.fwd_err or p.grad_err))
    lat_point = series.points[l_index] if l_index is not None else None
    headline = max(lat_point.latency, key=_t_key) if lat_point is not None else None
    steps = sorted((m for r in runs for m in r.steps), key=lambda m: m.index)
    if steps:
        newest = steps[-1].index
        at_newest = [m for m in steps if m.index == newest]
        lead = next((m for m in at_newest if headline and m.what == f"T={headline}"), at_newest[0])
        trend = lead.direction
        trend_text = "; ".join(f"{m.what} {m.text}" for m in at_newest)
        since: Optional[int] = newest
    else:
        trend, trend_text, since = "flat", "no step beyond the noise", None
    err_point = series.points[e_index] if e_index is not None else None
    return Summary(
        verdict=v_point.verdict, verdict_detail=v_point.detail
        + (f" (from {v_point.commit}, {v_point.date}: the newer points did not probe invariance)"
           if v_index != len(series.points) - 1 else ""),
        verdict_since=verdicts[-1].index if verdicts else next(
            (i for i, p in enumerate(series.points) if p.verdict != NOT_PROBED), 0),
        headline_t=headline, latency=lat_point.latency[headline] if headline else None,
        trend=trend, trend_text=trend_text, latency_since=since,
        latency_first=next((i for i, p in enumerate(series.points) if p.latency), None),
        fwd_err=max(err_point.fwd_err.values(), default=None) if err_point else None,
        grad_err=max(err_point.grad_err.values(), default=None) if err_point else None,
        error_since=errors[-1].index if errors else None,
        error_first=next((i for i, p in enumerate(series.points) if p.fwd_err or p.grad_err), None),
        step_basis=next((r.basis for r in runs for m in r.steps if since is not None and m.index == since), None),
    )


def analyse(series: Series, thresholds: Thresholds = Thresholds()) -> SeriesHistory:
    runs = latency_runs(series)
    _step_runs(runs, thresholds)
    errors = _error_changes(series, thresholds)
    verdicts = _verdict_changes(series)
    return SeriesHistory(series, runs, errors, verdicts, _summary(series, runs, errors, verdicts))
