"""What the hardware allows at each T: the fewest bytes moved, the FLOPs, and the time floor they imply.

The ceilings are an H200's, as measured for this project (copy rate 4.13 TB/s, 790 TFLOP/s bf16 at best); a run
on another GPU passes its own. Bytes count each tensor once at the fewest reads and writes the operator
needs (W read once forward; read twice and dW written once forward + backward); FLOPs are the GEMMs'.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from adaln_bench.shape import Shape

H200_COPY_TBPS = 4.13
H200_BF16_TFLOPS = 790.0
# The timestep MLP's bundled kernel runs 3xTF32 on mma.sync m16n8k8: its ceiling is taken as half the measured
# mma.sync bf16 rate of the H200 (630-642 TFLOP/s, docs/kernels.md), TF32 issuing at half the bf16 rate.
H200_MMA_SYNC_TF32_TFLOPS = 320.0
TF32_PRODUCTS = 3  # 3xTF32: three TF32 products per fp32 product


@dataclass(frozen=True)
class Ceilings:
    copy_tbps: float = H200_COPY_TBPS
    bf16_tflops: float = H200_BF16_TFLOPS

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Work:
    """One measured quantity's work: bytes, FLOPs, and the floor (µs) with what sets it."""

    bytes: float
    flops: float
    floor_us: float
    bound: str  # "bytes" or "flops"


def _work(nbytes: float, flops: float, c: Ceilings) -> Work:
    t_bytes = nbytes / (c.copy_tbps * 1e12) * 1e6
    t_flops = flops / (c.bf16_tflops * 1e12) * 1e6
    return Work(nbytes, flops, max(t_bytes, t_flops), "bytes" if t_bytes >= t_flops else "flops")


def forward_work(shape: Shape, tokens: int, c: Ceilings = Ceilings()) -> Work:
    """W and b read, temb (fp32) read, Y (bf16) written; one GEMM."""
    d, n = shape.dim, shape.out_features
    nbytes = 2 * n * d + 2 * n + tokens * (4 * d + 2 * n)
    return _work(nbytes, 2.0 * tokens * n * d, c)


def forward_backward_work(shape: Shape, tokens: int, c: Ceilings = Ceilings()) -> Work:
    """Forward, then W read again for d_act, dW and db written, dY read once, d_temb written; three GEMMs."""
    d, n = shape.dim, shape.out_features
    w = 2 * n * d
    nbytes = 3 * w + 2 * 2 * n + tokens * (4 * d + 2 * n + 2 * n + 4 * d)
    return _work(nbytes, 3 * 2.0 * tokens * n * d, c)


def rates(work: Work, us: float) -> dict[str, float]:
    """TB/s and TFLOP/s achieved in `us`, and the fraction of the floor reached (1.0 = at the floor)."""
    return {
        "tbps": work.bytes / (us * 1e-6) / 1e12,
        "tflops": work.flops / (us * 1e-6) / 1e12,
        "of_floor": work.floor_us / us,
    }


def mlp_work(shape: Shape, tokens: int, kind: str, copy_tbps: float = H200_COPY_TBPS,
             tf32_tflops: float = H200_MMA_SYNC_TF32_TFLOPS) -> Work:
    """The timestep MLP (fp32): forward reads both weights once and x, writes y; forward + backward reads them
    twice, writes both weight gradients, reads dy and writes dx. FLOPs: the tensor-core work of 3xTF32 (three TF32
    products per fp32 product; two GEMMs forward, six forward + backward)."""
    if kind not in ("fwd", "fwd_bwd"):
        raise ValueError(f"unknown kind {kind!r}")
    f, h, d = shape.frequency, shape.hidden, shape.dim
    weights = 4 * (h * f + h + d * h + d)
    io = 4 * tokens * (f + d)
    gemm = 2.0 * tokens * (f * h + h * d)
    nbytes = weights + io if kind == "fwd" else 3 * weights + 2 * io
    flops = TF32_PRODUCTS * gemm * (1 if kind == "fwd" else 3)
    t_bytes = nbytes / (copy_tbps * 1e12) * 1e6
    t_flops = flops / (tf32_tflops * 1e12) * 1e6
    return Work(nbytes, flops, max(t_bytes, t_flops), "bytes" if t_bytes >= t_flops else "flops")


def floors_for(op: str, shape: Shape, sizes: list[int]) -> dict:
    """{size: {kind: Work as a dict}} for the operators with a floor (the projection's GEMMs, the timestep MLP's
    3xTF32); {} for the others, whose figures are set against the copy of their bytes instead."""
    if op == "adaln_projection":
        works = {"fwd": forward_work, "fwd_bwd": forward_backward_work}
        return {str(t): {k: asdict(f(shape, t)) for k, f in works.items()} for t in sizes}
    if op == "timestep_mlp":
        return {str(t): {k: asdict(mlp_work(shape, t, k)) for k in ("fwd", "fwd_bwd")} for t in sizes}
    return {}
