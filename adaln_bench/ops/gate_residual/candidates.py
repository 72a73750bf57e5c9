"""gate_residual's candidates: the stock path, the bundled kernel, RL-Kernel's op."""
from __future__ import annotations

from adaln_bench.ops.bundled import register_bundled
from adaln_bench.ops.gate_residual import replay
from adaln_bench.ops.rl_kernel import register_rl_kernel
from adaln_bench.ops.stock_candidate import register_replay

OP = "gate_residual"

DIFFUSERS = register_replay(OP, replay, "residual + gate.index_select(...) * y")
BUNDLED = register_bundled(OP, "gate_residual")
RL_KERNEL = register_rl_kernel(OP, "rl_engine.kernels.ops.cuda.h3.gate_residual", "H3GateResidualCudaOp",
                               lambda op: op, "")
