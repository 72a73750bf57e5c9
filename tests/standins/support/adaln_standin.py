"""What every stand-in framework does on the CPU, so that a test can see the switch happen.

- `record(library, call, **args)` appends a JSON line to the file named by ADALN_STANDIN_LOG.
- `maybe_fail(library)` raises when ADALN_STANDIN_FAIL names the library (or is "all").
- `override_cpu(ops)` registers CPU kernels for aten ops, as the real switches do for CUDA. The kernels
  are built from elementwise products and sums, so they never call the ops they replace.
"""
from __future__ import annotations

import json
import os

import torch


class StandinSwitchError(RuntimeError):
    """The failure a stand-in raises on request."""


def record(library: str, call: str, **args) -> None:
    path = os.environ.get("ADALN_STANDIN_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"library": library, "call": call, "args": args}) + "\n")


def maybe_fail(library: str) -> None:
    if os.environ.get("ADALN_STANDIN_FAIL") in (library, "all"):
        raise StandinSwitchError(f"{library} stand-in: switch-on failed as asked by ADALN_STANDIN_FAIL")


def _rowwise_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # Elementwise products summed along the contiguous last axis: each output element reduces its K
    # products in an order that depends on K alone, whatever the number of rows.
    acc = torch.promote_types(a.dtype, torch.float32)
    products = a.to(acc).unsqueeze(1) * b.t().to(acc).unsqueeze(0)
    return products.sum(-1).to(a.dtype)


def _mm(a, b):
    return _rowwise_mm(a, b)


def _addmm(bias, a, b, *, beta=1, alpha=1):
    return beta * bias + alpha * _rowwise_mm(a, b)


def _bmm(a, b):
    return torch.stack([_rowwise_mm(x, y) for x, y in zip(a, b)])


def _mean_dim(x, dim, keepdim=False, *, dtype=None):
    dims = list(range(x.dim())) if dim is None or len(dim) == 0 else [d % x.dim() for d in dim]
    count = 1
    for d in dims:
        count *= x.shape[d]
    return torch.sum(x, dims, keepdim=keepdim, dtype=dtype) / count


def _log_softmax(x, dim, half_to_float):
    return x - torch.logsumexp(x, dim, keepdim=True)


KERNELS = {
    "aten::mm": _mm,
    "aten::addmm": _addmm,
    "aten::bmm": _bmm,
    "aten::mean.dim": _mean_dim,
    "aten::_log_softmax": _log_softmax,
}


def override_cpu(ops) -> torch.library.Library:
    """Register the stand-in kernels of `ops` for the CPU key; `_destroy()` on the result undoes it."""
    lib = torch.library.Library("aten", "IMPL")
    for op in ops:
        lib.impl(op, KERNELS[op], "CPU")
    return lib
