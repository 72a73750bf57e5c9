"""How long a run would take on this CPU, before starting it: a full-size shape there takes hours.

The work of a run is counted from the probe plan (runs, and rows computed forward and backward) plus
accuracy (the candidate and its FP64 reference) and latency (the warm-up and samples of docs/spec.md#6-latency). The cost of a
run and of a row is measured here on the operator's stock path at the `small` preset's sizes, with the one
torch thread a CPU child uses, and scaled to the real sizes by the operator's declared bytes and FLOPs. It
is an estimate: it says hours or seconds, not to the minute.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Optional

from adaln_bench.harness.measurement import plan as P
from adaln_bench.harness.measurement import random_rows
from adaln_bench.harness.measurement.timing import SAMPLES, WARMUP
from adaln_bench.ops.draws import draw_params, draw_rows
from adaln_bench.ops.spec import Operator
from adaln_bench.shape import Shape

# Inputs up to this many elements (a full sweep batch of row inputs plus the parameters) need no estimate: the
# `small` preset's largest operator holds about 0.6 M. They take seconds a run.
CHEAP_ELEMENTS = 4096 * 512
CALIBRATION_ROWS = 64
CALIBRATION_PRESET = Shape(128, 32, 3, "small")
# Above this per (mode, candidate) pair a CPU run needs --yes: the bare CPU run takes seconds per pair.
CPU_LIMIT_S = 600
FP64_COST = 2.0  # the FP64 reference row, against a bf16 row; measured about 1-3x on x86 CPUs here


@dataclass(frozen=True)
class Work:
    runs: int
    rows: int


def plan_work(plan: P.ProbePlan) -> Work:
    """Runs and rows of the probes, accuracy and latency, in forward + backward row equivalents."""
    runs = rows = 0
    for n in plan.all_rows_sizes:  # two full runs and every row alone, per seed
        runs += len(plan.seeds) * (n + 2)
        rows += len(plan.seeds) * 3 * n
    for _ in plan.sub_batch_seeds:
        runs += 1
        rows += plan.full_batch
        for sb in plan.sub_batch_sizes:
            ranges = P.sub_batch_ranges(sb, plan.full_batch)
            runs += len(ranges)
            rows += sum(stop - start for start, stop in ranges)
    n = plan.sweep_n
    probe_rows = len(P.sweep_probe_rows(n))
    per_seed_runs = probe_rows * (2 + sum(len(P.sweep_positions(m)) for m in P.sweep_batch_sizes(n)))
    per_seed_rows = probe_rows * (1 + n + sum(len(P.sweep_positions(m)) * m for m in P.sweep_batch_sizes(n)))
    runs += len(plan.seeds) * per_seed_runs
    rows += len(plan.seeds) * per_seed_rows
    draws = random_rows.draw(plan.random_rows)
    alone = random_rows.probed_rows(draws)
    runs += len(draws) + len(alone)
    rows += sum(d.size for d in draws) + len(alone)
    calls = WARMUP + SAMPLES
    for t in plan.accuracy_sizes:
        runs += 2 + 2 * calls
        rows += int(t * (1 + FP64_COST)) + calls * t + calls * t // 3  # a forward is about a third of a step
    return Work(runs=runs, rows=rows)


def _seconds_per_step(op: Operator, shape: Shape, tokens: int, repeats: int = 3) -> float:
    """The stock path's fastest step of `repeats` at `tokens` rows on this CPU."""
    import torch

    device = torch.device("cpu")
    inputs = {**draw_rows(op, shape, 3, tokens, device), **draw_params(op, shape, device)}
    args = [inputs[t.name] for t in op.tensors]
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        leaves = [a.detach().requires_grad_() if t.name in op.grads else a for t, a in zip(op.tensors, args)]
        outs = op.stock_for(shape)(*leaves)
        outs = tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
        if op.grads:
            torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
        best = min(best, time.perf_counter() - t0)
    return best


def _units(op: Operator, shape: Shape, n: int) -> float:
    """The work of one step in one unit (bytes plus FLOPs): how the calibration is scaled to the real sizes."""
    c = op.cost(shape, n)
    return c.step_bytes + c.step_flops


def elements(op: Operator, shape: Shape, rows: int) -> int:
    return sum(math.prod(t.shape(shape, rows if t.role != "param" else 0)) for t in op.tensors)


def needs_estimate(op: Operator, shape: Shape) -> bool:
    return elements(op, shape, 2048) > CHEAP_ELEMENTS


def estimate_seconds(op: Operator, shape: Shape, plan: P.ProbePlan) -> float:
    """Seconds the plan would take for one candidate on this CPU, with one torch thread: the stock path timed
    at the calibration sizes (the `small` preset's), scaled by the operator's declared cost to the real ones."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one = _seconds_per_step(op, CALIBRATION_PRESET, 1)
        many = _seconds_per_step(op, CALIBRATION_PRESET, CALIBRATION_ROWS)
    finally:
        torch.set_num_threads(threads)
    cal_run, cal_row = _units(op, CALIBRATION_PRESET, 1), (
        _units(op, CALIBRATION_PRESET, CALIBRATION_ROWS) - _units(op, CALIBRATION_PRESET, 1)) / (CALIBRATION_ROWS - 1)
    real_run, real_row = _units(op, shape, 1), (_units(op, shape, CALIBRATION_ROWS) - _units(op, shape, 1)) / (
        CALIBRATION_ROWS - 1)
    per_run = one * real_run / cal_run
    per_row = max(many - one, 0.0) / (CALIBRATION_ROWS - 1) * (real_row / cal_row if cal_row else 1.0)
    work = plan_work(plan)
    return work.runs * per_run + work.rows * per_row


def describe_seconds(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


ESTIMATE_LINE_S = 60  # a CPU run estimated longer than this says so before it starts (it needs no --yes)


def estimate_line(seconds: float, what: str) -> Optional[str]:
    """The stderr line `run` prints before a CPU run estimated between ESTIMATE_LINE_S and CPU_LIMIT_S per
    pair (past CPU_LIMIT_S it is refused without --yes, with its own line): `what` as `_check_cpu_cost` in
    commands/run.py words it (shape, quick, `about 4 min per measured (mode, candidate) pair`)."""
    if seconds <= ESTIMATE_LINE_S or seconds > CPU_LIMIT_S:
        return None
    return f"adaln-bench: {what}; it runs now, with a progress line at least every 30 s in a log"
