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
