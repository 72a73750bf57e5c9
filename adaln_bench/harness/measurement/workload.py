"""One candidate bound to the seeded inputs: makes the *runs* the probes compare.

The contract: docs/spec.md#4-batch-invariance-probes.
"""
from __future__ import annotations

from typing import Sequence

import torch

from adaln_bench.harness.measurement.runs import RunOutput
from adaln_bench.harness.measurement.subject import Subject
from adaln_bench.ops.draws import draw_rows, draw_upstream
from adaln_bench.shape import Shape


def row_index(rows: Sequence[int], device: torch.device) -> torch.Tensor:
    """The rows as an index on the device, without waiting for it: a range is made there; a list is copied from
    pinned memory, asynchronously (a copy from pageable memory would wait for the device before every run)."""
    if isinstance(rows, range) and rows.step == 1:
        return torch.arange(rows.start, rows.stop, dtype=torch.long, device=device)
    host = torch.tensor(list(rows), dtype=torch.long)
    if device.type != "cuda":
        return host.to(device)
    return host.pin_memory().to(device, non_blocking=True)


class Workload:
    """Runs the subject on rows of the seeded batch (seed, n) with fresh leaves, forward and backward."""

    def __init__(self, subject: Subject, params: dict[str, torch.Tensor], shape: Shape, device: torch.device):
        self.subject, self.params, self.shape, self.device = subject, params, shape, device
        self._batch: dict[tuple[int, int], dict[str, torch.Tensor]] = {}
        self._upstream: dict[tuple[int, int], tuple[torch.Tensor, ...]] = {}

    def batch(self, seed: int, n: int) -> dict[str, torch.Tensor]:
        key = (seed, n)
        if key not in self._batch:
            # Keep one batch: they are large.
            self._batch = {key: draw_rows(self.subject.op, self.shape, seed, n, self.device)}
            self._upstream = {}
        return self._batch[key]

    def __call__(self, seed: int, n: int, rows: Sequence[int]) -> RunOutput:
        return self.run_indexed(seed, n, row_index(rows, self.device))

    def run_indexed(self, seed: int, n: int, index: torch.Tensor) -> RunOutput:
        """The run of the rows `index` (a long tensor on the device): what a CUDA graph of the run captures
        (graphed_runs.py), reading the rows from a buffer it refills before each replay."""
        subject = self.subject
        full = self.batch(seed, n)
        picked = {name: (self.params[name] if name in self.params else full[name].index_select(0, index))
                  for name in subject.inputs}
        if not subject.has_backward:
            with torch.no_grad():
                return RunOutput(subject.forward(picked), None, None)
        leaves = subject.leaves(picked)
        outs = subject.forward(leaves)
        key = (seed, n)
        if key not in self._upstream:
            # Drawn once for the full batch with each output's dtype; every run takes its rows.
            self._upstream[key] = draw_upstream([(n, *o.shape[1:]) for o in outs], [o.dtype for o in outs],
                                                seed, self.device)
        torch.autograd.backward(outs, [u.index_select(0, index) for u in self._upstream[key]])
        missing = [g for g in subject.grads if leaves[g].grad is None]
        if missing:  # seen under SGLang's switch: its rms_norm replacement passes no gradient back to x
            raise RuntimeError(f"no gradient reached {', '.join(missing)}: an operation on the way back from the "
                               "outputs is not differentiable here")
        row_grads = tuple(leaves[g].grad for g in subject.row_grads) or None
        param_grads = tuple(leaves[g].grad for g in subject.param_grads) or None
        return RunOutput(tuple(o.detach() for o in outs), row_grads, param_grads)
