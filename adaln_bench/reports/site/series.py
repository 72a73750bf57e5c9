"""From reports to series: one point per (report, mode, candidate), grouped so that only like is compared.

A group holds the reports of one operator on one GPU, one shape, one quick flag and one input draw
(`draw_geometry`, "native" when absent): reports of different GPUs, shapes, probe sizes or inputs never
share a series. Within a group a series is one (mode, candidate), its points in the order the reports were
started. Each point keeps the figures the site shows, read through the report model and the metric table:
the verdict, the device-time ratio to the reference sampled beside it (or the absolute device time where a
report has no reference), and the worst forward and gradient errors per T. Gradient errors are read as a
mapping, whatever the operator names its gradients.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from adaln_bench.datamodel import metrics
from adaln_bench.reports.diff import device_kind
from adaln_bench.reports.latency_gate import reference_ratios
from adaln_bench.datamodel.schema import (
    PRIOR_ART_KIND,
    AccuracyLatency,
    CandidateEntry,
    CandidateResult,
    CandidateUnavailable,
    Report,
)
from adaln_bench.reports.site.collect import Loaded

YES, NO, UNAVAILABLE, FAILED, NOT_PROBED = "yes", "NO", "unavailable", "failed", "not probed"
NATIVE_DRAW = "native"
RATIO, ABSOLUTE = "ratio", "absolute"
SIZE_SYMBOLS = (("dim", "D"), ("hidden", "H"), ("modalities", "M"), ("out_features", "N"), ("frequency", "F"))


@dataclass(frozen=True, order=True)
class GroupKey:
    op: str
    gpu: str
    shape: str
    quick: bool
    draw: str

    @property
    def label(self) -> str:
        return (f"{self.gpu} · {self.shape} · {'quick' if self.quick else 'full'} probes · "
                f"{'native inputs' if self.draw == NATIVE_DRAW else 'inputs drawn as ' + self.draw}")

    @property
    def slug(self) -> str:
        text = f"{self.gpu}-{self.shape}-{'quick' if self.quick else 'full'}-{self.draw}"
        return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


@dataclass(frozen=True)
class Latency:
    """The latency figure of one point at one T: the paired ratio where the report has one, else µs."""

    basis: str  # RATIO or ABSOLUTE
    metric: str  # "fwd_bwd_us" or "fwd_us": the figure the value is of
    value: float  # the ratio, or the absolute median in µs
    absolute_us: float
    samples: tuple[float, ...]  # the paired ratios or the absolute samples (the noise estimate reads them)
    point: AccuracyLatency  # for the U test between neighbours (reports/latency_gate.py)


@dataclass
class Point:
    loaded: Loaded
    entry: CandidateEntry
    verdict: str
    detail: str  # failing counts, the reason a candidate is unavailable, a failed status
    latency: dict[str, Latency] = field(default_factory=dict)  # by T
    fwd_err: dict[str, float] = field(default_factory=dict)
    grad_err: dict[str, float] = field(default_factory=dict)  # the worst gradient error, by T
    grad_worst_of: dict[str, str] = field(default_factory=dict)  # which gradient that was, by T

    @property
    def report(self) -> Report:
        return self.loaded.report

    @property
    def commit(self) -> str:
        return commit_of(self.report)

    @property
    def date(self) -> str:
        return (self.report.started_at or "")[:10] or "undated"

    def accuracy(self, t: str) -> Optional[AccuracyLatency]:
        return self.entry.accuracy_latency.get(t) if isinstance(self.entry, CandidateResult) else None


@dataclass
class Series:
    group: GroupKey
    mode: str
    candidate: str
    points: list[Point]

    @property
    def column(self) -> str:
        return candidate_column(self.mode, self.candidate)

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9]+", "-", f"{self.mode}-{self.candidate}").strip("-").lower()

    def ts(self) -> list[str]:
        keys = {t for p in self.points for t in (*p.latency, *p.fwd_err, *p.grad_err)}
        return sorted(keys, key=_t_key)


# --- reading one report ------------------------------------------------------------------------------


def commit_of(report: Report) -> str:
    commit = (report.tool.commit if report.tool else None) or report.rl_kernel_commit
    return commit[:7] if commit else "no commit"


def gpu_of(report: Report) -> str:
    if report.environment.gpu:
        return report.environment.gpu
    kind = device_kind(report)
    return kind.upper() if kind else "unknown device"


def size_symbol(op: str) -> str:
    """What an operator's rows are called on the page: T (timesteps) or S (tokens), T when it is unknown."""
    from adaln_bench.ops.registry import all_operators

    found = all_operators().get(op)
    return found.family.size_symbol if found is not None else "T"


def shape_of(report: Report) -> str:
    s = report.shape
    if s is None:
        return "H3 shape (implied)" if report.kind == PRIOR_ART_KIND else "shape not recorded"
    # Only the sizes the operator records: a norm_modulate report has no D or N, a sinusoid report no M.
    text = " ".join(f"{symbol}={value}" for name, symbol in SIZE_SYMBOLS if (value := getattr(s, name)) is not None)
    if not text:
        return f"{s.preset} preset" if s.preset else "shape not recorded"
    return f"{text} ({s.preset})" if s.preset else text


