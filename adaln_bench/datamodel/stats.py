"""The statistics behind a latency verdict: a Mann-Whitney U test and a rule that needs size and significance.

A latency change counts (WORSE or BETTER) only when both hold, as in asv and nvbench's robust compare:

- its size: the ratio of the medians, new / old, lies beyond 1 ± `threshold`;
- its significance: the change exceeds the threshold beyond doubt. The two-sided Mann-Whitney U test of
  every NEW sample against every OLD sample scaled by 1 ± `threshold` (all processes pooled) gives
  p < `alpha`. Testing against the scaled samples, not the raw ones, matters: with a few hundred samples
  a real 3 % shift is highly significant, and noise can push its median ratio past a 5 % threshold;
  what is asked is whether the shift is past the threshold, and for that one it is not.

Beyond the threshold without that significance is AMBIGUOUS; within the threshold is SAME, however
significant, because a real but small shift (a clock a few MHz lower) is not news. With fewer than
`MIN_SAMPLES` samples on a side the verdict carries a warning: the smallest p-value a U test can give
with 3 against 3 samples is 0.1, so such a side can never be called WORSE at alpha 0.002.

Also here: a candidate's samples over its reference's, round by round (`paired_ratios`, `median_ratio`), as
the report keeps them and the diff tests them. Pure Python on purpose: scipy is not a dependency.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Optional, Sequence

# asv's default: a change must be significant at p < 0.002. With a few hundred samples per side, as
# device timing gives, a real shift of a few percent reaches p < 1e-10, so this costs no power; it keeps
# false alarms below one in 500 comparisons, which matters with ~100 latency rows per nightly diff.
DEFAULT_ALPHA = 0.002
# The ratio of medians must lie beyond 1 ± 5 %. Device time repeats to well under 1 % within a process
# and to a few percent between processes; the issue asks for at most 10 %.
DEFAULT_THRESHOLD = 0.05
# Google benchmark's compare.py warns below 9 repetitions; below that the U test has little power.
MIN_SAMPLES = 9
# Up to this many samples per side (and no ties) the exact distribution of U is used; above, the normal
# approximation, which is accurate to about 1e-3 in p from there on.
EXACT_MAX = 12


class StatVerdict(str, Enum):
    SAME = "SAME"
    BETTER = "BETTER"
    WORSE = "WORSE"
    AMBIGUOUS = "AMBIGUOUS"


@dataclass(frozen=True)
class UTest:
    """Mann-Whitney U of `x` against `y`: `u` counts pairs with x > y (ties count one half)."""

    u: float
    p_value: float
    n_x: int
    n_y: int
    exact: bool


@dataclass(frozen=True)
class LatencyVerdict:
    verdict: StatVerdict
    ratio: float  # median(new) / median(old)
    p_value: float  # U test of NEW against OLD: is there any difference at all (shown, not gated on)
    p_beyond: float  # U test of NEW against OLD scaled by 1 ± threshold: is the change past the threshold
    alpha: float
    threshold: float
    n_old: int
    n_new: int
    warning: Optional[str] = None

    def describe(self) -> str:
        """One line for a diff note, in words: `+15.2 %, past ±5% (U test: p = 3e-40 that it is not; 300 vs
        300 samples)`, or `+2.0 %, not shown to be past ±5% (U test: p = 1 that it is not, needs ≤ 0.002; …)`."""
        change, threshold = f"{(self.ratio - 1) * 100:+.1f} %", f"±{self.threshold:.0%}"
        samples = f"{self.n_old} vs {self.n_new} samples"
        if self.p_beyond <= self.alpha:
            text = f"{change}, past {threshold} (U test: p = {self.p_beyond:.2g} that it is not; {samples})"
        else:
            text = (f"{change}, not shown to be past {threshold} (U test: p = {self.p_beyond:.2g} that it is not, "
                    f"needs ≤ {self.alpha:g}; {samples})")
        return f"{text}; {self.warning}" if self.warning else text


def median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("median of no values")
    s = sorted(values)
    mid = len(s) // 2
    return float(s[mid]) if len(s) % 2 else (s[mid - 1] + s[mid]) / 2.0


def _ranks(values: list[float]) -> tuple[list[float], list[int]]:
    """Mid-ranks (1-based; tied values share the mean of their ranks) and the size of each tie group."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    ties: list[int] = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0 + 1.0
        if j > i:
            ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


