"""timestep_mlp's candidates: diffusers' TimestepEmbedding (or the replay) under every mode, RL-Kernel's op, and
this project's bundled kernel (adaln_bench/kernels/timestep_mlp)."""
from __future__ import annotations

import torch

from adaln_bench.ops.bundled import register_bundled
from adaln_bench.ops.candidates import BuildContext
from adaln_bench.ops.rl_kernel import register_rl_kernel
from adaln_bench.ops.stock_candidate import register_stock
from adaln_bench.ops.timestep_mlp import replay

OP = "timestep_mlp"


def _module(cls, ctx: BuildContext):
    with torch.device("meta"):
        module = cls(in_channels=ctx.shape.frequency, time_embed_dim=ctx.shape.hidden, out_dim=ctx.shape.dim)

    def forward(x, w1, b1, w2, b2):
        params = {"linear_1.weight": w1, "linear_1.bias": b1, "linear_2.weight": w2, "linear_2.bias": b2}
        return torch.func.functional_call(module, params, (x,))

    return forward


DIFFUSERS = register_stock(OP, "diffusers.models.embeddings", "TimestepEmbedding", _module, lambda ctx: replay,
                           "TimestepEmbedding, FP32 F.linear", suffix_mode=True)
RL_KERNEL = register_rl_kernel(OP, "rl_engine.kernels.ops.cuda.h3.timestep_mlp", "H3TimestepMLPCudaOp",
                               lambda op: op, "")


def _bundled_details(ctx: BuildContext) -> dict:
    from adaln_bench.kernels import timestep_mlp

    return timestep_mlp.library_details(ctx.device, ctx.shape.frequency, ctx.shape.hidden, ctx.shape.dim)


BUNDLED = register_bundled(OP, "timestep_mlp", library="timestep_mlp", details=_bundled_details,
                           description="this project's CUDA kernel: 3xTF32 on tensor cores (fp32-class accuracy), "
                                       "per-row invariant, weight gradients summed in a fixed order")
