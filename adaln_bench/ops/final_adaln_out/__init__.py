"""final_adaln_out: the final norm of the packed sequence, its shift and scale rows made by a small linear
from the (M, D) timestep embedding: table = linear(silu(temb) in bf16, w, b) → (M, 2·H), shift first; then
rms_norm(x, nw)·(1 + scale[ti]) + shift[ti], indexed by the timestep index alone (diffusers'
`MiniMaxH3AdaLayerNormOut`)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from adaln_bench.ops.gathered import EPS, RMS_NORM_MODES, rms_norm64, rows_cost
from adaln_bench.ops.plan import TOKEN
from adaln_bench.ops.registry import register
from adaln_bench.ops.spec import Cost, Normal, Operator, OutputSpec, Packed, TensorSpec, Uniform
from adaln_bench.shape import Shape

BF16 = torch.bfloat16


def replay(x, nw, temb, w, b, ti):
    """The module op for op: SiLU at temb's precision, a cast to W's dtype, the linear, shift then scale, the
    bf16 RMSNorm, the rows by index_select."""
    shift, scale = F.linear(F.silu(temb).to(w.dtype), w, b).chunk(2, dim=-1)
    h = F.rms_norm(x, (x.shape[-1],), nw, EPS)
    return h * (1.0 + scale.index_select(0, ti)) + shift.index_select(0, ti)


def reference(x, nw, temb, w, b, ti):
    shift, scale = F.linear(F.silu(temb), w, b).chunk(2, dim=-1)
    return rms_norm64(x, nw) * (1.0 + scale[ti]) + shift[ti]


def cost(s: Shape, n: int) -> Cost:
    rows = rows_cost(2, 5, s.hidden, n, 2 * s.modalities)
    linear = 2 * s.hidden * s.dim * 2  # W (2H, D) bf16
    flops = 2.0 * s.modalities * s.dim * 2 * s.hidden
    return Cost(rows.fwd_bytes + linear, rows.step_bytes + 2 * linear, flops, 3 * flops)


OPERATOR = register(Operator(
    name="final_adaln_out",
    description="final norm, modulated per token by a (3, 2·5376) table made from temb by a small linear",
    tensors=(
        TensorSpec("x", "row", ("n", "H"), BF16, Normal(18, 2.0)),
        TensorSpec("nw", "param", ("H",), BF16, Uniform(19, 0.5)),
        TensorSpec("temb", "param", ("M", "D"), torch.float32, Normal(20)),
        TensorSpec("w", "param", ("2*H", "D"), BF16, Normal(21, "D^-0.5")),
        TensorSpec("b", "param", ("2*H",), BF16, Normal(22, 0.02)),
        TensorSpec("ti", "index", ("n",), torch.int64, Packed("timestep_indices")),
    ),
    outputs=(OutputSpec("out", ("n", "H"), BF16),),
    grads=("x", "nw", "temb", "w", "b"),
    family=TOKEN,
    size_names=("dim", "hidden", "modalities"),
    reference=reference,
    stock=replay,
    stock_what="the stock path at the same S: diffusers' MiniMaxH3AdaLayerNormOut op for op (+ its autograd "
               "backward)",
    cost=cost,
    modes=RMS_NORM_MODES,
    pipeline_position=70,
    table_grads=("temb", "w", "b"),
))
