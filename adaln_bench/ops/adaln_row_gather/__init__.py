"""adaln_row_gather: six (S, H) modulation rows per token, gathered from a (M·M, 6·H) bf16 table by the
packed layout's index timestep_indices·M + token_tags. The table gradient is the only one."""
from __future__ import annotations

import torch

from adaln_bench.ops.gathered import PLAIN_ONLY, rows_cost
from adaln_bench.ops.plan import TOKEN
from adaln_bench.ops.registry import register
from adaln_bench.ops.spec import Normal, Operator, OutputSpec, Packed, TensorSpec
from adaln_bench.shape import Shape

BF16 = torch.bfloat16
OUTPUTS = ("shift_msa", "scale_msa", "gate_msa", "shift_mlp", "scale_mlp", "gate_mlp")


def replay(table, timestep_indices, token_tags):
    """The stock path: one index_select per modulation row (six), whose backward adds into the table with
    bf16 atomics."""
    idx = packed_index(table, timestep_indices, token_tags)
    return tuple(piece.index_select(0, idx) for piece in table.chunk(6, dim=1))


def reference(table, timestep_indices, token_tags):
    return tuple(table.index_select(0, packed_index(table, timestep_indices, token_tags)).chunk(6, dim=1))


def packed_index(table, timestep_indices, token_tags):
    """timestep_indices·M + token_tags, M read off the (M·M)-row table."""
    m = round(table.shape[0] ** 0.5)
    return timestep_indices * m + token_tags


def cost(s: Shape, n: int):
    return rows_cost(6, 12, s.hidden, n, s.modalities ** 2)


OPERATOR = register(Operator(
    name="adaln_row_gather",
    description="per-token modulation rows: table[timestep_indices·3 + token_tags] as six (S, 5376) bf16 rows",
    tensors=(
        TensorSpec("table", "param", ("M*M", "6*H"), BF16, Normal(14, 0.1)),
        TensorSpec("timestep_indices", "index", ("n",), torch.int64, Packed("timestep_indices")),
        TensorSpec("token_tags", "index", ("n",), torch.int64, Packed("token_tags")),
    ),
    outputs=tuple(OutputSpec(name, ("n", "H"), BF16) for name in OUTPUTS),
    grads=("table",),
    family=TOKEN,
    size_names=("hidden", "modalities"),
    reference=reference,
    stock=replay,
    stock_what="the stock path at the same S: six index_select calls (+ their atomic index_add backward)",
    cost=cost,
    modes=PLAIN_ONLY,
    pipeline_position=40,
    table_grads=("table",),
    # A child measuring it (plain, diffusers) reserved 68.7 GiB, 4.36 times the largest step's 15.75 GiB
    # (H100, bfbf819): more than the default 3 copies.
    step_copies=4.6,
))
