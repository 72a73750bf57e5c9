"""The bundled kernels of the gathered operators as their `bundled` candidates (adaln_bench/kernels/gathered):
invariant by construction, table gradients summed in fp32 in a fixed order with no atomics."""
from __future__ import annotations

from typing import Optional

from adaln_bench.ops.candidates import BuildContext, Candidate, Implementation, register


def _availability() -> Optional[str]:
    try:
        from adaln_bench.kernels import gathered
    except ImportError as exc:
        return f"{type(exc).__name__}: {exc}"
    return gathered.availability()


def register_bundled(op: str, function: str) -> Candidate:
    """`function`: the name of the operator's function in adaln_bench.kernels.gathered."""

    def build(ctx: BuildContext) -> Implementation:
        from adaln_bench.kernels import gathered

        details = {"path": f"adaln_bench.kernels.gathered.{function}"}
        info = getattr(gathered, "library_details", None)
        if info is not None:
            details.update(info(ctx.device))
        return Implementation(source=f"bundled CUDA kernel, {function}", has_backward=True,
                              forward=getattr(gathered, function), details=details)

    return register(Candidate(name="bundled", description="this project's CUDA kernel: per-row outputs, table "
                              "gradients in fp32 in a fixed order without atomics; an out-of-range index gives "
                              "NaN rows (the stock path raises)", default_modes=("plain",),
                              availability=_availability, build=build, op=op))
