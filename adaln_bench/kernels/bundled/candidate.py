"""The bundled CUDA kernel as a differentiable function: the projection's "bundled" candidate
(registered in adaln_bench/ops/adaln_projection/candidates.py).

forward(temb fp32 (T, D), w bf16 (N, D), b bf16 (N,)) -> bf16 (T, N), differentiable: a
torch.autograd.Function whose backward returns d_temb in fp32 (d_act never rounded to bf16), dW and db
in bf16 (fixed order over T, no atomics). Inputs are checked here, in Python, before any C call; every
C call's status is checked and turned into a RuntimeError with the library's message.
"""
from __future__ import annotations

from typing import Optional

import torch

from adaln_bench.kernels.bundled import build as _build
from adaln_bench.kernels.toolchain import unavailable

_ALIGN = 16


def _fail(msg: str) -> None:
    raise ValueError(f"bundled kernel: {msg}")


def _aligned(t: torch.Tensor) -> torch.Tensor:
    t = t.contiguous()
    if t.data_ptr() % _ALIGN:
        t = t.clone()
    return t


def device_cc(device: torch.device) -> int:
    major, minor = torch.cuda.get_device_capability(device)
    return 10 * major + minor


def target_for_device(device: torch.device) -> _build.Target:
    major, minor = torch.cuda.get_device_capability(device)
    return _build.target_for_capability(major, minor)


