"""RL-Kernel's ops as candidates (docs/spec.md#8-candidates): measured when `rl_engine` is installed.

One helper for every operator: the module and class to import, and how to call a built op.
"""
from __future__ import annotations

import importlib
import importlib.util
from typing import Callable, Optional

from adaln_bench.ops.candidates import BuildContext, Candidate, Implementation, register


def availability(module: str) -> Callable[[], Optional[str]]:
    def check() -> Optional[str]:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError as exc:
            return f"ModuleNotFoundError: No module named {exc.name!r} (RL-Kernel is not installed)"
        return None if found else f"ModuleNotFoundError: No module named {module!r} (RL-Kernel is not installed)"

    return check


def register_rl_kernel(op: str, module: str, cls: str, call: Callable[[object], Callable], what: str,
                       inputs: Optional[tuple[str, ...]] = None) -> Candidate:
    """`call(instance)` gives the forward, taking the operator's inputs (or `inputs`) in order."""

    def build(ctx: BuildContext) -> Implementation:
        instance = getattr(importlib.import_module(module), cls)()
        return Implementation(source=f"rl-kernel {cls}", has_backward=True, forward=call(instance),
                              details={"path": f"{module}.{cls}{what}"})

    return register(Candidate(name="rl_kernel", description=f"RL-Kernel's {cls}{what}, when rl_engine is installed",
                              default_modes=("plain",), availability=availability(module), build=build, op=op,
                              inputs=inputs))
