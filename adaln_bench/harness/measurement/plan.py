"""The probes' arithmetic: sub-batch ranges, the sweep's sizes, rows and positions, and the fixed seeds.

The plans themselves (sizes and seeds per size family) are data of the operators: adaln_bench/ops/plan.py.
The contract: docs/spec.md#4-batch-invariance-probes.
"""
from __future__ import annotations

from adaln_bench.ops.plan import TIMESTEP, ProbePlan, RandomRowsPlan

__all__ = ["ProbePlan", "RandomRowsPlan", "FULL", "QUICK", "ACCURACY_SIZES"]

# The projection's plans (a timestep operator), as every module read them before there were operators.
FULL, QUICK = TIMESTEP.full, TIMESTEP.quick
ACCURACY_SIZES = FULL.accuracy_sizes

ACCURACY_SEED = 11
ACCURACY_UPSTREAM_SEED = 9
FINGERPRINT_SEED, FINGERPRINT_ROWS = 3, 257
SWEEP_PROBE_ROWS = 8
MAX_RECORDED_FAILURES = 8


def sub_batch_step(sub_batch: int, full_batch: int) -> int:
    """Small sub-batches are sampled every `full_batch // 512` rows; large ones tile the batch."""
    return sub_batch if sub_batch >= 1024 else max(sub_batch, full_batch // 512)


def sub_batch_ranges(sub_batch: int, full_batch: int) -> list[tuple[int, int]]:
    step = sub_batch_step(sub_batch, full_batch)
    return [(start, min(start + sub_batch, full_batch)) for start in range(0, full_batch, step)]


def sweep_batch_sizes(n: int) -> list[int]:
    """1 … 9, then k − 1, k, k + 1 for k = 16, 32, … up to n, then n; each at most n."""
    sizes = set(range(1, min(9, n) + 1))
    k = 16
    while k <= n:
        sizes.update(v for v in (k - 1, k, k + 1) if v <= n)
        k *= 2
    sizes.add(n)
    return sorted(sizes)


def sweep_probe_rows(n: int) -> list[int]:
    """0, n − 1, and the first six of n//8 + 3, n//8 + 3 + n//8, … below n − 1."""
    stride = max(n // 8, 1)
    inner = list(range(n // 8 + 3, n - 1, stride))[: SWEEP_PROBE_ROWS - 2]
    return sorted({0, n - 1, *inner})


def sweep_positions(m: int) -> list[int]:
    return sorted({0, (m - 1) // 2, m - 1})


def sweep_comparisons(n: int, seeds: int) -> int:
    """How many comparisons the sweep makes: one per (seed, size, row, position), plus a reversed batch per row."""
    rows = len(sweep_probe_rows(n))
    per_seed = rows * sum(len(sweep_positions(m)) for m in sweep_batch_sizes(n)) + rows
    return seeds * per_seed
