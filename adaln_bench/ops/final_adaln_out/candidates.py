"""final_adaln_out's candidates: diffusers' MiniMaxH3AdaLayerNormOut (or its replay), the bundled kernel,
RL-Kernel's op."""
from __future__ import annotations

import torch

from adaln_bench.ops.bundled import register_bundled
from adaln_bench.ops.candidates import BuildContext
from adaln_bench.ops.final_adaln_out import EPS, replay
from adaln_bench.ops.rl_kernel import register_rl_kernel
from adaln_bench.ops.stock_candidate import register_stock

OP = "final_adaln_out"


def _module(cls, ctx: BuildContext):
    with torch.device("meta"):
        module = cls(ctx.shape.hidden, ctx.shape.dim, EPS)

    def forward(x, nw, temb, w, b, ti):
        params = {"norm.weight": nw, "linear.weight": w, "linear.bias": b}
        return torch.func.functional_call(module, params, (x, temb, ti))

    return forward


DIFFUSERS = register_stock(OP, "diffusers.models.transformers.transformer_minimax_h3", "MiniMaxH3AdaLayerNormOut",
                           _module, lambda ctx: replay, "MiniMaxH3AdaLayerNormOut")
BUNDLED = register_bundled(OP, "final_adaln_out")
RL_KERNEL = register_rl_kernel(OP, "rl_engine.kernels.ops.cuda.h3.final_adaln_out", "H3FinalAdaLNOutCudaOp",
                               lambda op: op, "")
