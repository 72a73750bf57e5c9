"""The torch.autograd.Function over the timestep-MLP C library (see __init__.py for the API contract).

Every input is checked here, in Python, before any C call (one ValueError per problem); every C call's status is
checked (RuntimeError with the library's message). Outputs, the saved activations and the workspaces are
torch.empty on the input's device and the C functions get the current stream: no host sync, no allocation outside
torch's caching allocator, so forward and backward can be captured in a CUDA graph and run from autograd's device
thread.
"""
from __future__ import annotations

from typing import Optional

import torch

from adaln_bench.kernels.toolchain import BuildError, unavailable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from adaln_bench.kernels.timestep_mlp import build as _build_types

_F32 = torch.float32
_ALIGN = 16
_K_STEP = 32  # F, H and D are multiples of the GEMMs' k tile


def _fail(msg: str):
    raise ValueError(f"timestep_mlp kernel: {msg}")


def _check(name: str, t, shape: tuple) -> None:
    """Type, dtype and shape (None = any size) of one input."""
    if not isinstance(t, torch.Tensor):
        _fail(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != _F32:
        _fail(f"{name} must be torch.float32, got {t.dtype}")
    if t.dim() != len(shape) or any(s is not None and s != d for s, d in zip(shape, t.shape)):
        want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
        _fail(f"{name} must have shape {want}, got {tuple(t.shape)}")


def _check_inputs(x, w1, b1, w2, b2) -> tuple[int, int, int, int]:
    """(T, F, H, D) after every check; ValueError on the first problem."""
    _check("x", x, (None, None))
    _check("w1", w1, (None, x.shape[1]))
    h = w1.shape[0]
    _check("b1", b1, (h,))
    _check("w2", w2, (None, h))
    d = w2.shape[0]
    _check("b2", b2, (d,))
    t, f = x.shape
    if t < 1:
        _fail(f"x must have at least one row (T >= 1), got T = {t}")
    for name, size in (("F (x's columns)", f), ("H (w1's rows)", h), ("D (w2's rows)", d)):
        if size < _K_STEP or size % _K_STEP:
            _fail(f"{name} must be a positive multiple of {_K_STEP}, got {size}")
    devices = {n: v.device for n, v in (("x", x), ("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2))}
    if len(set(devices.values())) != 1:
        _fail("inputs are on different devices: " + ", ".join(f"{n} {dv}" for n, dv in devices.items()))
    if x.device.type != "cuda":
        _fail(f"inputs must be on a CUDA device, got {x.device}")
    return t, f, h, d


def _aligned(t: torch.Tensor) -> torch.Tensor:
    t = t.contiguous()
    return t if t.data_ptr() % _ALIGN == 0 else t.clone()


_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(dev: torch.device) -> int:
    if _RAW_STREAM is not None:
        return _RAW_STREAM(dev.index)
    return torch.cuda.current_stream(dev).cuda_stream


def target_for_device(device: torch.device) -> "_build_types.Target":
    major, minor = torch.cuda.get_device_capability(device)
    return _build().target_for_capability(major, minor)


_BY_INDEX: dict = {}


def library(device: torch.device) -> "_build_types.Library":
    index = device.index if device.index is not None else torch.cuda.current_device()
    lib = _BY_INDEX.get(index)
    if lib is None:
        lib = _BY_INDEX[index] = _build().load(target_for_device(torch.device("cuda", index)))
    return lib


def library_details(device: torch.device, f: int = 256, h: int = 5376, d: int = 2688) -> dict:
    """What a report records beside the candidate: the library file, the fixed K slices, the tiles by T."""
    lib = library(device)
    s = lib.splits(f, h, d)
    return {"library": str(lib.path),
            "scheme": "3xTF32 (rounded split, a fresh accumulator a k step) on mma.sync m16n8k8",
            "k_slices": f"y {s['y']}, d_act {s['d_act']}, dx {s['dx']} (fixed by the shape)",
            "tiles": "weight-streaming mma.sync kernel (16 x 8..16 a warp) for T <= 16, CUTLASS 64x32 for T <= 32, "
                     "64x64 for T <= 128, "
                     "64x128 for T <= 1024, 128x128 above (same bits)",
            "weight_grads": "FFMA for T <= 32, 3xTF32 GEMM over T above"}


def availability() -> Optional[str]:
    """None when CUDA is there and the library is cached or can be built; else the reason."""
    if not torch.cuda.is_available():
        return "no CUDA device"
    try:
        target = target_for_device(torch.device("cuda", torch.cuda.current_device()))
    except BuildError as exc:
        return str(exc)
    return unavailable(_build().recipe(target))


class _TimestepMLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2):
        t, f, hid, d = _check_inputs(x, w1, b1, w2, b2)
        x, w1, b1, w2, b2 = (_aligned(v) for v in (x, w1, b1, w2, b2))
        dev = x.device
        lib = library(dev)
        h = torch.empty(t, hid, dtype=_F32, device=dev)
        a = torch.empty(t, hid, dtype=_F32, device=dev)
        y = torch.empty(t, d, dtype=_F32, device=dev)
        ws = torch.empty(max(16, lib.forward_workspace_bytes(t, f, hid, d)), dtype=torch.uint8, device=dev)
        lib.call("tmlp_forward", x.data_ptr(), w1.data_ptr(), b1.data_ptr(), w2.data_ptr(), b2.data_ptr(),
                 h.data_ptr(), a.data_ptr(), y.data_ptr(), ws.data_ptr(), ws.numel(), t, f, hid, d, dev.index,
                 _stream(dev))
        ctx.save_for_backward(x, w1, w2, h, a)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, w1, w2, h, a = ctx.saved_tensors
        t, f = x.shape
        hid, d = w1.shape[0], w2.shape[0]
        dev = x.device
        dy = _aligned(dy.to(_F32))
        lib = library(dev)
        dx = torch.empty(t, f, dtype=_F32, device=dev)
        dw1 = torch.empty(hid, f, dtype=_F32, device=dev)
        db1 = torch.empty(hid, dtype=_F32, device=dev)
        dw2 = torch.empty(d, hid, dtype=_F32, device=dev)
        db2 = torch.empty(d, dtype=_F32, device=dev)
        ws = torch.empty(max(16, lib.backward_workspace_bytes(t, f, hid, d)), dtype=torch.uint8, device=dev)
        lib.call("tmlp_backward", dy.data_ptr(), x.data_ptr(), w1.data_ptr(), w2.data_ptr(), h.data_ptr(),
                 a.data_ptr(), dx.data_ptr(), dw1.data_ptr(), db1.data_ptr(), dw2.data_ptr(), db2.data_ptr(),
                 ws.data_ptr(), ws.numel(), t, f, hid, d, dev.index, _stream(dev))
        return dx, dw1, db1, dw2, db2


def timestep_mlp(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
                 b2: torch.Tensor) -> torch.Tensor:
    """linear(silu(linear(x, w1, b1)), w2, b2) in fp32 (3xTF32), per row invariant; differentiable."""
    _check_inputs(x, w1, b1, w2, b2)
    return _TimestepMLP.apply(x, w1, b1, w2, b2)


def _build():
    """build.py, imported when first needed: the package's import leaves it out, so that
    `python -m adaln_bench.kernels.timestep_mlp.build` runs it fresh."""
    from adaln_bench.kernels.timestep_mlp import build

    return build
