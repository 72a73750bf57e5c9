"""Bundled CUDA kernels of the four gathered AdaLN operators (issue 32; design and measurements in docs/kernels.md).

API (torch tensors in and out, all on one CUDA device; differentiable through torch.autograd.Function):

- ``row_gather(table bf16 (9, 6H), ti int64 (S,), tags int64 (S,)) -> tuple of six bf16 (S, H)``:
  rows ``table[ti * 3 + tags]`` split in six along dim 1. Backward: ``d_table`` (9, 6H).
- ``norm_modulate(x bf16 (S, H), w bf16 (H,), sh bf16 (9, H), sc bf16 (9, H), idx int64 (S,)) -> bf16 (S, H)``:
  ``rms_norm(x) * w * (1 + sc[idx]) + sh[idx]``, EPS = 1e-5, computed in fp32 and rounded once (not bitwise
  the stock path, which rounds after each bf16 op; more accurate). Backward: dx, dw, dsh, dsc.
- ``gate_residual(res bf16 (S, H), y bf16 (S, H), gate bf16 (9, H), idx int64 (S,)) -> bf16 (S, H)``:
  ``res + gate[idx] * y``, rounded to bf16 after the product and after the sum: bitwise the stock forward.
  Backward: d_res (the upstream gradient itself), d_y = bf16(dout * gate[idx]) (bitwise stock), d_gate.
- ``final_adaln_out(x bf16 (S, H), nw bf16 (H,), temb f32 (3, D), w bf16 (2H, D), b bf16 (2H,), ti int64 (S,))
  -> bf16 (S, H)``: table = linear(silu(temb).bf16, w, b) (torch/cuBLAS, shape fixed by H and D), shift =
  table[:, :H], scale = table[:, H:]; ``rms_norm(x, nw) * (1 + scale[ti]) + shift[ti]`` by the norm_modulate
  kernel with a 3-entry table. Backward: dx, dnw, dtemb, dw, db (the table's gradient from the kernel, then
  torch's linear / silu backward).
- ``availability() -> Optional[str]``: None when CUDA is present and the library is cached or nvcc can build
  it; else the reason.

Contract: every output and row gradient (outputs, dx, d_y, d_res) is computed per row, independently of the
batch. Every table / parameter gradient (d_table, dw, dsh, dsc, d_gate, dnw, final's table gradient) is an fp32
sum in an order fixed by the data and S only (8·C lanes of consecutive tokens summed in ascending order, the
8 lanes of a chunk folded in lane order, the C chunks in chunk order, C = min(CMAX, ceil(S/512))), rounded
to bf16 once; no atomics anywhere, so it repeats bit for bit run to run and on GPUs of any SM count.
Workspace (fp32 chunk partials, torch.empty on the current stream): at H = 5376 at most 1.2 MB (gate_residual)
and 2.3 MB (row_gather), whatever S is. norm_modulate's and final_adaln_out's backward runs in one pass over x
and dy where H <= 6144: each table entry's rows in token order, in tiles of ceil(S / (126 - entries)) rows
folded in order, rounded once; 5.4-5.9 MB of workspace at H = 5376 (4 B a token plus 5.4 MB of tile partials).
Wider rows take two passes (a row kernel for dx, then a column kernel over fp32 chunk partials): other bits, the
same contract. ``library_details(device)`` says which runs.

Requirements (ValueError before any C call): bf16 / int64 / f32 dtypes as above, the shapes above, H a
positive multiple of 8 (16-byte vector loads), at most 65536; all inputs on one CUDA device, contiguous,
16-byte aligned. Indices are not range-checked on the host (that would need a sync): an out-of-range index
gives NaN rows in the outputs and row gradients and is left out of the table sums. S = 0 falls back to the
stock torch ops. The library is built with nvcc for the device's architecture (sm_90a on the H200, sm_100a
on a B200) and cached; see build.py.
"""
from adaln_bench.kernels.gathered.ops import (  # noqa: F401
    EPS,
    availability,
    final_adaln_out,
    gate_residual,
    library_details,
    norm_modulate,
    row_gather,
)

__all__ = ["EPS", "availability", "final_adaln_out", "gate_residual", "library_details", "norm_modulate",
           "row_gather"]
