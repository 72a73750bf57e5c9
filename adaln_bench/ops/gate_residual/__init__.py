"""gate_residual: the residual update of a DiT block, res + gate[idx]·y, per token (S, H) bf16, the gate row
gathered by the packed layout's index."""
from __future__ import annotations

import torch

from adaln_bench.ops.gathered import PLAIN_ONLY, rows_cost
from adaln_bench.ops.plan import TOKEN
from adaln_bench.ops.registry import register
from adaln_bench.ops.spec import Normal, Operator, OutputSpec, Packed, TensorSpec
from adaln_bench.shape import Shape

BF16 = torch.bfloat16


def replay(res, y, gate, idx):
    """The stock path op for op: bf16 rounding after the product and after the sum; the gate's gradient
    comes from index_select's atomic backward."""
    return res + gate.index_select(0, idx) * y


def reference(res, y, gate, idx):
    return res + gate[idx] * y


def cost(s: Shape, n: int):
    # forward: read res and y, write out; backward: read dy and y (and res for nothing), write d_res, d_y.
    return rows_cost(3, 7, s.hidden, n, s.modalities ** 2)


OPERATOR = register(Operator(
    name="gate_residual",
    description="gated residual: res + gate[idx]·y, (S, 5376) bf16",
    tensors=(
        TensorSpec("res", "row", ("n", "H"), BF16, Normal(15)),
        TensorSpec("y", "row", ("n", "H"), BF16, Normal(16)),
        TensorSpec("gate", "param", ("M*M", "H"), BF16, Normal(17, 0.1)),
        TensorSpec("idx", "index", ("n",), torch.int64, Packed("packed_index")),
    ),
    outputs=(OutputSpec("out", ("n", "H"), BF16),),
    grads=("res", "y", "gate"),
    family=TOKEN,
    size_names=("hidden", "modalities"),
    reference=reference,
    stock=replay,
    stock_what="the stock path at the same S: res + gate.index_select(0, idx) * y (+ its autograd backward)",
    cost=cost,
    modes=PLAIN_ONLY,
    pipeline_position=60,
    table_grads=("gate",),
))