def draw_of(report: Report) -> str:
    """The input draw: the report's `draw_geometry` ({"name": "b200", "sms": 148}); native when absent."""
    draw = report.draw_geometry.model_dump(exclude_none=True) if report.draw_geometry is not None else None
    if draw is not None and draw.get("sms") is None:
        return NATIVE_DRAW
    if draw is None:
        return NATIVE_DRAW
    if isinstance(draw, dict):
        name, sms = draw.get("name"), draw.get("sms")
        if name is not None and sms is not None and len(draw) == 2:
            return f"{name} ({sms} SMs)"
        return json.dumps(draw, sort_keys=True, separators=(",", ":"))
    return str(draw)


def group_of(report: Report) -> GroupKey:
    return GroupKey(report.op, gpu_of(report), shape_of(report), bool(report.quick), draw_of(report))


def candidate_column(mode: str, candidate: str) -> str:
    """`diffusers[plain]` is the column `diffusers` in the row of mode plain."""
    suffix = f"[{mode}]"
    return candidate[: -len(suffix)] if candidate.endswith(suffix) else candidate


def _t_key(t: str) -> tuple[int, str]:
    try:
        return int(t), t
    except ValueError:
        return 1 << 30, t


def verdict_of(entry: CandidateEntry) -> tuple[str, str]:
    if isinstance(entry, CandidateUnavailable):
        failed = entry.status not in (None, "unavailable")
        return (FAILED if failed else UNAVAILABLE), (f"{entry.status}: " if failed else "") + entry.unavailable
    failures = metrics.candidate_failures(entry)
    prefix = ("; ".join(failures) + "; ") if failures else ""
    inv = entry.batch_invariance
    if inv is None:
        return NOT_PROBED, prefix + "invariance not probed (latency only)"
    if failures:
        return FAILED, prefix + ("batch-invariant" if inv.batch_invariant else
                                 "not batch-invariant: " + "; ".join(metrics.probe_failures(inv)))
    if inv.batch_invariant:
        return YES, "every probe count 0"
    return NO, "; ".join(metrics.probe_failures(inv)) or "not batch-invariant"


def _numbers(mapping: Any) -> dict[str, float]:
    """The numeric values of a model (its extra keys included) or dict: gradients by whatever name."""
    if mapping is None:
        return {}
    data = mapping.model_dump() if hasattr(mapping, "model_dump") else dict(mapping)
    return {str(k): float(v) for k, v in data.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}


def latency_of(point: AccuracyLatency) -> Optional[Latency]:
    """The paired ratio of forward + backward (else of the forward) to the reference sampled beside it, or
    the absolute device time where the report has no reference."""
    dt = point.device_time
    if dt is None:
        return None
    for metric, median, samples in (("fwd_bwd_us", dt.fwd_bwd_us, dt.fwd_bwd_samples),
                                    ("fwd_us", dt.fwd_us, dt.fwd_samples)):
        if median is None or median <= 0 or not samples:
            continue
        ref = dt.reference
        ratio = None if ref is None else (ref.fwd_bwd_ratio if metric == "fwd_bwd_us" else ref.fwd_ratio)
        pairs = reference_ratios(dt, metric, list(samples)) if ref is not None else None
        if ratio is not None and ratio > 0 and pairs:
            return Latency(RATIO, metric, float(ratio), float(median), tuple(pairs), point)
        if ref is None or metric == "fwd_us":
            return Latency(ABSOLUTE, metric, float(median), float(median), tuple(samples), point)
    return None


def make_point(loaded: Loaded, entry: CandidateEntry) -> Point:
    verdict, detail = verdict_of(entry)
    p = Point(loaded, entry, verdict, detail)
    if isinstance(entry, CandidateResult):
        for t, acc in entry.accuracy_latency.items():
            lat = latency_of(acc)
            if lat is not None:
                p.latency[t] = lat
            if acc.fwd_rel_err is not None:
                p.fwd_err[t] = float(acc.fwd_rel_err)
            grads = _numbers(acc.grad_rel_err)
            if grads:
                name = max(grads, key=grads.__getitem__)
                p.grad_err[t], p.grad_worst_of[t] = grads[name], name
    return p


# --- grouping ----------------------------------------------------------------------------------------


def _order(loaded: Loaded) -> tuple:
    started = loaded.report.started_at
    return (started is not None, started or "", str(loaded.path))


def group_series(reports: list[Loaded]) -> dict[GroupKey, list[Series]]:
    """Series per group, groups sorted by operator, GPU and shape; series in the order modes and
    candidates first appear."""
    by_group: dict[GroupKey, dict[tuple[str, str], list[Point]]] = {}
    for loaded in sorted(reports, key=_order):
        group = by_group.setdefault(group_of(loaded.report), {})
        for mode, candidates in loaded.report.results.items():
            for name, entry in candidates.items():
                group.setdefault((mode, name), []).append(make_point(loaded, entry))
    def order(item: tuple[GroupKey, dict]) -> tuple:  # per operator, the group with the longest history first
        key, series = item
        reports = {p.loaded.sha256 for points in series.values() for p in points}
        return (key.op, -len(reports), key)

    return {key: [Series(key, mode, name, points) for (mode, name), points in series.items()]
            for key, series in sorted(by_group.items(), key=order)}
