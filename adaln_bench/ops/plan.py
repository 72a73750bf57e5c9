"""What the probes run, as numbers: sizes, seeds and derived index sets per size family, full and quick.

Every operator belongs to a `Family` (docs/spec.md#23-size-families): timestep operators (T), token
operators (S), and timestep_sinusoid's own. The arithmetic of the probes (sub-batch ranges, the sweep's
sizes and rows) is in adaln_bench/harness/measurement/plan.py.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RandomRowsPlan:
    """The seeded random probe (harness/measurement/random_rows.py)."""

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


SEEDS = (3, 4, 5)
SUB_BATCH_SEEDS = (3, 4)
RANDOM_SEED, RANDOM_DATA_SEED = 20261130, 6  # seed 6 is data no fixed probe uses


def full_plan(full_batch: int, sub_batch_sizes: tuple[int, ...], accuracy_sizes: tuple[int, ...]) -> ProbePlan:
    return ProbePlan(all_rows_sizes=(64, 257, 2048), seeds=SEEDS, sub_batch_seeds=SUB_BATCH_SEEDS,
                     full_batch=full_batch, sub_batch_sizes=sub_batch_sizes, accuracy_sizes=accuracy_sizes,
                     quick=False,
                     # One size per octave up to the full batch, up to 5 rows each (57 comparisons at 4096).
                     random_rows=RandomRowsPlan(RANDOM_SEED, RANDOM_DATA_SEED, pool=full_batch, rows_per_size=5))


def quick_plan(accuracy_sizes: tuple[int, ...]) -> ProbePlan:
    """A smoke test only (docs/spec.md#4-batch-invariance-probes, item 8): the same for every family."""
    return ProbePlan(all_rows_sizes=(17, 64), seeds=SEEDS, sub_batch_seeds=SUB_BATCH_SEEDS, full_batch=256,
                     sub_batch_sizes=(1, 7, 64), accuracy_sizes=accuracy_sizes[:2], quick=True,
                     random_rows=RandomRowsPlan(RANDOM_SEED, RANDOM_DATA_SEED, pool=256, rows_per_size=2))


@dataclass(frozen=True)
class Family:
    name: str  # "T", "S", or an operator's own
    size_symbol: str  # how the perf sizes are written: T or S
    full: ProbePlan
    quick: ProbePlan

    def plan(self, quick: bool) -> ProbePlan:
        return self.quick if quick else self.full


T_SIZES = (1, 3, 4, 64, 256, 2048)
S_SIZES = (4097, 32768)

TIMESTEP = Family("T", "T", full_plan(4096, (1, 7, 1024, 2048), T_SIZES), quick_plan(T_SIZES))
TOKEN = Family("S", "S", full_plan(131072, (1, 7, 4097, 32768, 65536), S_SIZES), quick_plan(S_SIZES))
SINUSOID = Family("sinusoid", "T", full_plan(8192, (1, 7, 2048, 4097), T_SIZES), quick_plan(T_SIZES))
