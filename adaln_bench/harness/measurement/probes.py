"""The three batch-invariance probes (docs/spec.md#4-batch-invariance-probes), as pure functions of a `Runner`.

A runner computes one *run*: the rows `rows` of the seeded batch (seed, n), forward and backward with
the matching rows of that batch's upstream gradient. The probes only compare runs bitwise, so they can
be tested on the CPU with a fake candidate whose batch dependence is known.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from adaln_bench.harness.measurement import plan as P
from adaln_bench.harness.measurement.random_rows import planned_runs as planned_random_runs, probe_random_rows
# RunOutput is also imported from here by older callers.
from adaln_bench.harness.measurement.runs import (  # noqa: F401
    Differences,
    RunOutput,
    Runner,
    Tick,
    no_progress,
    same_rows,
)
from adaln_bench.datamodel.metrics import probes_pass
from adaln_bench.datamodel.schema import (
    AllRowsCount,
    BatchInvariance,
    SubBatchCounts,
    SweepCounts,
    SweepFailure,
)


def _same(a: Optional[torch.Tensor], b: Optional[torch.Tensor]) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return bool(torch.equal(a, b))


def same_params(a: RunOutput, b: RunOutput) -> Optional[bool]:
    """The parameter gradients of two runs bitwise equal; None when the candidate differentiates none."""
    if a.param_grads is None and b.param_grads is None:
        return None
    return a.param_grads is not None and b.param_grads is not None and all(
        _same(x, y) for x, y in zip(a.param_grads, b.param_grads))


def probe_all_rows(run: Runner, plan: P.ProbePlan,
                   tick: Tick = no_progress) -> tuple[dict[str, AllRowsCount], Optional[bool]]:
    """Each row alone against the full batch; and a second full run must repeat the parameter gradients
    bitwise (None: the candidate differentiates no parameter)."""
    counts: dict[str, AllRowsCount] = {}
    repeatable: Optional[bool] = None
    for n in plan.all_rows_sizes:
        fwd, rowgrad = Differences(), Differences()
        for seed in plan.seeds:
            full = run(seed, n, range(n))
            again = run(seed, n, range(n))
            same = same_params(full, again)
            if same is not None:
                repeatable = same and repeatable is not False
            full, again = full.rows_only(), None
            tick(2)
            for i in range(n):
                alone = run(seed, n, [i])
                fwd.add(alone.outs, 0, full.outs, i)
                if full.row_grads is not None:
                    rowgrad.add(alone.row_grads, 0, full.row_grads, i)
                tick(1)
        counts[str(n)] = AllRowsCount(rows=len(plan.seeds) * n, fwd_differ=sum(fwd.read()),
                                      rowgrad_differ=sum(rowgrad.read()))
    return counts, repeatable


def probe_sub_batches(run: Runner, plan: P.ProbePlan, tick: Tick = no_progress) -> SubBatchCounts:
    """Contiguous sub-batches against the same rows of one full batch; a sub-batch counts once if any row differs."""
    full_n = plan.full_batch
    made = 0
    fwd, rowgrad = Differences(), Differences()
    for seed in plan.sub_batch_seeds:
        full = run(seed, full_n, range(full_n)).rows_only()
        tick(1)
        for sb in plan.sub_batch_sizes:
            for start, stop in P.sub_batch_ranges(sb, full_n):
                part = run(seed, full_n, range(start, stop))
                made += 1
                rows = slice(start, stop)
                fwd.add(part.outs, slice(None), full.outs, rows)
                if full.row_grads is not None:
                    rowgrad.add(part.row_grads, slice(None), full.row_grads, rows)
                del part  # before the next run, not after it: half a full batch's outputs at the largest size
                tick(1)
        del full  # likewise before the next seed's full batch
    return SubBatchCounts(
        full_batch=full_n,
        sub_batch_sizes=list(plan.sub_batch_sizes),
        sub_batches=made,
        fwd_differ=sum(fwd.read()),
        rowgrad_differ=sum(rowgrad.read()),
    )


def probe_batch_size_sweep(run: Runner, plan: P.ProbePlan, tick: Tick = no_progress) -> SweepCounts:
    """Each probe row at the start, middle and end of batches of every size, filled with random other rows."""
    n = plan.sweep_n
    sizes = P.sweep_batch_sizes(n)
    probe_rows = P.sweep_probe_rows(n)
    where: list[SweepFailure] = []  # each comparison, in order; its answer in `answers`
    answers = Differences()

    def compare(seed: int, got: RunOutput, pos: int, ref: RunOutput, m: int, r: int) -> None:
        # A row differs in its outputs or, where the candidate has them, its row gradients.
        grads = ref.row_grads is not None
        answers.add(tuple(got.outs) + (tuple(got.row_grads) if grads and got.row_grads is not None else ()),
                    pos, tuple(ref.outs) + (tuple(ref.row_grads) if grads else ()), 0)
        where.append(SweepFailure(seed=seed, batch=m, position=pos, row=r))

    for seed in plan.seeds:
        alone = {r: run(seed, n, [r]).rows_only() for r in probe_rows}
        tick(len(probe_rows))
        perm_gen = torch.Generator().manual_seed(seed)
        for m in sizes:
            for r in probe_rows:
                perm = torch.randperm(n, generator=perm_gen)
                filler = perm[perm != r][: m - 1].tolist()
                for pos in P.sweep_positions(m):
                    got = run(seed, n, filler[:pos] + [r] + filler[pos:])
                    compare(seed, got, pos, alone[r], m, r)
                    tick(1)
        reverse = list(range(n - 1, -1, -1))
        for r in probe_rows:
            got = run(seed, n, reverse)
            compare(seed, got, n - 1 - r, alone[r], n, r)
            tick(1)
    failed = [w for w, bad in zip(where, answers.read()) if bad]
    return SweepCounts(
        batch_sizes=sizes,
        probe_rows=probe_rows,
        comparisons=len(where),
        differ=len(failed),
        first_failures=failed[: P.MAX_RECORDED_FAILURES],
    )


def planned_runs(plan: P.ProbePlan) -> int:
    """How many runs the three probes make: the progress bar's total."""
    all_rows = sum(len(plan.seeds) * (n + 2) for n in plan.all_rows_sizes)
    subs = len(plan.sub_batch_seeds) * (1 + sum(len(P.sub_batch_ranges(sb, plan.full_batch)) for sb in plan.sub_batch_sizes))
    n = plan.sweep_n
    rows = len(P.sweep_probe_rows(n))
    sweep = len(plan.seeds) * rows * (1 + 1 + sum(len(P.sweep_positions(m)) for m in P.sweep_batch_sizes(n)))
    return all_rows + subs + sweep + planned_random_runs(plan.random_rows)


