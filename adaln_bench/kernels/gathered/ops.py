"""torch.autograd.Functions over the gathered-operator C library (see __init__.py for the API contract).

Every input is checked here, in Python, before any C call (one ValueError per problem); every C call's
status is checked (RuntimeError with the library's message). Outputs and workspaces are torch.empty on the
input's device, the C functions get the current stream: no host sync, no allocation outside torch's caching
allocator, so forward and backward can be captured in a CUDA graph and run from autograd's device thread.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from adaln_bench.kernels.toolchain import BuildError, unavailable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from adaln_bench.kernels.gathered import build as _build_types

EPS = 1e-5
_ALIGN = 16
_BF16 = torch.bfloat16


def _fail(msg: str):
    raise ValueError(f"gathered kernel: {msg}")


def _check(name: str, t, dtype: torch.dtype, shape: tuple) -> None:
    """Type, dtype and shape (None in shape = any size) of one input."""
    if not isinstance(t, torch.Tensor):
        _fail(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        _fail(f"{name} must be {dtype}, got {t.dtype}")
    if t.dim() != len(shape) or any(s is not None and s != d for s, d in zip(shape, t.shape)):
        want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
        _fail(f"{name} must have shape {want}, got {tuple(t.shape)}")


def _check_h(h: int, what: str) -> None:
    if h < 8 or h % 8:
        _fail(f"H must be a positive multiple of 8 (the kernels use 16-byte vector loads of 8 bf16); {what} gives "
              f"H = {h}")
    if h > 65536:
        _fail(f"H must be at most 65536, got {h}")


def _check_placement(named: dict, strided_ok: tuple = ()) -> torch.device:
    """Same CUDA device for all; contiguous (row-strided views allowed for the names in strided_ok) and 16-byte
    aligned data pointers."""
    devs = {n: t.device for n, t in named.items()}
    first = next(iter(devs.values()))
    if any(d != first for d in devs.values()):
        _fail("inputs are on different devices: " + ", ".join(f"{n} {d}" for n, d in devs.items()))
    if first.type != "cuda":
        _fail(f"inputs must be on a CUDA device, got {first}")
    for n, t in named.items():
        if n in strided_ok:
            if t.dim() != 2 or t.stride(1) != 1 or t.stride(0) < t.shape[1] or t.stride(0) % 8:
                _fail(f"{n} must have contiguous rows (row stride a multiple of 8), got strides {t.stride()}")
        elif not t.is_contiguous():
            _fail(f"{n} must be contiguous (call .contiguous()), got strides {t.stride()}")
        if t.dtype != torch.int64 and t.data_ptr() % _ALIGN:
            _fail(f"{n} must be 16-byte aligned (data_ptr % 16 = {t.data_ptr() % _ALIGN}); clone it")
    return first


def _aligned(t: torch.Tensor) -> torch.Tensor:
    t = t.contiguous()
    return t if t.data_ptr() % _ALIGN == 0 else t.clone()


# The current stream's handle without building a torch.cuda.Stream object (a few µs a call on the host path; the
# binding exists in CUDA builds of torch only).
_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(dev: torch.device) -> int:
    if _RAW_STREAM is not None:
        return _RAW_STREAM(dev.index)
    return torch.cuda.current_stream(dev).cuda_stream


def _ptr(t: Optional[torch.Tensor]):
    return t.data_ptr() if t is not None else None


def target_for_device(device: torch.device) -> "_build_types.Target":
    major, minor = torch.cuda.get_device_capability(device)
    return _build().target_for_capability(major, minor)


_BY_INDEX: dict = {}  # device index -> its configured library: every kernel call looks it up


def library(device: torch.device) -> "_build_types.Library":
    index = device.index if device.index is not None else torch.cuda.current_device()
    lib = _BY_INDEX.get(index)
    if lib is None:
        lib = _BY_INDEX[index] = _build().load(target_for_device(torch.device("cuda", index)))
    return lib


def library_details(device: torch.device) -> dict:
    """What a report records beside the candidate: the library file and the norm backward it runs at H = 5376
    (reports made while the two passes could be chosen there say "two passes": they read the same)."""
    lib = library(device)
    path = lib.norm_backward_path(5376)
    if path != 2:
        return {"library": str(lib.path), "norm_backward": "two passes"}
    optin = torch.cuda.get_device_properties(device).shared_memory_per_block_optin
    return {"library": str(lib.path), "norm_backward": f"one pass, {lib.onepass_ring(5376, optin)}-row ring"}


def availability() -> Optional[str]:
    """None when CUDA is there and the library is cached or can be built; else the reason."""
    if not torch.cuda.is_available():
        return "no CUDA device"
    try:
        target = target_for_device(torch.device("cuda", torch.cuda.current_device()))
    except BuildError as exc:
        return str(exc)
    return unavailable(_build().recipe(target))


# ---------------------------------------------------------------------------------------------- row_gather
class _RowGather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, table, ti, tags):
        s, h = ti.shape[0], table.shape[1] // 6
        dev = table.device
        lib = library(dev)
        outs = [torch.empty((s, h), dtype=_BF16, device=dev) for _ in range(6)]
        with torch.cuda.device(dev):
            lib.call("gat_row_gather_fwd", table.data_ptr(), ti.data_ptr(), tags.data_ptr(),
                     *[o.data_ptr() for o in outs], s, h, dev.index, _stream(dev))
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(ti, tags)
        ctx.h = h
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        ti, tags = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None, None
        s, h, dev = ti.shape[0], ctx.h, ti.device
        lib = library(dev)
        gs = [None if g is None else _aligned(g.to(_BF16)) for g in grads]
        for g in gs:
            if g is not None and tuple(g.shape) != (s, h):
                raise RuntimeError(f"gathered row_gather backward: upstream gradient shape {tuple(g.shape)} != {(s, h)}")
        d_table = torch.empty((9, 6 * h), dtype=_BF16, device=dev)
        wsb = lib.workspace_bytes(_build().OP_ROW_GATHER, s, h)
        ws = torch.empty(wsb, dtype=torch.uint8, device=dev)
        with torch.cuda.device(dev):
            lib.call("gat_row_gather_bwd", *[_ptr(g) for g in gs], ti.data_ptr(), tags.data_ptr(),
                     d_table.data_ptr(), ws.data_ptr(), wsb, s, h, dev.index, _stream(dev))
        return d_table, None, None


def row_gather(table: torch.Tensor, ti: torch.Tensor, tags: torch.Tensor) -> tuple:
    """Six bf16 (S, H) rows table[ti * 3 + tags] split along dim 1; d_table (9, 6H) in backward."""
    _check("table", table, _BF16, (9, None))
    if table.shape[1] % 6:
        _fail(f"table must have 6·H columns, got {table.shape[1]}")
    h = table.shape[1] // 6
    _check_h(h, f"table's {table.shape[1]} columns")
    _check("ti", ti, torch.int64, (None,))
    _check("tags", tags, torch.int64, (ti.shape[0],))
    _check_placement({"table": table, "ti": ti, "tags": tags})
    if ti.shape[0] == 0:  # nothing to gather or sum: the stock path (no kernel for empty launches)
        return tuple(table.index_select(0, ti * 3 + tags).split(h, dim=1))
    return _RowGather.apply(table, ti, tags)


# ---------------------------------------------------------------------------------------------- norm_modulate
def _norm_forward(x, w, sh, sc, idx, ne):
    """y = rms_norm(x) * w * (1 + sc[idx]) + sh[idx] and each row's rstd; sh, sc (ne, H) rows of stride sc.stride(0)."""
    s, h = x.shape
    dev = x.device
    lib = library(dev)
    y = torch.empty((s, h), dtype=_BF16, device=dev)
    rstd = torch.empty((s,), dtype=torch.float32, device=dev)
    with torch.cuda.device(dev):
        lib.call("gat_norm_fwd", x.data_ptr(), w.data_ptr(), sh.data_ptr(), sc.data_ptr(), sc.stride(0),
                 idx.data_ptr(), ne, y.data_ptr(), rstd.data_ptr(), s, h, EPS, dev.index, _stream(dev))
    return y, rstd


