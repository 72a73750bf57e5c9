"""timestep_mlp: fp32 x (T, F) → linear(F→H) → SiLU → linear(H→D), fp32 throughout, TF32 off.

diffusers' `TimestepEmbedding(in_channels=F, time_embed_dim=H, out_dim=D)`, MiniMax-H3's time embedder.
A GEMM operator: it runs under every mode.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from adaln_bench.ops.plan import TIMESTEP
from adaln_bench.ops.registry import register
from adaln_bench.ops.spec import Cost, Modes, Normal, Operator, OutputSpec, TensorSpec
from adaln_bench.shape import Shape

F32 = torch.float32


def replay(x, w1, b1, w2, b2):
    """The stock path op for op: two fp32 linears around a SiLU."""
    return F.linear(F.silu(F.linear(x, w1, b1)), w2, b2)


reference = replay  # the same formula, in float64 on the upcast inputs


def cost(s: Shape, n: int) -> Cost:
    weights = 4 * (s.hidden * s.frequency + s.dim * s.hidden)
    io = 4 * n * (s.frequency + s.dim)
    flops = 2.0 * n * (s.frequency * s.hidden + s.hidden * s.dim)
    return Cost(fwd_bytes=weights + io + 8 * n * s.hidden, step_bytes=3 * weights + 2 * io + 24 * n * s.hidden,
                fwd_flops=flops, step_flops=3 * flops)


OPERATOR = register(Operator(
    name="timestep_mlp",
    description="timestep MLP: linear(silu(linear(x, w1, b1)), w2, b2) in fp32, (T, 256) → (T, 2688)",
    tensors=(
        TensorSpec("x", "row", ("n", "F"), F32, Normal(2)),
        TensorSpec("w1", "param", ("H", "F"), F32, Normal(3, "F^-0.5")),
        TensorSpec("b1", "param", ("H",), F32, Normal(4, 0.02)),
        TensorSpec("w2", "param", ("D", "H"), F32, Normal(5, "H^-0.5")),
        TensorSpec("b2", "param", ("D",), F32, Normal(6, 0.02)),
    ),
    outputs=(OutputSpec("temb", ("n", "D"), F32),),
    grads=("x", "w1", "b1", "w2", "b2"),
    family=TIMESTEP,
    size_names=("frequency", "hidden", "dim"),
    reference=reference,
    stock=replay,
    stock_what="the stock path at the same T: two fp32 F.linear around a SiLU (+ its autograd backward), "
               "captured with the mode switched off where it can be",
    cost=cost,
    modes=Modes(None, "two GEMMs: every framework mode replaces or configures its matrix products"),
    pipeline_position=20,
))
