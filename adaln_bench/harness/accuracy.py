"""Accuracy against an FP64 reference: max |candidate − reference| / max |reference|.

The contract: docs/spec.md#5-accuracy-against-fp64.
"""
from __future__ import annotations

import contextlib
import math
from typing import Callable, ContextManager, Optional

import torch
import torch.nn.functional as F

from adaln_bench.harness import plan as P
from adaln_bench.harness.inputs import Params, make_temb
from adaln_bench.harness.shapes import Shape
from adaln_bench.kernels.registry import Implementation
from adaln_bench.reports.schema import GradRelErr


def rel_err(got: torch.Tensor, ref: torch.Tensor) -> Optional[float]:
    """None where the error is not a finite number (NaN in the candidate's output), since JSON has no NaN."""
    denom = ref.abs().max().item()
    num = (got.double() - ref).abs().max().item()
    if denom == 0.0:
        value = 0.0 if num == 0.0 else math.inf
    else:
        value = num / denom
    return value if math.isfinite(value) else None


def fp64_reference(temb: torch.Tensor, params: Params, upstream: torch.Tensor):
    """The op in float64 on the same inputs: output and gradients of temb, W, b."""
    t = temb.detach().double().requires_grad_()
    w = params.weight.detach().double().requires_grad_()
    b = params.bias.detach().double().requires_grad_()
    ref = F.linear(F.silu(t), w, b)
    ref.backward(upstream.double())
    return ref.detach(), t.grad, w.grad, b.grad


def measure_accuracy(
    impl: Implementation,
    params: Params,
    shape: Shape,
    device: torch.device,
    tokens: int,
    mode_off: Callable[[], ContextManager] = contextlib.nullcontext,
) -> tuple[Optional[float], Optional[GradRelErr]]:
    temb = make_temb(tokens, shape, P.ACCURACY_SEED, device)
    leaf = temb.clone().requires_grad_(impl.has_backward)
    w = params.weight.detach().requires_grad_(impl.has_backward)
    b = params.bias.detach().requires_grad_(impl.has_backward)
    if impl.has_backward:
        y = impl.forward(leaf, w, b)
    else:
        with torch.no_grad():
            y = impl.forward(leaf, w, b)
    g = torch.Generator(device=device).manual_seed(P.ACCURACY_UPSTREAM_SEED)
    upstream = torch.randn(y.shape, generator=g, device=device).to(y.dtype)
    if impl.has_backward:
        y.backward(upstream)
    with mode_off():
        ref, ref_t, ref_w, ref_b = fp64_reference(temb, params, upstream)
    fwd = rel_err(y.detach(), ref)
    if not impl.has_backward:
        return fwd, None
    grads = GradRelErr(
        temb=rel_err(leaf.grad, ref_t),
        w=rel_err(w.grad, ref_w),
        b=rel_err(b.grad, ref_b),
    )
    return fwd, grads
