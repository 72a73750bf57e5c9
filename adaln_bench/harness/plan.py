"""What the probes run, as numbers: the sizes, seeds and derived index sets, full and quick.

The contract: docs/spec.md#4-batch-invariance-probes.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RandomRowsPlan:
    """The seeded random probe (harness/random_rows.py)."""

    rng_seed: int
    data_seed: int  # the seeded batch (data_seed, pool) the rows come from
    pool: int  # rows to draw from; also the largest batch size
    rows_per_size: int  # probed positions per batch

    def octaves(self) -> list[tuple[int, int]]:
        """(1, 1), (2, 2), (3, 4), (5, 8), ... with the last one ending at the pool size."""
        spans, lo, hi = [(1, 1)], 2, 2
        while lo <= self.pool:
            spans.append((lo, min(hi, self.pool)))
            lo, hi = hi + 1, hi * 2
        return spans


@dataclass(frozen=True)
class ProbePlan:
    all_rows_sizes: tuple[int, ...]
    seeds: tuple[int, ...]
    sub_batch_seeds: tuple[int, ...]
    full_batch: int
    sub_batch_sizes: tuple[int, ...]
    accuracy_sizes: tuple[int, ...]
    quick: bool
    random_rows: RandomRowsPlan

    @property
    def sweep_n(self) -> int:
        """The batch-size sweep runs on the last all_rows size."""
        return self.all_rows_sizes[-1]


ACCURACY_SIZES = (1, 3, 4, 64, 256, 2048)

FULL = ProbePlan(
    all_rows_sizes=(64, 257, 2048),
    seeds=(3, 4, 5),
    sub_batch_seeds=(3, 4),
    full_batch=4096,
    sub_batch_sizes=(1, 7, 1024, 2048),
    accuracy_sizes=ACCURACY_SIZES,
    quick=False,
    # 13 octaves (1 ... 2049-4096), up to 5 rows each: 57 comparisons; seed 6 is data no fixed probe uses.
    random_rows=RandomRowsPlan(rng_seed=20261130, data_seed=6, pool=4096, rows_per_size=5),
)

QUICK = ProbePlan(
    all_rows_sizes=(17, 64),
    seeds=(3, 4, 5),
    sub_batch_seeds=(3, 4),
    full_batch=256,
    sub_batch_sizes=(1, 7, 64),
    accuracy_sizes=ACCURACY_SIZES[:2],
    quick=True,
    random_rows=RandomRowsPlan(rng_seed=20261130, data_seed=6, pool=256, rows_per_size=2),
)

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