def validate(temb: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> None:
    """Fail closed, with a clear message, on anything the kernel does not take."""
    for name, t in (("temb", temb), ("w", w), ("b", b)):
        if not isinstance(t, torch.Tensor):
            _fail(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if temb.dtype != torch.float32:
        _fail(f"temb must be float32, got {temb.dtype}")
    if w.dtype != torch.bfloat16:
        _fail(f"w must be bfloat16, got {w.dtype}")
    if b.dtype != torch.bfloat16:
        _fail(f"b must be bfloat16, got {b.dtype}")
    if temb.dim() != 2:
        _fail(f"temb must be 2-D (T, D), got shape {tuple(temb.shape)}")
    if w.dim() != 2:
        _fail(f"w must be 2-D (N, D), got shape {tuple(w.shape)}")
    if b.dim() != 1:
        _fail(f"b must be 1-D (N,), got shape {tuple(b.shape)}")
    t, d = temb.shape
    n = w.shape[0]
    if t < 1:
        _fail("temb has no rows (T = 0); T must be >= 1")
    if w.shape[1] != d:
        _fail(f"w has {w.shape[1]} columns but temb has D = {d}")
    if b.shape[0] != n:
        _fail(f"b has {b.shape[0]} entries but w has N = {n} rows")
    if d % 8 or n % 8 or d < 8 or n < 8:
        _fail(f"D and N must be positive multiples of 8 (got D = {d}, N = {n})")
    if t >= 2**31 or d >= 2**30 or n >= 2**30:
        _fail(f"sizes too large (T = {t}, D = {d}, N = {n})")
    devs = {temb.device, w.device, b.device}
    if len(devs) != 1:
        _fail(f"inputs are on different devices: temb {temb.device}, w {w.device}, b {b.device}")
    if temb.device.type != "cuda":
        _fail(f"inputs must be on a CUDA device, got {temb.device}")


class _AdaLNProjection(torch.autograd.Function):
    @staticmethod
    def forward(ctx, temb, w, b, lib):  # noqa: D401 - autograd signature
        t, d = temb.shape
        n = w.shape[0]
        dev = temb.device
        temb_c, w_c, b_c = _aligned(temb.detach()), _aligned(w.detach()), _aligned(b.detach())
        act = torch.empty((t, d), dtype=torch.bfloat16, device=dev)
        y = torch.empty((t, n), dtype=torch.bfloat16, device=dev)
        ws = torch.empty(lib.gemm_ws_bytes, dtype=torch.uint8, device=dev)
        with torch.cuda.device(dev):
            stream = torch.cuda.current_stream(dev).cuda_stream
            lib.forward(temb_c.data_ptr(), w_c.data_ptr(), b_c.data_ptr(), act.data_ptr(), y.data_ptr(), t, d, n,
                        ws.data_ptr(), ws.numel(), dev.index, stream)
        ctx.lib = lib
        ctx.save_for_backward(temb_c, w_c, act)
        return y

    @staticmethod
    def backward(ctx, dy):
        lib = ctx.lib
        temb, w, act = ctx.saved_tensors
        need_temb, need_w, need_b = ctx.needs_input_grad[:3]
        if not (need_temb or need_w or need_b):
            return None, None, None, None
        t, d = temb.shape
        n = w.shape[0]
        dev = temb.device
        if dy.dtype != torch.bfloat16:
            raise RuntimeError(f"bundled kernel backward: upstream gradient must be bfloat16, got {dy.dtype}")
        if tuple(dy.shape) != (t, n):
            raise RuntimeError(f"bundled kernel backward: upstream gradient shape {tuple(dy.shape)} != {(t, n)}")
        dy = _aligned(dy)
        dtemb = torch.empty((t, d), dtype=torch.float32, device=dev) if need_temb else None
        dw = torch.empty((n, d), dtype=torch.bfloat16, device=dev) if need_w else None
        db = torch.empty((n,), dtype=torch.bfloat16, device=dev) if need_b else None
        scratch_bytes = lib.dtemb_scratch_bytes(t, d, n) if need_temb else lib.gemm_ws_bytes
        scratch = torch.empty(scratch_bytes, dtype=torch.uint8, device=dev)
        ptr = lambda x: x.data_ptr() if x is not None else None  # noqa: E731
        with torch.cuda.device(dev):
            stream = torch.cuda.current_stream(dev).cuda_stream
            lib.backward(dy.data_ptr(), w.data_ptr(), temb.data_ptr(), act.data_ptr(), ptr(dtemb), ptr(dw), ptr(db),
                         t, d, n, scratch.data_ptr(), scratch_bytes, dev.index, stream)
        return dtemb, dw, db, None


def make_forward(lib: "_build.Library"):
    def forward(temb: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        validate(temb, w, b)
        cc = device_cc(temb.device)
        if cc != lib.target.cc:
            raise RuntimeError(
                f"bundled kernel: library built for {lib.target.arch} ({lib.target.path} path, compute capability "
                f"{lib.target.cc // 10}.{lib.target.cc % 10}); device {temb.device} has {cc // 10}.{cc % 10}")
        return _AdaLNProjection.apply(temb, w, b, lib)

    return forward


def get_library(device: torch.device, log=None) -> "_build.Library":
    return _build.load(target_for_device(device), log=log)


def availability() -> Optional[str]:
    if not torch.cuda.is_available():
        return "no CUDA device"
    try:
        target = target_for_device(torch.device("cuda", torch.cuda.current_device()))
    except _build.BuildError as exc:
        return str(exc)
    return unavailable(_build.recipe(target))


def library_details(lib: "_build.Library", out_features: int) -> dict[str, str]:
    """What the report records beside the candidate's results: the code path, the build, the chunking."""
    kchunk, nchunks, per_group, t_block = lib.chunking(out_features)
    meta = lib.meta
    return {
        "path": lib.target.path,
        "code_path": lib.path_name,
        "config": lib.config,
        "arch": lib.target.arch,
        "library": str(lib.path),
        "cache_key": str(meta.get("key", "")),
        "nvcc": str(meta.get("nvcc", "")),
        "cutlass": str(meta.get("cutlass_version", "")),
        "flags": str(meta.get("flags", "")),
        "dact_chunking": (f"{nchunks} chunks of {kchunk}, summed in groups of {per_group} (fixed by N = "
                          f"{out_features}), T blocks of {t_block}"),
        "prebuilt_or_cached": str(meta.get("prebuilt_or_cached", "")),
    }
