"""norm_modulate: RMSNorm of the packed sequence's tokens, then each token's shift and scale rows:
rms_norm(x, w)·(1 + sc[idx]) + sh[idx], x (S, H) bf16, idx = timestep_indices·M + token_tags."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from adaln_bench.ops.gathered import EPS, RMS_NORM_MODES, rms_norm64, rows_cost
from adaln_bench.ops.plan import TOKEN
from adaln_bench.ops.registry import register
from adaln_bench.ops.spec import Normal, Operator, OutputSpec, Packed, TensorSpec, Uniform
from adaln_bench.shape import Shape

BF16 = torch.bfloat16


def replay(x, w, sh, sc, idx):
    """The stock path op for op: F.rms_norm in bf16, then the rows gathered with index_select (whose backward
    adds into sh and sc with bf16 atomics), rounded where eager rounds."""
    return F.rms_norm(x, (x.shape[-1],), w, EPS) * (1 + sc.index_select(0, idx)) + sh.index_select(0, idx)


def reference(x, w, sh, sc, idx):
    return rms_norm64(x, w) * (1 + sc[idx]) + sh[idx]


def cost(s: Shape, n: int):
    # forward: read x, write y; backward: read dy and x, write dx (docs/spec.md#105-norm_modulate).
    return rows_cost(2, 5, s.hidden, n, 2 * s.modalities ** 2)


OPERATOR = register(Operator(
    name="norm_modulate",
    description="RMSNorm then per-token modulation: rms_norm(x, w)·(1 + scale[idx]) + shift[idx], (S, 5376) bf16",
    tensors=(
        TensorSpec("x", "row", ("n", "H"), BF16, Normal(10, 2.0)),
        TensorSpec("w", "param", ("H",), BF16, Uniform(11, 0.5)),
        TensorSpec("sh", "param", ("M*M", "H"), BF16, Normal(12, 0.1)),
        TensorSpec("sc", "param", ("M*M", "H"), BF16, Normal(13, 0.1)),
        TensorSpec("idx", "index", ("n",), torch.int64, Packed("packed_index")),
    ),
    outputs=(OutputSpec("y", ("n", "H"), BF16),),
    grads=("x", "w", "sh", "sc"),
    family=TOKEN,
    size_names=("hidden", "modalities"),
    reference=reference,
    stock=replay,
    stock_what="the stock path at the same S: F.rms_norm, index_select modulation (+ its autograd backward)",
    cost=cost,
    modes=RMS_NORM_MODES,
    pipeline_position=50,
    table_grads=("sh", "sc"),
))
