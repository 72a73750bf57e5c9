"""How much of a CUDA run goes side by side on one GPU: children at once, each child's cold-start pool, and the
memory their steps may hold at once.

Only the bits/errors work overlaps (harness/processes/gpu_lease.py keeps latency alone), so the limits are host
cores and memory. Cores: each process keeps one host thread busy launching small kernels; at most `cores_per_gpu`
processes per GPU. Memory, of a share of what the GPU has free when the run starts: every process's CUDA context
(CONTEXT_BYTES) and every cold-start check's steps (a few rows: small) are counted up front, and what is left is
the budget that the children's steps reserve from, per operator, as they run (harness/processes/memory_ledger.py):
a child measuring adaln_row_gather holds about 72 GiB of it, one measuring timestep_sinusoid next to nothing. The
plan keeps room for the largest operator's reservation alone. A check does not reserve: its memory and its
process are counted up front, so a child goes on to its next candidates while its checks run (`checks_beside`),
also with a pool of one. Only where the plan found no room (an unknown free memory, nothing fits, too few cores,
--serial) does a child wait for each check. Each child records what it reserved (`peak_memory_bytes` in the run
index), to check the estimate against.

`plan` is pure; `schedule_for_run` reads the GPU's free memory (harness/processes/gpu_memory.py) and the
operators' costs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from adaln_bench.harness.processes.memory_ledger import operator_reservation, rows_reservation

GIB = 1 << 30
CONTEXT_BYTES = 1 * GIB  # allowed for a CUDA context, torch's allocator and the cuBLAS workspace
MEMORY_SHARE = 0.8  # of the free memory: fragmentation and the estimate's error
MAX_CHILDREN_PER_GPU = 6  # 6 x (1 + 1) processes within a 16-core host, with room for the parent and the compilers
MAX_COLD_START_POOL = 3
# CPU children at once: each uses one torch thread, so two share a 2-core machine's work.
CPU_CHILDREN = 2


@dataclass(frozen=True)
class Schedule:
    """Per GPU: children at once, cold-start checks at once per child, and the bytes their steps may reserve at
    once (None: no ledger); `why` says how it was worked out."""

    children_per_gpu: int
    cold_start_pool: int
    serial: bool
    why: str
    largest_step_bytes: Optional[int] = None
    free_bytes: Optional[int] = None
    memory_budget_bytes: Optional[int] = None
    # The checks run beside the child's next candidates (their processes and memory planned); False: the child
    # waits for each.
    checks_beside: bool = False
    # The largest operator's reservation passes the budget: it runs with no other reservation or check beside it.
    largest_alone: bool = False

    def as_record(self) -> dict:
        return {"serial": self.serial, "children_per_gpu": self.children_per_gpu,
                "cold_start_pool": self.cold_start_pool, "cold_start_beside": self.checks_beside, "why": self.why,
                "largest_step_bytes": self.largest_step_bytes, "free_bytes_at_start": self.free_bytes,
                "memory_budget_bytes": self.memory_budget_bytes, "largest_alone": self.largest_alone}


SERIAL = Schedule(1, 1, True, "--serial: one step at a time")


def plan(free_bytes: Optional[int], cores_per_gpu: int, largest_step_bytes: int, check_bytes: int = 0,
         serial: bool = False, next_step_bytes: int = 0) -> Schedule:
    """The most side-by-side work that fits: the largest pool (up to MAX_COLD_START_POOL), then the most children
    (up to MAX_CHILDREN_PER_GPU), with `children * (1 + pool)` processes within the cores; within MEMORY_SHARE of
    the free memory, every process's context, every cold-start check's steps (`check_bytes` each: small, so
    counted up front) and the largest operator's reservation; the rest of that share is the steps' budget. Where
    the largest runs alone, the budget still holds the next largest (`next_step_bytes`): only one operator runs
    alone."""
    if serial:
        return SERIAL
    if free_bytes is None:
        return Schedule(1, 1, False, "free GPU memory unknown: one child per GPU, one cold-start check at a time",
                        largest_step_bytes=largest_step_bytes)
    share = free_bytes * MEMORY_SHARE

    def fixed(children: int, pool: int) -> int:  # what the processes hold whatever they measure
        return children * ((1 + pool) * CONTEXT_BYTES + pool * check_bytes)

    def best(processes_room: float, fixed_of, leaves_budget: bool = False) -> Optional[tuple[int, int]]:
        """The most processes (among equals, more children) with `children * fixed_of(pool)` within the room;
        `leaves_budget`: also leaving the steps a budget that holds the next largest reservation."""
        fits = []
        for pool in range(1, MAX_COLD_START_POOL + 1):
            by_memory = int(processes_room // fixed_of(pool))
            by_cores = cores_per_gpu // (1 + pool)
            if pool == 1:
                by_cores = max(1, by_cores)  # one child and its one check, whatever the cores: what a serial run does
            children = min(MAX_CHILDREN_PER_GPU, by_memory, by_cores)
            while leaves_budget and children >= 1 and share - fixed(children, pool) < max(1, next_step_bytes):
                children -= 1
            if children >= 1:
                fits.append((children, pool))
        return max(fits, key=lambda f: (f[0] * (1 + f[1]), f[0])) if fits else None

    sizes_text = (f"{free_bytes / GIB:.1f} GiB free x {MEMORY_SHARE:g}; the largest operator's steps reserve "
                  f"{largest_step_bytes / GIB:.1f} GiB, a cold-start check's {check_bytes / GIB:.1f} GiB; "
                  f"{cores_per_gpu} host core(s) per GPU")
    alone = False
    chosen = best(share - largest_step_bytes, lambda pool: fixed(1, pool))
    if chosen is None:
        # The largest reservation does not fit beside the others (adaln_row_gather on an 80 GB GPU): it runs alone
        # (memory_ledger.py: no other reservation, no cold-start check), so only the processes' contexts are beside
        # it, within the whole free memory (the reservation is a measured peak with a margin); the others share
        # what the share leaves once every process and check is counted.
        chosen = best(free_bytes - largest_step_bytes, lambda pool: (1 + pool) * CONTEXT_BYTES, leaves_budget=True)
        alone = chosen is not None
    if chosen is None:
        return Schedule(1, 1, False, f"one child per GPU, one cold-start check at a time: {sizes_text}",
                        largest_step_bytes=largest_step_bytes, free_bytes=free_bytes)
    children, pool = chosen
    budget = int(share - fixed(children, pool))
    beside = children * (1 + pool) <= cores_per_gpu  # not where a pool of one was kept for want of cores
    checks = "beside its next candidates" if beside else "one at a time, the child waiting for each"
    why = (f"{children} child(ren) x (1 + {pool} cold-start check(s) {checks}) per GPU, their steps reserving "
           f"memory per operator from {budget / GIB:.1f} GiB")
    if alone:
        why += ("; the largest operator's reservation passes that, so it runs alone (no other reservation or "
                "cold-start check beside it)")
    return Schedule(children, pool, False, f"{why}: {sizes_text}", largest_step_bytes=largest_step_bytes,
                    free_bytes=free_bytes, memory_budget_bytes=budget, checks_beside=beside, largest_alone=alone)


def largest_step_bytes(ops: Sequence, shape, quick: bool) -> int:
    """The largest reservation a child makes for one operator of the run."""
    return max([0, *(operator_reservation(op, shape, quick) for op in ops)])


def second_step_bytes(ops: Sequence, shape, quick: bool) -> int:
    """The second largest reservation of one operator of the run (0 with a single operator)."""
    return ([0, 0, *sorted(operator_reservation(op, shape, quick) for op in ops)])[-2]


def check_bytes(ops: Sequence, shape) -> int:
    """The most a cold-start check's steps hold (any operator of the run, at the check's rows)."""
    from adaln_bench.harness.processes.cold_start import TOKENS

    return max([0, *(rows_reservation(op, shape, TOKENS) for op in ops)])


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
    return plan(free, per_gpu, largest_step_bytes(ops, shape, quick), check_bytes(ops, shape),
                next_step_bytes=second_step_bytes(ops, shape, quick))


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
