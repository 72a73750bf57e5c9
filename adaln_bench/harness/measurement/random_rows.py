"""The seeded random probe: batch sizes the fixed probes never use, rows at random positions, random order.

The three fixed probes use a few dozen batch sizes, so a kernel whose rows change only at, say, 514 to 1022
rows passes them all. This probe draws one batch size from every octave (1, 2, 3-4, 5-8, ... up to the
pool), shuffles the order in which the sizes run, places random rows at random positions, and compares each
probed row's outputs and row gradients bitwise with the same row computed alone. Everything is drawn from one CPU
generator with a recorded seed, so a failure can be replayed exactly.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from adaln_bench.harness.measurement.plan import RandomRowsPlan
from adaln_bench.harness.measurement.runs import Runner, Tick, no_progress, same_rows
from adaln_bench.datamodel.schema import RandomRowFailure, RandomRowsCounts

MAX_RECORDED_FAILURES = 8


@dataclass(frozen=True)
class Draw:
    size: int
    batch: list[int]  # row indices into the pool, in batch order
    positions: list[int]  # the probed positions in the batch


def draw(plan: RandomRowsPlan) -> list[Draw]:
    """The whole probe as data: one size per octave, in shuffled order, with its batch and probed positions."""
    gen = torch.Generator().manual_seed(plan.rng_seed)

    def below(n: int) -> int:
        return int(torch.randint(n, (1,), generator=gen))

    sizes = [lo + below(hi - lo + 1) for lo, hi in plan.octaves()]
    order = torch.randperm(len(sizes), generator=gen).tolist()
    draws = []
    for i in order:
        size = sizes[i]
        batch = torch.randperm(plan.pool, generator=gen)[:size].tolist()
        k = min(plan.rows_per_size, size)
        positions = sorted(torch.randperm(size, generator=gen)[:k].tolist())
        draws.append(Draw(size, batch, positions))
    return draws


def probed_rows(draws: list[Draw]) -> set[int]:
    """The distinct rows the probe runs alone (each once, however often it is drawn)."""
    return {d.batch[p] for d in draws for p in d.positions}


def planned_runs(plan: RandomRowsPlan) -> int:
    """Runs the probe makes (a batch per size, one alone-run per distinct probed row): the progress bar's share."""
    draws = draw(plan)
    return len(draws) + len(probed_rows(draws))


def probe_random_rows(run: Runner, plan: RandomRowsPlan, tick: Tick = no_progress) -> RandomRowsCounts:
    alone: dict[int, object] = {}
    comparisons = fwd_differ = rowgrad_differ = 0
    failures: list[RandomRowFailure] = []
    draws = draw(plan)
    for d in draws:
        got = run(plan.data_seed, plan.pool, d.batch)
        tick(1)
        for pos in d.positions:
            row = d.batch[pos]
            if row not in alone:
                alone[row] = run(plan.data_seed, plan.pool, [row]).rows_only()
                tick(1)
            ref = alone[row]
            comparisons += 1
            fwd_bad = not same_rows(got.outs, pos, ref.outs, 0)
            grad_bad = ref.row_grads is not None and not same_rows(got.row_grads, pos, ref.row_grads, 0)
            fwd_differ += fwd_bad
            rowgrad_differ += grad_bad
            if (fwd_bad or grad_bad) and len(failures) < MAX_RECORDED_FAILURES:
                failures.append(RandomRowFailure(size=d.size, position=pos, row=row, fwd=fwd_bad, rowgrad=grad_bad))
        del got  # before the next batch is run (up to the whole pool), not after it
    return RandomRowsCounts(
        rng_seed=plan.rng_seed,
        data_seed=plan.data_seed,
        pool=plan.pool,
        sizes=[d.size for d in draws],
        comparisons=comparisons,
        fwd_differ=fwd_differ,
        rowgrad_differ=rowgrad_differ,
        first_failures=failures,
    )
