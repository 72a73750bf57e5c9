"""Which latency figure a diff gates on, and the verdict on device time (issue 9).

By default a latency row is judged on device time (`accuracy_latency.<T>.device_time`) with the test of
`datamodel/stats.py`: the ratio of the pooled medians past the threshold and a Mann-Whitney U test past it
at alpha. When both sides hold the same reference sampled beside the candidate (`device_time.reference`),
the test runs on the candidate's samples over the reference's, round by round, instead of on the times.
When either side has no device time (RL-Kernel's report, a CPU run, a report written before device time
existed), it falls back to the host-inclusive CUDA-event medians under the existing rule
(quartiles apart), and the note says so. The event medians can also be chosen on purpose.

Pure: no I/O; the diff engine calls `gate_latency` per (mode, candidate, T, metric).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from adaln_bench.datamodel.schema import AccuracyLatency, DeviceTime
from adaln_bench.datamodel.stats import DEFAULT_ALPHA, StatVerdict, latency_verdict, median, paired_ratios

METRIC_SAMPLES = {"fwd_us": ("fwd_us", "fwd_samples"), "fwd_bwd_us": ("fwd_bwd_us", "fwd_bwd_samples")}


@dataclass(frozen=True)
class DeviceGate:
    """A device-time verdict: the medians compared, the verdict and a note for the diff's row."""

    old_us: float
    new_us: float
    verdict: StatVerdict
    change: float
    note: str


def device_samples(point: Optional[AccuracyLatency], metric: str) -> Optional[tuple[float, list[float], DeviceTime]]:
    """(median, samples, entry) of `metric` ("fwd_us" or "fwd_bwd_us") in a point's device time, if any."""
    if point is None or point.device_time is None:
        return None
    median_key, samples_key = METRIC_SAMPLES[metric]
    dt = point.device_time
    med, samples = getattr(dt, median_key), getattr(dt, samples_key)
    if med is None or not samples:
        return None
    return med, list(samples), dt


def reference_ratios(dt: DeviceTime, metric: str, samples: list[float]) -> Optional[list[float]]:
    """The candidate's samples of `metric` over the reference's of the same round, if the entry has them."""
    ref = dt.reference
    if ref is None:
        return None
    return paired_ratios(samples, ref.fwd_samples if metric == "fwd_us" else (ref.fwd_bwd_samples or []))


def _side_text(dt: DeviceTime) -> str:
    text = f"{dt.processes} process{'es' if dt.processes != 1 else ''}"
    return text + (", throttled" if dt.throttled else "")


def gate_device_time(old: AccuracyLatency, new: AccuracyLatency, metric: str, threshold: float,
                     alpha: float = DEFAULT_ALPHA) -> Optional[DeviceGate]:
    """The device-time verdict of one metric, or None when either side has no device time for it."""
    a, b = device_samples(old, metric), device_samples(new, metric)
    if a is None or b is None:
        return None
    (old_med, old_samples, old_dt), (new_med, new_samples, new_dt) = a, b
    old_r, new_r = reference_ratios(old_dt, metric, old_samples), reference_ratios(new_dt, metric, new_samples)
    same_reference = old_r and new_r and old_dt.reference.what == new_dt.reference.what
    if same_reference:
        # Judged against the reference sampled beside it on each side: what moved both (a clock under a power
        # cap, another machine) cancels; the absolute change stays in the note.
        result = latency_verdict(old_r, new_r, threshold=threshold, alpha=alpha)
        notes = [f"relative to the reference sampled beside it: ×{median(old_r):.3f} → ×{median(new_r):.3f}, "
                 f"{result.describe()}; absolute {(new_med - old_med) / old_med * 100:+.1f} %; "
                 f"OLD {_side_text(old_dt)}, NEW {_side_text(new_dt)}"]
        change = result.ratio - 1.0
    else:
        result = latency_verdict(old_samples, new_samples, threshold=threshold, alpha=alpha)
        notes = [f"device time: {result.describe()}; OLD {_side_text(old_dt)}, NEW {_side_text(new_dt)}"]
        change = (new_med - old_med) / old_med
        if old_r or new_r:  # one side has a reference the other cannot be judged against
            notes.append("absolute: " + ("the references differ" if old_r and new_r else
                                         f"no reference in {'NEW' if old_r else 'OLD'}"))
    old_method = old_dt.method if metric == "fwd_us" else (old_dt.fwd_bwd_method or old_dt.method)
    new_method = new_dt.method if metric == "fwd_us" else (new_dt.fwd_bwd_method or new_dt.method)
    if old_method != new_method:
        notes.append(f"method {old_method} → {new_method}")
    if (old_dt.warmup_ms or 0.0) != (new_dt.warmup_ms or 0.0):  # a transient after other work was kept or not
        notes.append(f"warm-up {old_dt.warmup_ms or 0:g} → {new_dt.warmup_ms or 0:g} ms")
    return DeviceGate(old_med, new_med, result.verdict, change, "; ".join(notes))


def fallback_note(old: AccuracyLatency, new: AccuracyLatency, metric: str) -> str:
    """Why a row fell back to the event medians: which side lacks device time."""
    lacking = [side for side, point in (("OLD", old), ("NEW", new)) if device_samples(point, metric) is None]
    return f"event medians (host-inclusive): no device time in {' and '.join(lacking)}"