def _exact_cdf_counts(n_x: int, n_y: int) -> list[int]:
    """How many of the C(n_x + n_y, n_x) orderings give U = 0, 1, …, n_x·n_y (no ties)."""
    # counts[m][u] for the current n: built up one sample at a time, the classic recurrence
    # N(u; m, n) = N(u - n; m - 1, n) + N(u; m, n - 1).
    table = {(0, n): [1] for n in range(n_y + 1)}
    for m in range(1, n_x + 1):
        table[(m, 0)] = [1]
        for n in range(1, n_y + 1):
            a, b = table[(m - 1, n)], table[(m, n - 1)]
            size = m * n + 1
            row = [0] * size
            for u in range(size):
                if 0 <= u - n < len(a):
                    row[u] += a[u - n]
                if u < len(b):
                    row[u] += b[u]
            table[(m, n)] = row
    return table[(n_x, n_y)]


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> UTest:
    """Two-sided Mann-Whitney U test: exact for small samples without ties, else the normal
    approximation with the tie-corrected variance and a continuity correction of 1/2."""
    n_x, n_y = len(x), len(y)
    if n_x == 0 or n_y == 0:
        raise ValueError("the U test needs at least one sample on each side")
    ranks, ties = _ranks([float(v) for v in x] + [float(v) for v in y])
    u = sum(ranks[:n_x]) - n_x * (n_x + 1) / 2.0
    mean = n_x * n_y / 2.0
    if not ties and n_x <= EXACT_MAX and n_y <= EXACT_MAX:
        counts = _exact_cdf_counts(n_x, n_y)
        total = sum(counts)
        k = int(round(min(u, n_x * n_y - u)))  # U's distribution is symmetric about its mean
        p = min(1.0, 2.0 * sum(counts[: k + 1]) / total)
        return UTest(u, p, n_x, n_y, exact=True)
    n = n_x + n_y
    tie_term = sum(t ** 3 - t for t in ties) / (n * (n - 1)) if n > 1 else 0.0
    variance = n_x * n_y / 12.0 * ((n + 1) - tie_term)
    if variance <= 0:  # every value equal: no evidence of any difference
        return UTest(u, 1.0, n_x, n_y, exact=False)
    z = max(abs(u - mean) - 0.5, 0.0) / math.sqrt(variance)
    return UTest(u, min(1.0, math.erfc(z / math.sqrt(2.0))), n_x, n_y, exact=False)


def latency_verdict(old: Sequence[float], new: Sequence[float], threshold: float = DEFAULT_THRESHOLD,
                    alpha: float = DEFAULT_ALPHA) -> LatencyVerdict:
    """SAME / BETTER / WORSE / AMBIGUOUS for two sets of latency samples (lower is better)."""
    if threshold < 0 or not 0 < alpha < 1:
        raise ValueError(f"threshold must be ≥ 0 and alpha in (0, 1), not {threshold}, {alpha}")
    m_old, m_new = median(old), median(new)
    if m_old <= 0:
        raise ValueError(f"latency samples must be positive; the old median is {m_old}")
    ratio = m_new / m_old
    any_change = mann_whitney_u(new, old).p_value
    # Slower: is NEW slower than OLD made (1 + threshold) times slower? Faster: than OLD (1 - threshold) times?
    factor = 1.0 + threshold if ratio > 1.0 else 1.0 - threshold
    scaled = mann_whitney_u(new, [v * factor for v in old])
    # Two-sided p, counted only when U leans the way the medians do (it always does in practice).
    leans = scaled.u > scaled.n_x * scaled.n_y / 2.0 if ratio > 1.0 else scaled.u < scaled.n_x * scaled.n_y / 2.0
    beyond = scaled.p_value if leans else 1.0
    few = [f"{side} has {n}" for side, n in (("OLD", len(old)), ("NEW", len(new))) if n < MIN_SAMPLES]
    warning = (f"few samples ({', '.join(few)}; fewer than {MIN_SAMPLES} cannot show significance "
               "reliably)") if few else None
    if abs(ratio - 1.0) <= threshold:
        verdict = StatVerdict.SAME
    elif beyond >= alpha:
        verdict = StatVerdict.AMBIGUOUS
    else:
        verdict = StatVerdict.WORSE if ratio > 1.0 else StatVerdict.BETTER
    return LatencyVerdict(verdict, ratio, any_change, beyond, alpha, threshold, len(old), len(new), warning)


def paired_ratios(samples: Sequence[float], reference: Sequence[float]) -> Optional[list[float]]:
    """Each sample over the reference's sample of the same round (interleaved sampling gives both the same
    count, round by round, and pooling keeps the order); None when they do not pair."""
    if not samples or len(samples) != len(reference) or any(r <= 0 for r in reference):
        return None
    return [x / r for x, r in zip(samples, reference)]


def median_ratio(samples: Sequence[float], reference: Sequence[float]) -> Optional[float]:
    """The median of `paired_ratios`, as the report keeps it; None when they do not pair."""
    pairs = paired_ratios(samples, reference)
    return round(median(pairs), 4) if pairs else None
