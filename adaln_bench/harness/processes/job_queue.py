"""Which mode job a free slot runs next.

On a CPU a mode's operators are dealt over several children (`plain.0`, `plain.1`). Whether the mode switches on
is the same for all of them (one environment, one interpreter), so the first part finds out for the others: a
later part starts only once the first has switched the mode on, and is never started when the first reported
the mode unavailable (each unavailable mode costs one torch import instead of one per part). While a later part
waits, its slot takes the next job that can start, so no slot idles.

A job that ends may add follow-up jobs (`add`: a mode's next latency repetition, harness/assembly/repeat.py),
queued behind every job not yet started; so a free slot waits, rather than ends, while a job still runs.
"""
from __future__ import annotations

import threading
from typing import Generic, Optional, Protocol, TypeVar


class _Job(Protocol):
    @property
    def part(self) -> Optional[int]: ...

    @property
    def mode(self): ...


J = TypeVar("J", bound=_Job)
V = TypeVar("V")

POLL_S = 0.2  # how often a waiting slot looks at the stop flag


class JobQueue(Generic[J, V]):
    """Jobs in order; `take` gives the first that may start. `verdict(V)` is what a first part found when it
    ended with the mode unavailable: the later parts then take it as their own."""

    def __init__(self, jobs: list[J], stopping: threading.Event):
        self._pending = list(jobs)
        self._stopping = stopping
        self._cv = threading.Condition()
        self._decided: dict[str, Optional[V]] = {}  # mode -> None (switched on, or unknown) or the verdict
        self._running = 0  # jobs taken and not yet `finished`: each may still `add` follow-ups

    @staticmethod
    def _is_later_part(job: J) -> bool:
        return job.part is not None and job.part > 0

    def _may_start(self, job: J) -> bool:
        return not self._is_later_part(job) or job.mode.name in self._decided

    def take(self) -> Optional[J]:
        """The next job that may start; None when none is left and no running job can add one, or the run is
        stopping. Each job taken is `finished` once its outcome is given."""
        with self._cv:
            while (self._pending or self._running) and not self._stopping.is_set():
                for job in self._pending:
                    if self._may_start(job):
                        self._pending.remove(job)
                        self._running += 1
                        return job
                self._cv.wait(POLL_S)
            return None

    def finished(self, job: J) -> None:
        """A job taken has its outcome (and has added its follow-ups)."""
        with self._cv:
            self._running -= 1
            self._cv.notify_all()

    def add(self, jobs: list[J]) -> None:
        """Follow-up jobs, behind every job not yet started; none once the run is stopping."""
        with self._cv:
            if not self._stopping.is_set():
                self._pending.extend(jobs)
                self._cv.notify_all()

    def switched_on(self, mode: str) -> None:
        """The first part switched the mode on: the later parts may start."""
        self.decide(mode, None)

    def decide(self, mode: str, verdict: Optional[V]) -> None:
        """The first part ended (or switched on): `verdict` when it found the mode unavailable, else None.
        The first decision stands: a part that switched on and crashed later does not make the mode
        unavailable."""
        with self._cv:
            self._decided.setdefault(mode, verdict)
            self._cv.notify_all()

    def verdict(self, job: J) -> Optional[V]:
        """For a later part: the first part's finding that the mode is unavailable, else None."""
        if not self._is_later_part(job):
            return None
        with self._cv:
            return self._decided.get(job.mode.name)

    def drain(self) -> list[J]:
        """The jobs never taken (the run stopped first)."""
        with self._cv:
            left, self._pending = self._pending, []
            return left
