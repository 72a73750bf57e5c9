"""How much of a GPU's memory the processes of a run hold for their steps: a ledger beside the GPU's lease.

What an operator's steps need differs a thousandfold (adaln_row_gather's probe batch is about 16 GiB of tensors,
timestep_sinusoid's a few MiB), and a mode shared by several children hands its operators out as they come, so
memory is given per operator at run time rather than per child when the run starts: before a child measures an
operator it reserves STEP_COPIES times the bytes of that operator's largest step, or the operator's own
`step_copies` times where measured higher. A reservation does not fit while the GPU's reservations would pass
the budget; a child then takes a lighter operator that fits, or waits (harness/processes/next_operator.py). The
budget is what harness/assembly/schedule.py leaves of the free memory once every process's CUDA context and
cold-start check is counted.

A reservation past the budget (adaln_row_gather's on an 80 GB GPU) runs alone: it is let through only when
nothing else is reserved and no cold-start check runs, and while it is held no other child's check starts. A
check's memory is counted up front by the schedule, so a check never waits for the budget, only for such a
reservation (`try_check`).

The ledger is a JSON file of entries guarded by `fcntl.flock`, in the run's work directory; an entry of a
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
# How long a child waits for memory before lighter operators may no longer be taken in its way.
WANT_AGING_S = 15.0
LEDGER_SUFFIX = ".memory.json"
LOCK_SUFFIX = ".memory.lock"


def largest_step_tokens(op, quick: bool, latency_only: bool = False) -> int:
    """The most rows any part of the operator's plan runs at once; a latency-only child (a `--repeat` process)
    runs the timed sizes alone."""
    p = op.family.plan(quick)
    if latency_only:
        return max(p.accuracy_sizes)
    return max(p.full_batch, p.sweep_n, *p.accuracy_sizes, *p.all_rows_sizes)


def operator_reservation(op, shape, quick: bool, latency_only: bool = False) -> int:
    """What a child reserves while it measures `op`."""
    return rows_reservation(op, shape, largest_step_tokens(op, quick, latency_only))


def rows_reservation(op, shape, rows: int) -> int:
    """What a process reserves for `op`'s steps at `rows` rows (a cold-start check)."""
    copies = STEP_COPIES if op.step_copies is None else op.step_copies
    return int(copies * op.cost(shape, rows).step_bytes)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


CHECK = "check"  # the third field of a cold-start check's entry


class MemoryLedger:
    """The reservations of one GPU (`key`, e.g. "gpu0") in `folder`, against `budget_bytes`.

    An entry is a hold, `[pid, bytes]`; a want, `[pid, bytes, since]`: a child that found nothing of its list
    fitting and waits; or a running cold-start check, `[pid, bytes, "check"]`. A want that has waited
    WANT_AGING_S keeps its bytes free: no other child may then take a hold that would leave it too little once
    the current holds end, so lighter operators taken beside it cannot starve a heavy one for long. Only the
    oldest such want counts, and never against its own child.
    """

    def __init__(self, folder: Path, key: str, budget_bytes: int, poll_s: float = 0.05,
                 now=time.monotonic):
        self.path = Path(folder) / f"{key}{LEDGER_SUFFIX}"
        self.lock_path = Path(folder) / f"{key}{LOCK_SUFFIX}"
        self.budget_bytes, self.poll_s, self.now = int(budget_bytes), poll_s, now

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

    @staticmethod
    def _token() -> str:
        return f"{os.getpid()}:{uuid.uuid4().hex[:8]}"

    @staticmethod
    def _is_hold(entry) -> bool:
        return len(entry) == 2

    @staticmethod
    def _is_check(entry) -> bool:
        return len(entry) == 3 and entry[2] == CHECK

    @staticmethod
    def _is_want(entry) -> bool:
        return len(entry) == 3 and entry[2] != CHECK

    def held(self) -> dict[str, int]:
        """Bytes reserved now, by token (pid:random); wants and checks are not held."""
        with self._locked() as entries:
            return {token: int(e[1]) for token, e in entries.items() if self._is_hold(e)}

    def _kept_free(self, entries: dict, want: Optional[str]) -> int:
        """Bytes kept for the oldest aged want, unless it is `want` or `want` is older."""
        now = self.now()
        aged = sorted((e[2], int(e[1])) for token, e in entries.items()
                      if self._is_want(e) and token != want and now - e[2] >= WANT_AGING_S)
        if not aged:
            return 0
        mine = entries.get(want) if want is not None else None
        since, nbytes = aged[0]
        return 0 if mine is not None and mine[2] <= since else nbytes

    def try_hold(self, nbytes: int, want: Optional[str] = None) -> Optional[str]:
        """Hold `nbytes` of the budget if it fits now: the token to `release`; None where it does not fit. `want`:
        the caller's own want, which does not count against it. A hold past the budget fits only alone."""
        with self._locked() as entries:
            holds = [int(e[1]) for e in entries.values() if self._is_hold(e)]
            kept = self._kept_free(entries, want)
            if (holds or kept) and sum(holds) + int(nbytes) + kept > self.budget_bytes:
                return None
            if int(nbytes) > self.budget_bytes and any(self._is_check(e) for e in entries.values()):
                return None  # alone: also without a cold-start check beside it
            token = self._token()
            entries[token] = [os.getpid(), int(nbytes)]
            return token

    def try_check(self, nbytes: int) -> Optional[str]:
        """Register a cold-start check of `nbytes` (counted up front, so never against the budget): the token to
        `release`; None while another process holds, or has long waited for, a reservation past the budget."""
        with self._locked() as entries:
            me, now = os.getpid(), self.now()
            for e in entries.values():  # another child's reservation past the budget, held or long waited for
                past = int(e[1]) > self.budget_bytes and int(e[0]) != me
                if past and (self._is_hold(e) or (self._is_want(e) and now - e[2] >= WANT_AGING_S)):
                    return None
            token = self._token()
            entries[token] = [me, int(nbytes), CHECK]
            return token

    def want(self, nbytes: int, since: Optional[float] = None) -> str:
        """Say this child waits for `nbytes` (since `since`, default now); the token to `release`."""
        with self._locked() as entries:
            token = self._token()
            entries[token] = [os.getpid(), int(nbytes), self.now() if since is None else since]
            return token

    def release(self, token: str) -> None:
        """End a hold, a want or a check."""
        with self._locked() as entries:
            entries.pop(token, None)


class NoLedger:
    """A run without one (a CPU run, --serial, or a free memory that could not be read): everything fits."""

    poll_s = 0.05

    def try_hold(self, nbytes: int, want: Optional[str] = None) -> Optional[str]:
        return "none"

    def try_check(self, nbytes: int) -> Optional[str]:
        return "none"

    def want(self, nbytes: int, since: Optional[float] = None) -> str:
        return "none"

    def release(self, token: str) -> None:
        pass


def ledger_for(folder: Optional[str], key: Optional[str], budget_bytes: Optional[int]):
    if folder is None or key is None or budget_bytes is None:
        return NoLedger()
    return MemoryLedger(Path(folder), key, budget_bytes)