def probe_batch_invariance(run: Runner, plan: P.ProbePlan, tick: Tick = no_progress) -> BatchInvariance:
    all_rows, repeatable = probe_all_rows(run, plan, tick)
    subs = probe_sub_batches(run, plan, tick)
    sweep = probe_batch_size_sweep(run, plan, tick)
    randoms = probe_random_rows(run, plan.random_rows, tick)
    result = BatchInvariance(
        all_rows=all_rows,
        params_repeatable=repeatable,
        full_vs_sub_batches=subs,
        batch_size_sweep=sweep,
        batch_invariant=False,
        random_rows=randoms,
    )
    result.batch_invariant = probes_pass(result)  # the verdict over every probe in datamodel/metrics.py
    return result


# --- bits across sizes (kernel-bench's quick check) ------------------------------------------------------------


def single_rows(n: int) -> list[int]:
    """The first, a middle and the last row."""
    return sorted({0, n // 2, n - 1})


def count_rows_differ(whole: RunOutput, part: RunOutput, rows: Sequence[int]) -> int:
    """Rows of `part` that differ from rows `rows` of `whole` in any output or row gradient."""
    mine = [*whole.outs, *(whole.row_grads or ())]
    theirs = [*part.outs, *(part.row_grads or ())]
    index = torch.as_tensor(list(rows), device=mine[0].device)
    differ = torch.zeros(len(rows), dtype=torch.bool, device=mine[0].device)
    for w, p in zip(mine, theirs):
        differ |= (w.index_select(0, index) != p).reshape(len(rows), -1).any(dim=1)
    return int(differ.sum())


def probe_prefixes(run: Runner, seed: int, sizes: Sequence[int]) -> dict:
    """Bits across the sizes a benchmark times: the batch of the largest size run whole; its prefix at every other
    size and `single_rows` alone must give its rows bit for bit (counted per row), and at every size two identical
    runs the same parameter gradients. `invariant`: no row differed; `repeatable`: every size repeated (None: no
    parameter differentiated)."""
    n = max(sizes)
    whole = run(seed, n, range(n))
    out: dict = {"rows_compared": 0, "rows_differ": 0, "params_repeatable": {}, "failures": []}

    def compare(what: str, rows: list[int]) -> None:
        bad = count_rows_differ(whole, run(seed, n, rows), rows)
        out["rows_compared"] += len(rows)
        out["rows_differ"] += bad
        if bad:
            out["failures"].append(f"{what}: {bad} of {len(rows)} rows differ")

    for s in sorted(set(sizes)):
        if s < n:
            compare(f"prefix {s}", list(range(s)))
        first = whole if s == n else run(seed, n, range(s))
        out["params_repeatable"][str(s)] = same_params(first, run(seed, n, range(s)))
    for i in single_rows(n):
        compare(f"row {i} alone", [i])
    repeat = [v for v in out["params_repeatable"].values() if v is not None]
    out["invariant"] = out["rows_differ"] == 0
    out["repeatable"] = all(repeat) if repeat else None
    return out
