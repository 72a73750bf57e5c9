"""How much of a GPU's memory the processes of a run hold for their steps: a ledger beside the GPU's lease.

What an operator's steps need differs a thousandfold (adaln_row_gather's probe batch is about 16 GiB of tensors,
timestep_sinusoid's a few MiB), and a mode shared by several children hands its operators out as they come, so
memory is given per operator at run time rather than per child when the run starts: before a child measures an
operator it reserves STEP_COPIES times the bytes of that operator's largest step (a cold-start check reserves
nothing: the schedule counts the same at its rows up front). A reservation waits while the GPU's reservations
would pass the budget, unless nothing else is reserved (one is always let through, however large). The budget is
what harness/assembly/schedule.py leaves of the free memory once every process's CUDA context is counted.

The ledger is a JSON file of reservations guarded by `fcntl.flock`, in the run's work directory; an entry of a
process that died is dropped when read. A reservation is never asked for while the GPU's lease is held, so a
process waiting for memory never holds up a latency step.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import uuid
from pathlib import Path
from typing import Iterator, Optional

# Tensors alive at once over one step's declared bytes (inputs, outputs, gradients, the FP64 copy): on the H200
# norm_modulate's child reserved 2.7 times its step (results/h200/evidence/scheduling/7265eca/).
STEP_COPIES = 3
LEDGER_SUFFIX = ".memory.json"
LOCK_SUFFIX = ".memory.lock"


def largest_step_tokens(op, quick: bool) -> int:
    """The most rows any part of the operator's plan runs at once."""
    p = op.family.plan(quick)
    return max(p.full_batch, p.sweep_n, *p.accuracy_sizes, *p.all_rows_sizes)


def operator_reservation(op, shape, quick: bool) -> int:
    """What a child reserves while it measures `op`."""
    return rows_reservation(op, shape, largest_step_tokens(op, quick))


def rows_reservation(op, shape, rows: int) -> int:
    """What a process reserves for `op`'s steps at `rows` rows (a cold-start check)."""
    return STEP_COPIES * int(op.cost(shape, rows).step_bytes)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class MemoryLedger:
    """The reservations of one GPU (`key`, e.g. "gpu0") in `folder`, against `budget_bytes`."""

    def __init__(self, folder: Path, key: str, budget_bytes: int, poll_s: float = 0.05):
        self.path = Path(folder) / f"{key}{LEDGER_SUFFIX}"
        self.lock_path = Path(folder) / f"{key}{LOCK_SUFFIX}"
        self.budget_bytes, self.poll_s = int(budget_bytes), poll_s

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict]:
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                entries = json.loads(self.path.read_text("utf-8"))
            except (OSError, ValueError):
                entries = {}
            live = {token: e for token, e in entries.items() if _alive(int(e[0]))}
            before = dict(live)
            yield live
            if live != entries or live != before:  # a poll that changes nothing writes nothing
                self.path.write_text(json.dumps(live), "utf-8")
        finally:
            os.close(fd)

    def held(self) -> dict[str, int]:
        """Bytes reserved now, by token (pid:random)."""
        with self._locked() as entries:
            return {token: int(e[1]) for token, e in entries.items()}

    def _try(self, token: str, nbytes: int) -> bool:
        with self._locked() as entries:
            used = sum(int(e[1]) for e in entries.values())
            if entries and used + nbytes > self.budget_bytes:
                return False
            entries[token] = [os.getpid(), nbytes]
            return True

    @contextlib.contextmanager
    def reserve(self, nbytes: int) -> Iterator[float]:
        """Hold `nbytes` of the budget; yields the seconds waited for it."""
        token = f"{os.getpid()}:{uuid.uuid4().hex[:8]}"
        started = time.monotonic()
        while not self._try(token, int(nbytes)):
            time.sleep(self.poll_s)
        try:
            yield time.monotonic() - started
        finally:
            with self._locked() as entries:
                entries.pop(token, None)


class NoLedger:
    """A run without one (a CPU run, --serial, or a free memory that could not be read)."""

    @contextlib.contextmanager
    def reserve(self, nbytes: int) -> Iterator[float]:
        yield 0.0


def ledger_for(folder: Optional[str], key: Optional[str], budget_bytes: Optional[int]):
    if folder is None or key is None or budget_bytes is None:
        return NoLedger()
    return MemoryLedger(Path(folder), key, budget_bytes)
