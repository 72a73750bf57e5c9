"""A *run*, the unit every probe compares: the rows of one seeded batch, forward and backward, and how two
runs' rows are compared bitwise. The probes (`probes.py`, `random_rows.py`) are functions of a `Runner`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Protocol, Sequence

import torch


@dataclass
class RunOutput:
    outs: tuple[torch.Tensor, ...]  # each (rows, …): a row differs if any output's row differs
    row_grads: Optional[tuple[torch.Tensor, ...]]  # of the row inputs differentiated; None: none or no backward
    param_grads: Optional[tuple[Optional[torch.Tensor], ...]]  # of the parameters differentiated; None: none

    def rows_only(self) -> "RunOutput":
        """What a row comparison reads: a run kept for later comparisons holds no parameter gradients (one of
        adaln_projection's is its 520 MB weight gradient, and the random-rows probe keeps dozens of runs)."""
        return RunOutput(self.outs, self.row_grads, None)


class Runner(Protocol):
    def __call__(self, seed: int, n: int, rows: Sequence[int]) -> RunOutput: ...


Tick = Callable[[int], None]  # progress: called with the number of runs just made


def no_progress(_: int) -> None:
    pass


def same_rows(a: Optional[Sequence[torch.Tensor]], ia, b: Optional[Sequence[torch.Tensor]], ib) -> bool:
    """Rows `ia` of every tensor of `a` bitwise equal to rows `ib` of `b` (an int or a slice each)."""
    if a is None or b is None:
        return a is None and b is None
    return all(torch.equal(x[ia], y[ib]) for x, y in zip(a, b))


class Differences:
    """Row comparisons answered later, all at once: `add` queues same_rows's question on the device (a bool tensor
    the GPU computes as it goes) and `read` waits for the device once for all of them. The probes make thousands of
    runs; a wait per comparison would stall each run until the GPU caught up, and, with several processes on one
    GPU, until the GPU came round to this process again."""

    def __init__(self) -> None:
        self._answers: list = []  # a bool, or a 0-dim bool tensor still to be read

    def add(self, a: Optional[Sequence[torch.Tensor]], ia, b: Optional[Sequence[torch.Tensor]], ib) -> None:
        """Whether rows `ia` of any tensor of `a` differ from rows `ib` of `b` (not same_rows)."""
        if a is None or b is None or len(a) != len(b):
            self._answers.append(not (a is None and b is None))
            return
        answer = False
        for x, y in zip(a, b):
            xs, ys = x[ia], y[ib]
            if xs.shape != ys.shape or xs.dtype != ys.dtype:
                self._answers.append(True)
                return
            differ = (xs != ys).any()  # NaN differs from NaN, 0.0 equals -0.0: torch.equal's answer
            answer = differ if answer is False else answer | differ  # one output (most runs): no extra kernel
        self._answers.append(answer)

    def constant(self, differ: bool) -> None:
        """An answer known without the device, kept in its place."""
        self._answers.append(differ)

    def read(self) -> list[bool]:
        """Every answer, in the order added."""
        pending = [t for t in self._answers if isinstance(t, torch.Tensor)]
        values = iter(torch.stack(pending).tolist() if pending else ())  # one wait: the runs share one device
        return [bool(next(values)) if isinstance(t, torch.Tensor) else bool(t) for t in self._answers]
