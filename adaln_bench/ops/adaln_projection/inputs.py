"""The projection's seeded inputs by their old names (temb, W, b), for the kernel tools and scripts that work
on this one operator: drawn by the operator's declarations (adaln_bench/ops/draws.py), so there is one home
for how they are made (docs/spec.md#3-inputs)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from adaln_bench.ops.adaln_projection import OPERATOR
from adaln_bench.ops.draws import draw_params, draw_rows, draw_upstream
from adaln_bench.shape import Shape


@dataclass(frozen=True)
class Params:
    weight: torch.Tensor  # (N, D) bfloat16
    bias: torch.Tensor  # (N,) bfloat16

    def as_inputs(self) -> dict[str, torch.Tensor]:
        return {"w": self.weight, "b": self.bias}


def make_params(shape: Shape, device: torch.device) -> Params:
    """W and b are the same for every probe seed."""
    p = draw_params(OPERATOR, shape, device)
    return Params(p["w"], p["b"])


def make_temb(n: int, shape: Shape, seed: int, device: torch.device) -> torch.Tensor:
    return draw_rows(OPERATOR, shape, seed, n, device)["temb"]


def make_upstream(out_shape: tuple[int, ...], dtype: torch.dtype, seed: int, device: torch.device) -> torch.Tensor:
    """The upstream gradient, drawn once for the full batch; sub-batches take its matching rows."""
    return draw_upstream([out_shape], [dtype], seed, device)[0]
