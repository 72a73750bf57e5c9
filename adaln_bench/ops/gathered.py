"""What the four gathered operators share: per-token rows of a small table, and a gather whose backward is
a fixed-order sum (no atomics), for candidates that need a deterministic gather without a bundled kernel."""
from __future__ import annotations

import torch

from adaln_bench.ops.spec import Cost, Modes

EPS = 1e-5
PLAIN_ONLY = Modes(("plain",), "index_select, elementwise products and sums: no mode replaces any of them",
                   skipped_reason="its index_select and elementwise ops are replaced by no mode")
RMS_NORM_MODES = Modes(None, "rms_norm and mean.dim, which SGLang's switch replaces (and the modes' cuBLAS "
                       "settings where it has a GEMM)")


def rms_norm64(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


class OrderedGather(torch.autograd.Function):
    """`table.index_select(0, idx)`, whose table gradient sums each row's tokens in ascending token order in
    fp32 (one reduction per table row, no atomics) and rounds once: repeatable, and the same bits on any GPU."""

    @staticmethod
    def forward(ctx, table, idx):  # noqa: D401 - autograd signature
        ctx.save_for_backward(idx)
        ctx.rows = table.shape[0]
        ctx.dtype = table.dtype
        return table.index_select(0, idx)

    @staticmethod
    def backward(ctx, grad):
        (idx,) = ctx.saved_tensors
        g = grad.float()
        sums = [g[idx == r].sum(0) for r in range(ctx.rows)]
        return torch.stack(sums).to(ctx.dtype), None


def ordered_gather(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return OrderedGather.apply(table, idx)


def rows_cost(row_tensors_fwd: int, row_tensors_step: int, hidden: int, n: int, table_rows: int = 9) -> Cost:
    """bf16 rows of H per token read or written, plus the table (fp32 partials kept on chip)."""
    row = 2 * hidden * n
    table = 2 * hidden * table_rows
    return Cost(fwd_bytes=row_tensors_fwd * row + table, step_bytes=row_tensors_step * row + 3 * table)