def _norm_backward(dy, x, w, sc, idx, rstd, ne, nx, nw, dsh, dsc):
    """dx (if nx), dw (if nw), and the table gradients into dsh, dsc (either may be None; rows of stride
    dsh.stride(0), the same for both)."""
    s, h = x.shape
    dev = x.device
    lib = library(dev)
    dy = _aligned(dy.to(_BF16))
    if tuple(dy.shape) != (s, h):
        raise RuntimeError(f"gathered norm_modulate backward: upstream gradient shape {tuple(dy.shape)} != {(s, h)}")
    dx = torch.empty((s, h), dtype=_BF16, device=dev) if nx else None
    dw = torch.empty((h,), dtype=_BF16, device=dev) if nw else None
    wanted = dsh if dsh is not None else dsc
    ostride = wanted.stride(0) if wanted is not None else h
    wsb = lib.workspace_bytes(_build().OP_NORM, s, h, ne)  # the one-pass backward needs it for dx alone too
    ws = torch.empty(max(wsb, 16), dtype=torch.uint8, device=dev)
    with torch.cuda.device(dev):
        lib.call("gat_norm_bwd", dy.data_ptr(), x.data_ptr(), w.data_ptr(), sc.data_ptr(), sc.stride(0),
                 idx.data_ptr(), ne, rstd.data_ptr(), _ptr(dx), _ptr(dw), _ptr(dsh), _ptr(dsc), ostride,
                 ws.data_ptr(), wsb, s, h, dev.index, _stream(dev))
    return dx, dw


