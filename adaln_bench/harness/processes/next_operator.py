"""Which operator a child measures next: the first of its list that no part has claimed and whose memory
reservation fits the GPU's budget now (harness/processes/memory_ledger.py).

The list is heaviest first, so the longest operators start early. A child whose next operator does not fit
beside what the other children hold takes a lighter one that does, instead of waiting with its slot idle: a
child measuring adaln_row_gather holds 72 of the H200's 76 GiB, and the other children's next heavy operators
do not fit beside it, but their light ones do. Only where nothing left fits does the child wait, and it takes
the first that fits once memory is released; a child that has waited a while keeps the memory it waits for from
lighter operators (memory_ledger.py's wants), so a heavy one is not starved. The reservation is taken before the
claim, so a claimed operator always has its memory; a claim lost to another part gives the reservation back.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from adaln_bench.harness.processes.claims import claim, is_claimed


@dataclass(frozen=True)
class Taken:
    """An operator this child now measures: its work, the ledger's token for its reservation, the seconds waited."""

    work: object
    token: str
    waited_s: float


class OperatorQueue:
    """The operators of one child's list, given out one at a time by `take`; `done` returns the memory."""

    def __init__(self, work: Sequence, reservation_of: Callable[[str], int], ledger,
                 claims_dir: Optional[str] = None, claimant: str = "",
                 now: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self._pending = list(work)
        self.reservation_of, self.ledger = reservation_of, ledger
        self.claims_dir, self.claimant = claims_dir, claimant
        self.now, self.sleep = now, sleep

    def _claimed_elsewhere(self, op: str) -> bool:
        return self.claims_dir is not None and is_claimed(self.claims_dir, op)

    def _try_one(self, want: Optional[str]) -> Optional[tuple[object, str]]:
        """The first pending operator that fits now, claimed, with its hold's token; None where none fits. Drops
        what others claimed."""
        for work in list(self._pending):
            if self._claimed_elsewhere(work.op):
                self._pending.remove(work)
                continue
            token = self.ledger.try_hold(self.reservation_of(work.op), want)
            if token is None:
                continue
            self._pending.remove(work)
            if self.claims_dir is None or claim(self.claims_dir, work.op, self.claimant):
                return work, token
            self.ledger.release(token)  # another part claimed it between the check and the claim
        return None

    def take(self) -> Optional[Taken]:
        """The next operator to measure; where none that is left fits, a want for the first (memory_ledger.py)
        while it waits. None when none is left."""
        started = self.now()
        want, wanted = None, None  # the want's token, and the operator it is for
        try:
            while self._pending:
                taken = self._try_one(want)
                if taken is not None:
                    return Taken(*taken, self.now() - started)
                if not self._pending:
                    break
                first = self._pending[0].op
                if wanted != first:  # the first pending changed (claimed elsewhere): want its bytes, same age
                    if want is not None:
                        self.ledger.release(want)
                    want, wanted = self.ledger.want(self.reservation_of(first), since=started), first
                self.sleep(self.ledger.poll_s)
            return None
        finally:
            if want is not None:
                self.ledger.release(want)

    def done(self, taken: Taken) -> None:
        self.ledger.release(taken.token)
