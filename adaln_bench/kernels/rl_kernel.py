"""RL-Kernel's H3 AdaLN projection op, measured when RL-Kernel is installed (docs/spec.md#8-candidates)."""
from __future__ import annotations

import importlib
import importlib.util
from typing import Optional

from adaln_bench.kernels.registry import BuildContext, Candidate, Implementation, register

MODULE = "rl_engine.kernels.ops.cuda.h3.adaln_projection"
CLASS = "H3AdaLNProjectionCudaOp"


def _availability() -> Optional[str]:
    try:
        found = importlib.util.find_spec(MODULE) is not None
    except ModuleNotFoundError as exc:
        return f"ModuleNotFoundError: No module named {exc.name!r} (RL-Kernel is not installed)"
    return None if found else f"ModuleNotFoundError: No module named {MODULE!r} (RL-Kernel is not installed)"


def _build(ctx: BuildContext) -> Implementation:
    cls = getattr(importlib.import_module(MODULE), CLASS)
    op = cls()
    return Implementation(
        source="rl-kernel H3AdaLNProjectionCudaOp",
        has_backward=True,
        forward=lambda temb, w, b: op.forward_table(temb, w, b),
        details={"path": f"{MODULE}.{CLASS}.forward_table"},
    )


RL_KERNEL = register(
    Candidate(
        name="rl_kernel",
        description="RL-Kernel's H3AdaLNProjectionCudaOp.forward_table, when rl_engine is installed",
        default_modes=("plain",),
        availability=_availability,
        build=_build,
    )
)
