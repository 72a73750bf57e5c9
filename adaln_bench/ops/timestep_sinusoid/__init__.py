"""timestep_sinusoid: fp32 timesteps t (T,) → [cos e | sin e] (T, F), e = t·freq, freq_k = 10000^(−k/(F/2)).

diffusers' `get_timestep_embedding` with flip_sin_to_cos, shift 0, as MiniMax-H3 calls it (its `Timesteps`).
No parameters and no backward: only the forward rows are compared.
"""
from __future__ import annotations

import math

import torch

from adaln_bench.ops.plan import SINUSOID
from adaln_bench.ops.registry import register
from adaln_bench.ops.spec import Cost, Modes, Operator, OutputSpec, TensorSpec, Uniform
from adaln_bench.shape import Shape

MAX_PERIOD = 10000


def replay(t: torch.Tensor, frequency: int = 256) -> torch.Tensor:
    """The stock path op for op: the exponent in fp32 from a Python float, exp, times t, sin then cos, the
    halves swapped."""
    half = frequency // 2
    exponent = -math.log(MAX_PERIOD) * torch.arange(0, half, dtype=torch.float32, device=t.device)
    emb = torch.exp(exponent / half)
    emb = t[:, None].float() * emb[None, :]
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)
    return torch.cat([emb[:, half:], emb[:, :half]], dim=-1)


def reference(t: torch.Tensor, frequency: int = 256) -> torch.Tensor:
    """In float64 and in this order of operations (a last-bit difference shows in fwd_rel_err's digits)."""
    half = frequency // 2
    c = -torch.log(torch.tensor(float(MAX_PERIOD), dtype=torch.float64, device=t.device))
    freq = torch.exp(c * torch.arange(half, dtype=torch.float64, device=t.device) / half)
    e = t.double()[:, None] * freq[None]
    return torch.cat([torch.cos(e), torch.sin(e)], dim=-1)


def cost(s: Shape, n: int) -> Cost:
    return Cost(fwd_bytes=n * 4 + n * s.frequency * 4, step_bytes=n * 4 + n * s.frequency * 4)


OPERATOR = register(Operator(
    name="timestep_sinusoid",
    description="sinusoidal timestep embedding: [cos | sin] of t·10000^(−k/128), (T, 256) fp32, no backward",
    tensors=(TensorSpec("t", "row", ("n",), torch.float32, Uniform(1)),),
    outputs=(OutputSpec("emb", ("n", "F"), torch.float32),),
    grads=(),
    family=SINUSOID,
    size_names=("frequency",),
    reference=lambda s: lambda t: reference(t, s.frequency),
    stock=lambda s: lambda t: replay(t, s.frequency),
    sized_formulas=True,
    stock_what="the stock path at the same T: diffusers' get_timestep_embedding, op for op",
    cost=cost,
    modes=Modes(("plain",), "elementwise exp, sin and cos and a cat: no mode replaces any of them",
                skipped_reason="its exp, sin, cos and cat are replaced by no mode"),
    pipeline_position=10,
))
