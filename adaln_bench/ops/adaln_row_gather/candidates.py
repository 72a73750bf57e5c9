"""adaln_row_gather's candidates: the stock path (six index_select calls), the bundled kernel, RL-Kernel's op."""
from __future__ import annotations

from adaln_bench.ops.adaln_row_gather import replay
from adaln_bench.ops.bundled import register_bundled
from adaln_bench.ops.rl_kernel import register_rl_kernel
from adaln_bench.ops.stock_candidate import register_replay

OP = "adaln_row_gather"

DIFFUSERS = register_replay(OP, replay, "six index_select calls (the MiniMax-H3 block's per-token rows)")
BUNDLED = register_bundled(OP, "row_gather")
RL_KERNEL = register_rl_kernel(OP, "rl_engine.kernels.ops.cuda.h3.adaln_row_gather", "H3AdaLNRowGatherCudaOp",
                               lambda op: op, "")
