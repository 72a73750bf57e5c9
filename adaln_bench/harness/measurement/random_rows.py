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
from adaln_bench.harness.measurement.runs import Differences, Runner, Tick, no_progress
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
    where: list[tuple[int, int, int]] = []  # (size, position, row) of each comparison, in order
    fwd, rowgrad = Differences(), Differences()  # their answers, read once at the end
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
            where.append((d.size, pos, row))
            fwd.add(got.outs, pos, ref.outs, 0)
            if ref.row_grads is None:
                rowgrad.constant(False)
            else:
                rowgrad.add(got.row_grads, pos, ref.row_grads, 0)
        del got  # before the next batch is run (up to the whole pool), not after it
    failures = [RandomRowFailure(size=size, position=pos, row=row, fwd=fwd_bad, rowgrad=grad_bad)
                for (size, pos, row), fwd_bad, grad_bad in zip(where, fwd.read(), rowgrad.read())
                if fwd_bad or grad_bad]
    return RandomRowsCounts(
        rng_seed=plan.rng_seed,
        data_seed=plan.data_seed,
        pool=plan.pool,
        sizes=[d.size for d in draws],
        comparisons=len(where),
        fwd_differ=sum(f.fwd for f in failures),
        rowgrad_differ=sum(f.rowgrad for f in failures),
        first_failures=failures[:MAX_RECORDED_FAILURES],
    )
