"""The seeded inputs, so that every run and the reference report compare number for number.

The contract: docs/spec.md#3-inputs.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from adaln_bench.harness.shapes import Shape

TEMB_SALT, WEIGHT_SALT, BIAS_SALT = 7, 8, 9
PARAM_SEED = 1


def generator(device: torch.device, seed: int, salt: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed * 1000 + salt)


def make_temb(n: int, shape: Shape, seed: int, device: torch.device) -> torch.Tensor:
    return torch.randn(n, shape.dim, generator=generator(device, seed, TEMB_SALT), device=device)


@dataclass(frozen=True)
class Params:
    weight: torch.Tensor  # (N, D) bfloat16
    bias: torch.Tensor  # (N,) bfloat16


def make_params(shape: Shape, device: torch.device) -> Params:
    """W and b are the same for every probe seed."""
    n, d = shape.out_features, shape.dim
    w = (torch.randn(n, d, generator=generator(device, PARAM_SEED, WEIGHT_SALT), device=device) * d**-0.5)
    b = torch.randn(n, generator=generator(device, PARAM_SEED, BIAS_SALT), device=device) * 0.02
    return Params(w.to(torch.bfloat16), b.to(torch.bfloat16))


def make_upstream(out_shape: tuple[int, ...], dtype: torch.dtype, seed: int, device: torch.device) -> torch.Tensor:
    """The upstream gradient, drawn once for the full batch; sub-batches take its matching rows."""
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(out_shape, generator=g, device=device).to(dtype)
