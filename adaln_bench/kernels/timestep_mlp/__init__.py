"""Bundled CUDA kernels of the timestep MLP (issue 43; design and measurements in docs/kernels-timestep_mlp.md).

API (torch tensors in and out, on one CUDA device; differentiable through torch.autograd.Function):

- ``timestep_mlp(x f32 (T, F), w1 f32 (H, F), b1 f32 (H,), w2 f32 (D, H), b2 f32 (D,)) -> f32 (T, D)``:
  ``linear(silu(linear(x, w1, b1)), w2, b2)``. Backward: dx, dw1, db1, dw2, db2, all fp32.
- ``availability() -> Optional[str]``: None when CUDA is present and the library is cached or nvcc and the CUTLASS
  headers can build it; else the reason.
- ``library_details(device) -> dict``: the library file, the fixed K slices and the tiles, for reports.

Contract: every product is 3xTF32 on tensor cores (mma.sync m16n8k8; each operand split into a rounded TF32 big
part and a rounded TF32 remainder, three products per k step, fp32 accumulation): fp32-class accuracy. Every
output row and row gradient (y, dx, and the row intermediates h, silu(h), d_act, dh) depends on that row alone:
the k order of each element is the same for every T and every tile shape, and the long reductions are cut into a
number of K slices fixed by the shape, folded in slice order; no atomics. The weight and bias gradients sum over T
in ascending order (fixed lanes folded in order for the biases): the same bits run to run.

Requirements (ValueError before any C call): float32 everywhere, the shapes above with T >= 1 and F, H, D positive
multiples of 32, all inputs on one CUDA device (non-contiguous or misaligned inputs are copied). The library is
built with nvcc for the device's architecture (sm_90a on the H200, sm_100a on a B200) and cached; see build.py.
"""
from adaln_bench.kernels.timestep_mlp.ops import availability, library_details, timestep_mlp  # noqa: F401

__all__ = ["availability", "library_details", "timestep_mlp"]
