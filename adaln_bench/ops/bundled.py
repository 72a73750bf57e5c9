"""This project's bundled CUDA kernels as `bundled` candidates: the gathered operators' (adaln_bench/kernels/gathered:
per-row outputs, table gradients in fp32 in a fixed order without atomics) and the timestep MLP's
(adaln_bench/kernels/timestep_mlp: 3xTF32, per-row invariant, weight gradients summed in a fixed order)."""
from __future__ import annotations

import importlib
from typing import Callable, Optional

from adaln_bench.ops.candidates import BuildContext, Candidate, Implementation, register

GATHERED = "gathered"
GATHERED_WHAT = ("this project's CUDA kernel: per-row outputs, table gradients in fp32 in a fixed order without "
                 "atomics; an out-of-range index gives NaN rows (the stock path raises)")


def _availability(library: str) -> Callable[[], Optional[str]]:
    def check() -> Optional[str]:
        try:
            module = importlib.import_module(f"adaln_bench.kernels.{library}")
        except ImportError as exc:
            return f"{type(exc).__name__}: {exc}"
        return module.availability()

    return check


def register_bundled(op: str, function: str, library: str = GATHERED, description: str = GATHERED_WHAT,
                     details: Optional[Callable[[BuildContext], dict]] = None) -> Candidate:
    """`function`: the name of the operator's function in adaln_bench.kernels.<library>; `details(ctx)` what the
    report records beside it (by default the library's `library_details(device)`, when it has one)."""

    def build(ctx: BuildContext) -> Implementation:
        module = importlib.import_module(f"adaln_bench.kernels.{library}")
        shown = {"path": f"adaln_bench.kernels.{library}.{function}"}
        if details is not None:
            shown.update(details(ctx))
        elif getattr(module, "library_details", None) is not None:
            shown.update(module.library_details(ctx.device))
        return Implementation(source=f"bundled CUDA kernel, {function}", has_backward=True,
                              forward=getattr(module, function), details=shown)

    return register(Candidate(name="bundled", description=description, default_modes=("plain",),
                              availability=_availability(library), build=build, op=op))
