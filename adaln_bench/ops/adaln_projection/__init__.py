"""adaln_projection: fp32 temb (T, D) → SiLU → bf16 → linear to N = 6·M·H outputs
(docs/spec.md#103-adaln_projection).

MiniMax-H3's AdaLN modulation projection; diffusers has it as `MiniMaxH3AdaLayerNormModulation`.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from adaln_bench.ops.plan import TIMESTEP
from adaln_bench.ops.registry import register
from adaln_bench.ops.spec import Cost, Modes, Normal, Operator, OutputSpec, TensorSpec
from adaln_bench.shape import Shape

BF16, F32 = torch.bfloat16, torch.float32


def replay(temb: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The stock path, op for op as the module does it: SiLU at temb's precision, one cast to W's dtype, one
    linear (cuBLAS on a GPU)."""
    return F.linear(F.silu(temb).to(w.dtype), w, b)


def reference(temb: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """In float64 on the upcast inputs: no rounding of the activation."""
    return F.linear(F.silu(temb), w, b)


def cost(s: Shape, n: int) -> Cost:
    w_bytes = s.out_features * s.dim * 2
    io = n * s.dim * 4 + n * s.out_features * 2
    flops = 2.0 * n * s.dim * s.out_features
    # The step reads W twice and writes dW once (docs/kernels.md#floors), plus dY and d_temb.
    return Cost(fwd_bytes=w_bytes + io, step_bytes=3 * w_bytes + 2 * io + n * s.dim * 4,
                fwd_flops=flops, step_flops=3 * flops)


OPERATOR = register(Operator(
    name="adaln_projection",
    description="AdaLN modulation projection: linear(silu(temb) in bf16, W, b), the (T, 6·M·H) table",
    tensors=(
        TensorSpec("temb", "row", ("n", "D"), F32, Normal(7)),
        TensorSpec("w", "param", ("N", "D"), BF16, Normal(8, "D^-0.5"), report_key="weight"),
        TensorSpec("b", "param", ("N",), BF16, Normal(9, 0.02), report_key="bias"),
    ),
    outputs=(OutputSpec("table", ("n", "N"), BF16),),
    grads=("temb", "w", "b"),
    family=TIMESTEP,
    size_names=("dim", "hidden", "modalities"),
    reference=reference,
    stock=replay,
    stock_what=("the cuBLAS path at the same T, F.linear(F.silu(temb).to(bf16), W, b) (+ its autograd backward), "
                "captured with the mode switched off where it can be"),
    stock_short="cuBLAS",
    cost=cost,
    modes=Modes(None, "a GEMM: every framework mode replaces or configures its matrix products"),
    pipeline_position=30,
))
