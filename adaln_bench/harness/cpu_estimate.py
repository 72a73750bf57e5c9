"""How long a run would take on this CPU, before starting it: a full-size shape there takes hours.

The work of a run is counted from the probe plan (runs, and rows computed forward and backward) plus
accuracy (the candidate and its FP64 reference) and latency (the warm-up and samples of docs/spec.md#6-latency). The cost of a
run and of a row is measured here, on a slice of W small enough to take well under a second, with the one
torch thread a CPU child uses, and scaled to the full output width. It is an estimate: it says hours or
seconds, not to the minute.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from adaln_bench.harness import plan as P
from adaln_bench.harness import random_rows
from adaln_bench.harness.shapes import Shape
from adaln_bench.harness.timing import SAMPLES, WARMUP

# Shapes up to this many W elements (the `small` preset has 73,728) need no estimate: they take seconds a run.
CHEAP_W_ELEMENTS = 4096 * 512
CALIBRATION_OUT_FEATURES = 2048
CALIBRATION_ROWS = 64
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


def _seconds_per_step(shape: Shape, out_features: int, tokens: int, repeats: int = 3) -> float:
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    w = (torch.randn(out_features, shape.dim, generator=g) * shape.dim ** -0.5).to(torch.bfloat16)
    b = torch.zeros(out_features, dtype=torch.bfloat16)
    temb = torch.randn(tokens, shape.dim, generator=g)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        t, wl, bl = temb.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()
        F.linear(F.silu(t).to(torch.bfloat16), wl, bl).sum().backward()
        best = min(best, time.perf_counter() - t0)
    return best


def estimate_seconds(shape: Shape, plan: P.ProbePlan) -> float:
    """Seconds the plan would take for one candidate on this CPU, with one torch thread."""
    import torch

    width = min(shape.out_features, CALIBRATION_OUT_FEATURES)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one = _seconds_per_step(shape, width, 1)
        many = _seconds_per_step(shape, width, CALIBRATION_ROWS)
    finally:
        torch.set_num_threads(threads)
    per_row = max(many - one, 0.0) / (CALIBRATION_ROWS - 1) * shape.out_features / width
    per_run = one * shape.out_features / width
    work = plan_work(plan)
    return work.runs * per_run + work.rows * per_row


def needs_estimate(shape: Shape) -> bool:
    return shape.out_features * shape.dim > CHEAP_W_ELEMENTS


def describe_seconds(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