class _NormModulate(torch.autograd.Function):
    """y = rms_norm(x) * w * (1 + sc[idx]) + sh[idx]; sh, sc are (ne, H)."""

    @staticmethod
    def forward(ctx, x, w, sh, sc, idx, ne):
        y, rstd = _norm_forward(x, w, sh, sc, idx, ne)
        ctx.save_for_backward(x, w, sc, idx, rstd)
        ctx.ne = ne
        return y

    @staticmethod
    def backward(ctx, dy):
        x, w, sc, idx, rstd = ctx.saved_tensors
        nx, nw, nsh, nsc = ctx.needs_input_grad[:4]
        if not (nx or nw or nsh or nsc):
            return None, None, None, None, None, None
        h, ne = x.shape[1], ctx.ne
        dsh = torch.empty((ne, h), dtype=_BF16, device=x.device) if nsh else None
        dsc = torch.empty((ne, h), dtype=_BF16, device=x.device) if nsc else None
        dx, dw = _norm_backward(dy, x, w, sc, idx, rstd, ne, nx, nw, dsh, dsc)
        return dx, dw, dsh, dsc, None, None


class _NormModulateTable(torch.autograd.Function):
    """final_adaln_out's norm part: the shift and scale are the halves of one (ne, 2H) table, read in place, and
    its gradient is written whole (no slice views, so no SliceBackward nodes with their zeros and adds)."""

    @staticmethod
    def forward(ctx, x, w, table, idx):
        h = x.shape[1]
        y, rstd = _norm_forward(x, w, table[:, :h], table[:, h:], idx, table.shape[0])
        ctx.save_for_backward(x, w, table, idx, rstd)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, w, table, idx, rstd = ctx.saved_tensors
        nx, nw, nt = ctx.needs_input_grad[:3]
        if not (nx or nw or nt):
            return None, None, None, None
        h = x.shape[1]
        dt = torch.empty(table.shape, dtype=_BF16, device=x.device) if nt else None
        dx, dw = _norm_backward(dy, x, w, table[:, h:], idx, rstd, table.shape[0], nx, nw,
                                None if dt is None else dt[:, :h], None if dt is None else dt[:, h:])
        return dx, dw, dt, None


def _stock_norm_modulate(x, w, sh, sc, idx):
    return F.rms_norm(x, (x.shape[1],), w, EPS) * (1 + sc.index_select(0, idx)) + sh.index_select(0, idx)


def norm_modulate(x: torch.Tensor, w: torch.Tensor, sh: torch.Tensor, sc: torch.Tensor,
                  idx: torch.Tensor) -> torch.Tensor:
    """bf16 (S, H): rms_norm(x) * w * (1 + sc[idx]) + sh[idx], EPS = 1e-5; grads dx, dw, dsh, dsc."""
    _check("x", x, _BF16, (None, None))
    s, h = x.shape
    _check_h(h, f"x's shape {tuple(x.shape)}")
    _check("w", w, _BF16, (h,))
    _check("sh", sh, _BF16, (9, h))
    _check("sc", sc, _BF16, (9, h))
    _check("idx", idx, torch.int64, (s,))
    _check_placement({"x": x, "w": w, "sh": sh, "sc": sc, "idx": idx})
    if s == 0:
        return _stock_norm_modulate(x, w, sh, sc, idx)
    return _NormModulate.apply(x, w, sh, sc, idx, 9)


