"""A child's work as steps under the GPU lease (harness/processes/gpu_lease.py), and where its time went.

Each step names its phase; latency steps take the lease exclusive, every other step shared (in a serial run,
every step exclusive). The clock adds up, per phase, the seconds a step held the lease, the seconds spent
waiting for it, and the exclusive seconds: the child reports them (`StepTimes`) and the run index sums them
(harness/assembly/time_accounting.py). Seconds of steps that ran at once in one process (the cold-start pool) add up,
so a phase's total is process-seconds, not wall time.

Before a step lets go of the lease the clock synchronizes the device (`sync`), so that no GPU work of it is in
flight when the next holder starts. With `ADALN_BENCH_STEP_TRACE` set to a file, every step appends one JSON
line to it (process, lease, phase, exclusive, when the lease was granted and when it was about to be handed
back, in `time.monotonic()` seconds, one clock for every process of the machine): the tests and the device
evidence check from it that no latency step overlapped another step of its GPU.

A long shared step (a candidate's probes) lets a waiting writer in between its runs: `Step.breathe()` hands the
lease back and takes it again once it has been held `BREATHE_AFTER_S`, so latency waits for one probe run,
not for a whole candidate's probes.
"""
from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from typing import Callable, Dict, Iterator, Optional

from pydantic import BaseModel, ConfigDict, Field

START_UP, BUILD, PROBES, ACCURACY, LATENCY, COLD_START = (
    "start-up", "build", "probes", "accuracy", "latency", "cold start")
PHASES = (START_UP, BUILD, PROBES, ACCURACY, LATENCY, COLD_START)
BREATHE_AFTER_S = 1.0
TRACE_VARIABLE = "ADALN_BENCH_STEP_TRACE"
STEP_TRACE_FIELDS = ("pid", "thread", "lease", "phase", "exclusive", "start", "end")


class StepTimes(BaseModel):
    """Where one process's time went, in seconds."""

    model_config = ConfigDict(extra="forbid")

    phases_s: Dict[str, float] = Field(default_factory=dict)  # held per phase (process-seconds)
    waited_s: float = 0.0  # waiting for the lease, or for memory before an operator (memory_ledger.py)
    exclusive_s: float = 0.0  # held exclusive: the GPU to itself
    peak_memory_bytes: int | None = None  # the most the process's allocator reserved on its GPU
    # The most it reserved while it measured each operator: what the memory ledger's reservation estimates.
    peak_memory_by_op: Dict[str, int] = Field(default_factory=dict)
    # What it still reserved after each operator, its cache emptied: memory the ledger counts as free again.
    residual_memory_by_op: Dict[str, int] = Field(default_factory=dict)


class NoLease:
    """Where no GPU is shared (a CPU run, a measurement outside a child): every step goes ahead at once."""

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        yield

    exclusive = shared


class Step:
    """One step under the lease; enter it to wait for the lease, leave it to hand the lease back."""

    def __init__(self, clock: "StepClock", phase: str, exclusive: bool):
        self.clock, self.phase, self.exclusive = clock, phase, exclusive
        self._held = None
        self._since = 0.0

    def _take(self) -> None:
        lease = self.clock.lease
        self._held = lease.exclusive() if self.exclusive else lease.shared()
        asked = self.clock.now()
        self._held.__enter__()
        self._since = self.clock.now()
        self.clock.add(self.phase, waited=self._since - asked)

    def _give(self, exc=None) -> None:
        held, self._held = self._held, None
        if held is None:  # handed back already: a breathe whose sync failed
            return
        try:
            self.clock.sync()  # no GPU work of this step in flight once the lease is handed back
        finally:
            until = self.clock.now()
            self.clock.trace(self.phase, self.exclusive, self._since, until)
            held.__exit__(type(exc) if exc else None, exc, exc.__traceback__ if exc else None)
            self.clock.add(self.phase, held=until - self._since, exclusive=self.exclusive)

    def __enter__(self) -> "Step":
        self._take()
        return self

    def __exit__(self, kind, exc, tb) -> None:
        self._give(exc)

    def breathe(self) -> None:
        """Between two units of shared work: let a waiting writer in if the lease has been held long enough."""
        if self.exclusive or self.clock.now() - self._since < BREATHE_AFTER_S:
            return
        self._give()
        self._take()


class StepClock:
    """Steps of one process under one lease, and their accounts (thread-safe: the cold-start pool uses it too)."""

    def __init__(self, lease=None, serial: bool = False, now: Callable[[], float] = time.monotonic,
                 sync: Callable[[], None] = lambda: None, trace_path: Optional[str] = None):
        self.lease, self.serial, self.now, self.sync = lease or NoLease(), serial, now, sync
        self.trace_path = trace_path if trace_path is not None else os.environ.get(TRACE_VARIABLE)
        self._lock = threading.Lock()
        self.times = StepTimes()

    def trace(self, phase: str, exclusive: bool, since: float, until: float) -> None:
        if not self.trace_path:
            return
        values = (os.getpid(), threading.get_ident(), getattr(self.lease, "key", None), phase, exclusive, since,
                  until)
        line = json.dumps(dict(zip(STEP_TRACE_FIELDS, values))) + "\n"
        fd = os.open(self.trace_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode())  # one short append: whole lines from every process
        finally:
            os.close(fd)

    def step(self, phase: str, exclusive: bool = False) -> Step:
        return Step(self, phase, exclusive or self.serial)

    def add(self, phase: str, held: float = 0.0, waited: float = 0.0, exclusive: bool = False) -> None:
        with self._lock:
            t = self.times
            if held:
                t.phases_s = {**t.phases_s, phase: round(t.phases_s.get(phase, 0.0) + held, 3)}
                if exclusive:
                    t.exclusive_s = round(t.exclusive_s + held, 3)
            t.waited_s = round(t.waited_s + waited, 3)

    def absorb(self, phase: str, seconds: float, other: Optional[StepTimes]) -> None:
        """Another process's time as one phase of this one (a cold-start check): `seconds` of it, with the
        waits and the exclusive seconds its own clock counted."""
        with self._lock:
            t = self.times
            t.phases_s = {**t.phases_s, phase: round(t.phases_s.get(phase, 0.0) + seconds, 3)}
            if other is not None:
                t.waited_s = round(t.waited_s + other.waited_s, 3)
                t.exclusive_s = round(t.exclusive_s + other.exclusive_s, 3)

    def peak(self, op: str, nbytes: int) -> None:
        """The most the process reserved while it measured `op`."""
        self._most("peak_memory_by_op", op, nbytes)

    def residual(self, op: str, nbytes: int) -> None:
        """What the process still reserved once `op` was done and its cache emptied."""
        self._most("residual_memory_by_op", op, nbytes)

    def _most(self, field: str, op: str, nbytes: int) -> None:
        with self._lock:
            by_op = getattr(self.times, field)
            setattr(self.times, field, {**by_op, op: max(nbytes, by_op.get(op, 0))})

    def snapshot(self) -> StepTimes:
        with self._lock:
            return self.times.model_copy(deep=True)


def overlapping_exclusive(steps: list[dict]) -> list[tuple[dict, dict]]:
    """Pairs (an exclusive step, another step of the same lease) whose times overlap, from a step trace: none
    where the lease kept latency alone."""
    found = []
    for i, a in enumerate(steps):
        if not a["exclusive"]:
            continue
        for j, b in enumerate(steps):
            if i != j and a["lease"] == b["lease"] and a["start"] < b["end"] and b["start"] < a["end"]:
                found.append((a, b))
    return found
