"""Issue 32's targets (the gathered operators) and issue 43's (the timestep MLP) for a candidate against its
operator's stock path, and the verdict on one figure (pure).

| kind | S below 32768 (S = 4097) | S of 32768 and more |
| --- | --- | --- |
| forward | ≤ 1.0× stock | ≤ 1.0× stock and ≥ 75 % of the copy rate |
| forward + backward | ≤ 1.0× stock | ≤ 0.8× stock and ≥ 65 % of the copy rate |

Issue 43, timestep_mlp (T sizes; × stock only):

| kind | T below 64 | 64 <= T < 2048 | T of 2048 and more |
| --- | --- | --- | --- |
| forward | ≤ 1.0× | ≤ 1.0× | ≤ 0.6× |
| forward + backward | ≤ 1.0× | ≤ 0.8× | ≤ 0.5× |

and every error against FP64 (forward and each gradient) at most max(2× the stock path's, 1e-7), never above 1e-5.

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
MLP_OP = "timestep_mlp"
MLP_ERROR_FACTOR, MLP_ERROR_FLOOR, MLP_ERROR_CEILING = 2.0, 1e-7, 1e-5


@dataclass(frozen=True)
class Target:
    max_ratio: float
    min_of_copy: Optional[float]  # None: no copy-rate target at this size

    def describe(self) -> str:
        text = f"≤ {self.max_ratio:g}× stock"
        return text if self.min_of_copy is None else f"{text}, ≥ {self.min_of_copy:.0%} of copy"


def has_targets(op: str, table_grads: tuple = ()) -> bool:
    """The operators with targets: the gathered ones (table gradients, issue 32) and the timestep MLP (issue 43)."""
    return bool(table_grads) or op == MLP_OP


def issue_of(op: str) -> str:
    return "issue 43" if op == MLP_OP else "issue 32"


def target(kind: str, size: int, op: str = "") -> Target:
    """kind: "fwd" or "fwd_bwd"; op: the operator (timestep_mlp has its own table)."""
    if kind not in ("fwd", "fwd_bwd"):
        raise ValueError(f"unknown kind {kind!r}")
    if op == MLP_OP:
        if size >= 2048:
            return Target(0.6 if kind == "fwd" else 0.5, None)
        return Target(1.0 if kind == "fwd" or size < 64 else 0.8, None)
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


def judge(kind: str, size: int, ratio: Optional[float], of_copy: Optional[float], op: str = "") -> Verdict:
    """A missing figure fails (it was not measured, so it cannot be said to meet the target)."""
    t = target(kind, size, op)
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


def mlp_error_bound(stock: float) -> float:
    """Issue 43's bound on an error against FP64, from the stock path's at the same T."""
    return min(max(MLP_ERROR_FACTOR * stock, MLP_ERROR_FLOOR), MLP_ERROR_CEILING)


def mlp_error_verdict(ours: Optional[float], stock: Optional[float]) -> Optional[bool]:
    """Within mlp_error_bound of the stock path's error; None when either is missing."""
    if ours is None or stock is None:
        return None
    return ours <= mlp_error_bound(stock)