# ---------------------------------------------------------------------------------------------- gate_residual
class _GateResidual(torch.autograd.Function):
    @staticmethod
    def forward(ctx, res, y, gate, idx):
        s, h = res.shape
        dev = res.device
        lib = library(dev)
        out = torch.empty((s, h), dtype=_BF16, device=dev)
        with torch.cuda.device(dev):
            lib.call("gat_gate_fwd", res.data_ptr(), y.data_ptr(), gate.data_ptr(), idx.data_ptr(), out.data_ptr(),
                     s, h, dev.index, _stream(dev))
        ctx.save_for_backward(y, gate, idx)
        return out

    @staticmethod
    def backward(ctx, dout):
        y, gate, idx = ctx.saved_tensors
        nres, ny, ngate = ctx.needs_input_grad[:3]
        s, h = y.shape
        dev = y.device
        if tuple(dout.shape) != (s, h):
            raise RuntimeError(f"gathered gate_residual backward: upstream gradient shape {tuple(dout.shape)} != {(s, h)}")
        d_res = dout if nres else None  # the sum's gradient passes through unchanged (as in the stock path)
        if not (ny or ngate):
            return d_res, None, None, None
        lib = library(dev)
        do = _aligned(dout.to(_BF16))
        dy = torch.empty((s, h), dtype=_BF16, device=dev) if ny else None
        dgate = torch.empty((9, h), dtype=_BF16, device=dev) if ngate else None
        wsb = lib.workspace_bytes(_build().OP_GATE, s, h) if ngate else 0
        ws = torch.empty(max(wsb, 16), dtype=torch.uint8, device=dev)
        with torch.cuda.device(dev):
            lib.call("gat_gate_bwd", do.data_ptr(), y.data_ptr(), gate.data_ptr(), idx.data_ptr(), _ptr(dy),
                     _ptr(dgate), ws.data_ptr(), wsb, s, h, dev.index, _stream(dev))
        return d_res, dy, dgate, None


def gate_residual(res: torch.Tensor, y: torch.Tensor, gate: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """bf16 (S, H): res + gate[idx] * y with the stock path's roundings (bitwise the stock forward);
    grads d_res (the upstream gradient itself), d_y = bf16(dout * gate[idx]), d_gate (9, H)."""
    _check("res", res, _BF16, (None, None))
    s, h = res.shape
    _check_h(h, f"res's shape {tuple(res.shape)}")
    _check("y", y, _BF16, (s, h))
    _check("gate", gate, _BF16, (9, h))
    _check("idx", idx, torch.int64, (s,))
    _check_placement({"res": res, "y": y, "gate": gate, "idx": idx})
    if s == 0:
        return res + gate.index_select(0, idx) * y
    return _GateResidual.apply(res, y, gate, idx)


# ---------------------------------------------------------------------------------------------- final_adaln_out
def final_adaln_out(x: torch.Tensor, nw: torch.Tensor, temb: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
                    ti: torch.Tensor) -> torch.Tensor:
    """bf16 (S, H): rms_norm(x, nw) * (1 + scale[ti]) + shift[ti], (shift | scale) = linear(silu(temb).bf16, w, b).

    The (3, 2H) table is torch's (cuBLAS; its shape never depends on S); the norm part and the table's gradient are
    the kernels' (norm_modulate with 3 entries reading the table's halves in place and writing its gradient whole)."""
    _check("x", x, _BF16, (None, None))
    s, h = x.shape
    _check_h(h, f"x's shape {tuple(x.shape)}")
    _check("nw", nw, _BF16, (h,))
    _check("temb", temb, torch.float32, (3, None))
    d = temb.shape[1]
    if d < 1:
        _fail("temb must have D >= 1 columns")
    _check("w", w, _BF16, (2 * h, d))
    _check("b", b, _BF16, (2 * h,))
    _check("ti", ti, torch.int64, (s,))
    _check_placement({"x": x, "nw": nw, "temb": temb, "w": w, "b": b, "ti": ti})
    table = F.linear(F.silu(temb).to(_BF16), w, b)
    if s == 0:
        shift, scale = table[:, :h], table[:, h:]
        return F.rms_norm(x, (h,), nw, EPS) * (1 + scale.index_select(0, ti)) + shift.index_select(0, ti)
    return _NormModulateTable.apply(x, nw, table, ti)


def _build():
    """build.py, imported when first needed: the package's import leaves it out, so that
    `python -m adaln_bench.kernels.gathered.build` runs it fresh."""
    from adaln_bench.kernels.gathered import build

    return build
