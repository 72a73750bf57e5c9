"""Steps, not noise: where a series of measurements moves to another level, beyond its own noise.

Two tests, both needed (the idea of asv's step detection, written here for this project):

1. A piecewise-constant fit. The values (logarithms, so that a step is a ratio) are split into segments,
   each at its weighted mean, minimising the squared misfit in units of each point's noise plus a penalty
   per segment; the optimal split is found by dynamic programming over every prefix (n is small).
   A point's noise combines its own (the spread of its samples: the standard error of their median)
   with the series' (the spread of successive differences, robustly, when there are enough points) and a
   floor. A boundary the fit keeps is a candidate step.
2. A confirmation between the neighbouring points on either side of it (for device time, the diff
   engine's U test over their samples, `reports/latency_gate.py`, on the paired ratios where both sides
   have them), and a size past the same threshold the diff uses. A step the fit finds but the
   samples do not confirm is not marked.

Pure: no I/O. The caller gives values, noises and the confirmation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from adaln_bench.datamodel.stats import median

# The smallest noise a point is taken to have (relative): the within-run spread of device-time samples
# is far below the process-to-process one, which two points alone cannot measure.
NOISE_FLOOR = 0.005
# Successive differences are a fair estimate of a series' own noise from this many points on; below it
# one step would be most of what they measure.
MIN_POINTS_FOR_SERIES_NOISE = 4
MAD_TO_SIGMA = 1.4826
MEDIAN_SE = 1.2533  # the standard error of a median is about this times the mean's, for normal noise


@dataclass(frozen=True)
class Step:
    index: int  # the first point at the new level
    before: float  # the fitted level before and after, in the values' own units (exp of the log fit)
    after: float

    @property
    def change(self) -> float:
        return self.after / self.before - 1.0

    @property
    def direction(self) -> str:
        return "up" if self.after > self.before else "down"


def sample_noise(samples: Sequence[float]) -> float:
    """The relative standard error of the median of positive samples (0 for fewer than 2)."""
    logs = [math.log(s) for s in samples if s > 0]
    if len(logs) < 2:
        return 0.0
    mid = median(logs)
    mad = median([abs(v - mid) for v in logs])
    return MEDIAN_SE * MAD_TO_SIGMA * mad / math.sqrt(len(logs))


def series_noise(logs: Sequence[float]) -> float:
    """The series' own noise from successive differences (robust to a step or two among them)."""
    if len(logs) < MIN_POINTS_FOR_SERIES_NOISE:
        return 0.0
    diffs = [abs(b - a) for a, b in zip(logs, logs[1:])]
    return MAD_TO_SIGMA * median(diffs) / math.sqrt(2.0)


def penalty(n: int) -> float:
    """The cost of one more segment, in units of squared noise: about a 4 to 5 sigma jump between two
    single points, more for a longer series (more places where noise could pass for a step)."""
    return 8.0 + 2.0 * math.log(max(n, 1))


def fit_segments(logs: Sequence[float], sigmas: Sequence[float], beta: Optional[float] = None) -> list[int]:
    """The starts of the segments of the best penalised piecewise-constant fit (0 always first)."""
    n = len(logs)
    if n == 0:
        return []
    beta = penalty(n) if beta is None else beta
    w = [1.0 / (s * s) for s in sigmas]
    sw, swy, swyy = [0.0], [0.0], [0.0]
    for wi, yi in zip(w, logs):
        sw.append(sw[-1] + wi)
        swy.append(swy[-1] + wi * yi)
        swyy.append(swyy[-1] + wi * yi * yi)

    def cost(i: int, j: int) -> float:  # misfit of points i..j-1 at their weighted mean
        a, b, c = sw[j] - sw[i], swy[j] - swy[i], swyy[j] - swyy[i]
        return max(c - b * b / a, 0.0)

    best = [0.0] + [math.inf] * n
    start = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(j):
            value = (best[i] + beta if i else 0.0) + cost(i, j)
            if value < best[j]:
                best[j], start[j] = value, i
    starts, j = [], n
    while j > 0:
        starts.append(start[j])
        j = start[j]
    return sorted(starts)


def _level(logs: Sequence[float], sigmas: Sequence[float], i: int, j: int) -> float:
    w = [1.0 / (s * s) for s in sigmas[i:j]]
    return math.exp(sum(wi * y for wi, y in zip(w, logs[i:j])) / sum(w))


def detect_steps(values: Sequence[float], noises: Sequence[float], threshold: float,
                 confirm: Callable[[int, int], bool]) -> list[Step]:
    """The steps of a series of positive values, each point with its own relative noise.

    A step is kept when the fit puts a boundary there, the fitted levels differ by more than `threshold`
    (relative), and `confirm(i - 1, i)` accepts the change between the two neighbouring points.
    """
    if len(values) < 2:
        return []
    logs = [math.log(v) for v in values]
    shared = series_noise(logs)
    sigmas = [math.sqrt(s * s + shared * shared + NOISE_FLOOR * NOISE_FLOOR) for s in noises]
    starts = fit_segments(logs, sigmas)
    bounds = [*starts, len(values)]
    steps = []
    for k in range(1, len(starts)):
        before = _level(logs, sigmas, bounds[k - 1], bounds[k])
        after = _level(logs, sigmas, bounds[k], bounds[k + 1])
        if abs(after / before - 1.0) > threshold and confirm(bounds[k] - 1, bounds[k]):
            steps.append(Step(bounds[k], before, after))
    return steps
