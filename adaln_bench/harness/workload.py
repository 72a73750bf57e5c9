"""One candidate bound to the seeded inputs: makes the *runs* the probes compare.

The contract: docs/spec.md#4-batch-invariance-probes.
"""
from __future__ import annotations

from typing import Sequence

import torch

from adaln_bench.harness.inputs import Params, make_temb, make_upstream
from adaln_bench.harness.probes import RunOutput
from adaln_bench.harness.shapes import Shape
from adaln_bench.kernels.registry import Implementation


class Workload:
    """Runs `impl` on rows of the seeded batch (seed, n) with fresh leaves, forward and backward."""

    def __init__(self, impl: Implementation, params: Params, shape: Shape, device: torch.device):
        self.impl, self.params, self.shape, self.device = impl, params, shape, device
        self._temb: dict[tuple[int, int], torch.Tensor] = {}
        self._upstream: dict[tuple[int, int], torch.Tensor] = {}

    def temb(self, seed: int, n: int) -> torch.Tensor:
        key = (seed, n)
        if key not in self._temb:
            self._temb = {key: make_temb(n, self.shape, seed, self.device)}  # keep one batch: they are large
            self._upstream = {}
        return self._temb[key]

    def __call__(self, seed: int, n: int, rows: Sequence[int]) -> RunOutput:
        full = self.temb(seed, n)
        index = torch.as_tensor(list(rows), dtype=torch.long, device=self.device)
        temb = full.index_select(0, index).requires_grad_(self.impl.has_backward)
        if not self.impl.has_backward:
            with torch.no_grad():
                return RunOutput(self.impl.forward(temb, self.params.weight, self.params.bias), None, None, None)
        w = self.params.weight.detach().requires_grad_()
        b = self.params.bias.detach().requires_grad_()
        out = self.impl.forward(temb, w, b)
        key = (seed, n)
        if key not in self._upstream:
            # Drawn once for the full batch with the output's dtype; every run takes its rows.
            self._upstream[key] = make_upstream((n, *out.shape[1:]), out.dtype, seed, self.device)
        grad = self._upstream[key].index_select(0, index)
        out.backward(grad)
        return RunOutput(out.detach(), temb.grad, w.grad, b.grad)
