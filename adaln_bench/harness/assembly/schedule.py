"""How much of a CUDA run goes side by side on one GPU: children at once, and each child's cold-start pool.

Only the bits/errors work overlaps (harness/processes/gpu_lease.py keeps latency alone), so the limits are memory
and host cores. Memory: each process gets an estimate, and the processes of one GPU must fit in a share of the
memory that GPU has free when the run starts. A child's estimate is a CUDA context plus STEP_COPIES times the
declared bytes of its largest operator's largest step (the probes' full batch, with inputs, outputs and gradients
alive at once; the FP64 accuracy copy of the largest accuracy size is about as large), over every operator of the
run since a part of a mode may claim any of them. A cold-start process runs at `cold_start.TOKENS` rows: a context
and that step as many times. Cores: each process keeps one host thread busy launching small kernels; at most
`cores_per_gpu` processes per GPU. Each child records what it reserved (`peak_memory_bytes` in the run index), to
check the estimate against.

`plan` is pure; `schedule_for_run` reads the GPU's free memory (harness/processes/gpu_memory.py) and the
operators' costs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

GIB = 1 << 30
CONTEXT_BYTES = 1 * GIB  # allowed for a CUDA context, torch's allocator and the cuBLAS workspace
# See the module docstring. Twice was too few: on the H200 norm_modulate's child reserved 17.6 GiB against 14.1
# estimated (results/h200/evidence/scheduling/7265eca/); three times gives 20.7.
STEP_COPIES = 3
MEMORY_SHARE = 0.8  # of the free memory: fragmentation and the estimate's error
MAX_CHILDREN_PER_GPU = 4
MAX_COLD_START_POOL = 3
# CPU children at once: each uses one torch thread, so two share a 2-core machine's work.
CPU_CHILDREN = 2


@dataclass(frozen=True)
class Schedule:
    """Per GPU: children at once and cold-start checks at once per child; `why` says how it was worked out."""

    children_per_gpu: int
    cold_start_pool: int
    serial: bool
    why: str
    child_bytes: Optional[int] = None
    cold_start_bytes: Optional[int] = None
    free_bytes: Optional[int] = None

    def as_record(self) -> dict:
        return {"serial": self.serial, "children_per_gpu": self.children_per_gpu,
                "cold_start_pool": self.cold_start_pool, "why": self.why,
                "estimate_child_bytes": self.child_bytes, "estimate_cold_start_bytes": self.cold_start_bytes,
                "free_bytes_at_start": self.free_bytes}


SERIAL = Schedule(1, 1, True, "--serial: one step at a time")


def plan(free_bytes: Optional[int], cores_per_gpu: int, child_bytes: int, cold_start_bytes: int,
         serial: bool = False) -> Schedule:
    """The most side-by-side work that fits: the largest pool (up to MAX_COLD_START_POOL), then the most children
    (up to MAX_CHILDREN_PER_GPU) with `children * (1 + pool)` processes within the cores and
    `children * (child_bytes + pool * cold_start_bytes)` within MEMORY_SHARE of the free memory."""
    if serial:
        return SERIAL
    sizes = dict(child_bytes=child_bytes, cold_start_bytes=cold_start_bytes, free_bytes=free_bytes)
    if free_bytes is None:
        return Schedule(1, 1, False, "free GPU memory unknown: one child per GPU, one cold-start check at a time",
                        **sizes)
    budget = free_bytes * MEMORY_SHARE
    fits = []
    for pool in range(1, MAX_COLD_START_POOL + 1):
        by_memory = int(budget // (child_bytes + pool * cold_start_bytes))
        by_cores = cores_per_gpu // (1 + pool)
        if pool == 1:
            by_cores = max(1, by_cores)  # one child and its one check, whatever the cores: what a serial run does
        children = min(MAX_CHILDREN_PER_GPU, by_memory, by_cores)
        if children >= 1:
            fits.append((children, pool))
    sizes_text = (f"{free_bytes / GIB:.1f} GiB free x {MEMORY_SHARE:g} against {child_bytes / GIB:.1f} GiB a child "
                  f"and {cold_start_bytes / GIB:.1f} GiB a cold-start check; {cores_per_gpu} host core(s) per GPU")
    if not fits:
        return Schedule(1, 1, False, f"one child per GPU, one cold-start check at a time: {sizes_text}", **sizes)
    # The most processes at once; among equals, more children (a child's steps are longer than a check).
    children, pool = max(fits, key=lambda f: (f[0] * (1 + f[1]), f[0]))
    why = f"{children} child(ren) x (1 + {pool} cold-start check(s)) per GPU: {sizes_text}"
    return Schedule(children, pool, False, why, **sizes)


def largest_step_tokens(op, quick: bool) -> int:
    """The most rows any part of the operator's plan runs at once."""
    p = op.family.plan(quick)
    return max(p.full_batch, p.sweep_n, *p.accuracy_sizes, *p.all_rows_sizes)


def child_bytes(ops: Sequence, shape, quick: bool) -> int:
    return CONTEXT_BYTES + STEP_COPIES * int(max(op.cost(shape, largest_step_tokens(op, quick)).step_bytes
                                                 for op in ops))


def cold_start_bytes(ops: Sequence, shape) -> int:
    from adaln_bench.harness.processes.cold_start import TOKENS

    return CONTEXT_BYTES + STEP_COPIES * int(max(op.cost(shape, TOKENS).step_bytes for op in ops))


def schedule_for_run(ops: Sequence, shape, quick: bool, gpus: Sequence[Optional[int]], serial: bool,
                     cores: Optional[int] = None) -> Schedule:
    """The schedule of a CUDA run on `gpus` (None: the visible GPU 0): the tightest GPU's free memory decides."""
    import os

    from adaln_bench.harness.processes.gpu_memory import free_bytes_of

    if serial:
        return SERIAL
    frees = free_bytes_of(gpus)
    free = None if any(f is None for f in frees) else min(frees)
    per_gpu = max(1, (cores or os.cpu_count() or 1) // max(1, len(gpus)))
    return plan(free, per_gpu, child_bytes(ops, shape, quick), cold_start_bytes(ops, shape))


def slots_of(gpus: Sequence[Optional[int]], schedule: Schedule) -> list[Optional[int]]:
    """One worker slot per child that may run at once: each GPU repeated `children_per_gpu` times, interleaved
    so that the first jobs spread over the GPUs."""
    return [g for _ in range(schedule.children_per_gpu) for g in gpus]


def worker_slots(device: str, gpus: Sequence[Optional[int]], op_count: int, schedule: Optional[Schedule],
                 serial: bool, cpus: Optional[int] = None) -> list[Optional[int]]:
    """The run's slots, one per child at once. CUDA: the schedule's children on every GPU. CPU: each child uses one
    torch thread, so the operators of a mode are dealt over the cores (up to CPU_CHILDREN); one operator's modes,
    or a serial run, one child after another."""
    import os

    if device == "cuda" and schedule is not None:
        return slots_of(gpus, schedule)
    if device == "cpu" and list(gpus) == [None] and op_count > 1 and not serial:
        return [None] * max(1, min(CPU_CHILDREN, cpus or os.cpu_count() or 1))
    return list(gpus)
