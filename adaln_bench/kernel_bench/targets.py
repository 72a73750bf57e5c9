"""Issue 32's targets for a candidate against its operator's stock path, and the verdict on one figure (pure).

| kind | S below 32768 (S = 4097) | S of 32768 and more |
| --- | --- | --- |
| forward | ≤ 1.0× stock | ≤ 1.0× stock and ≥ 75 % of the copy rate |
| forward + backward | ≤ 1.0× stock | ≤ 0.8× stock and ≥ 65 % of the copy rate |

Ratios are paired against the stock path in the same rounds, medians over at least `MIN_PROCESSES` processes
(fewer make the verdict provisional). A table gradient's error against FP64 must be at least
`ERROR_FACTOR` times smaller than the stock path's on the same inputs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

LARGE_S = 32768
MIN_PROCESSES = 3
ERROR_FACTOR = 10.0


@dataclass(frozen=True)
class Target:
    max_ratio: float
    min_of_copy: Optional[float]  # None: no copy-rate target at this size

    def describe(self) -> str:
        text = f"≤ {self.max_ratio:g}× stock"
        return text if self.min_of_copy is None else f"{text}, ≥ {self.min_of_copy:.0%} of copy"


def target(kind: str, size: int) -> Target:
    """kind: "fwd" or "fwd_bwd"."""
    if kind not in ("fwd", "fwd_bwd"):
        raise ValueError(f"unknown kind {kind!r}")
    if size < LARGE_S:
        return Target(1.0, None)
    return Target(1.0, 0.75) if kind == "fwd" else Target(0.8, 0.65)


@dataclass(frozen=True)
class Verdict:
    passed: bool
    target: Target
    why: str  # what missed, "" when passed

    @property
    def word(self) -> str:
        return "pass" if self.passed else "FAIL"


def judge(kind: str, size: int, ratio: Optional[float], of_copy: Optional[float]) -> Verdict:
    """A missing figure fails (it was not measured, so it cannot be said to meet the target)."""
    t = target(kind, size)
    missed = []
    if ratio is None:
        missed.append("no paired ratio")
    elif ratio > t.max_ratio:
        missed.append(f"{ratio:.3f}× stock > {t.max_ratio:g}×")
    if t.min_of_copy is not None:
        if of_copy is None:
            missed.append("no copy rate")
        elif of_copy < t.min_of_copy:
            missed.append(f"{of_copy:.1%} of copy < {t.min_of_copy:.0%}")
    return Verdict(not missed, t, "; ".join(missed))


def error_verdict(ours: Optional[float], stock: Optional[float]) -> Optional[bool]:
    """A table gradient at least ERROR_FACTOR times closer to FP64 than the stock path's; None when either is
    missing."""
    if ours is None or stock is None:
        return None
    return ours * ERROR_FACTOR <= stock
