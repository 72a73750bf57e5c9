"""Accuracy against an FP64 reference: max |candidate − reference| / max |reference|.

The contract: docs/spec.md#5-accuracy-against-fp64. Several outputs are flattened and concatenated, and the
upstream gradient is one draw of the concatenation's shape.
"""
from __future__ import annotations

import contextlib
import math
from typing import Callable, ContextManager, NamedTuple, Optional

import torch

from adaln_bench.harness.measurement import plan as P
from adaln_bench.harness.measurement.subject import Subject, as_outputs
from adaln_bench.ops.draws import draw_rows, draw_upstream
from adaln_bench.datamodel.schema import GradRelErr
from adaln_bench.shape import Shape


def rel_err(got: torch.Tensor, ref: torch.Tensor) -> Optional[float]:
    """None where the error is not a finite number (NaN in the candidate's output), since JSON has no NaN."""
    denom = ref.abs().max().item()
    num = (got.double() - ref).abs().max().item()
    if denom == 0.0:
        value = 0.0 if num == 0.0 else math.inf
    else:
        value = num / denom
    return value if math.isfinite(value) else None


def joined(outs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """One output as it is; several flattened and concatenated."""
    return outs[0] if len(outs) == 1 else torch.cat([o.reshape(-1) for o in outs])


def upcast(subject: Subject, tensors: dict[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Floating inputs in `dtype` (leaves for the differentiated ones); index inputs unchanged."""
    cast = {n: t.detach().to(dtype) if t.is_floating_point() else t for n, t in tensors.items()}
    return subject.leaves(cast)


def reference_outputs(subject: Subject, tensors: dict[str, torch.Tensor], upstream: Optional[torch.Tensor],
                      dtype: torch.dtype = torch.float64):
    """The subject's formula on the upcast inputs: the joined output and, with `upstream`, each gradient."""
    leaves = upcast(subject, tensors, dtype)
    ref = joined(as_outputs(subject.reference(*(leaves[n] for n in subject.inputs))))
    if upstream is None or not subject.grads:
        return ref.detach(), {}
    ref.backward(upstream.to(dtype))
    return ref.detach(), {g: leaves[g].grad for g in subject.grads}


class Errors(NamedTuple):
    """One size's errors against FP64; `params_repeatable` only where asked for (else None)."""

    fwd: Optional[float]
    grads: Optional[GradRelErr]
    params_repeatable: Optional[bool] = None


def measure_accuracy(subject: Subject, params: dict[str, torch.Tensor], shape: Shape, device: torch.device,
                     tokens: int, mode_off: Callable[[], ContextManager] = contextlib.nullcontext,
                     repeat_params: bool = False) -> Errors:
    """`repeat_params`: also a second forward + backward of the same inputs, whose parameter gradients must equal
    the first's bit for bit (a run without probes has no other word on whether they are summed in a fixed order,
    and `diff` needs it to tell an atomics-summed gradient's noise from a change)."""
    inputs = {**draw_rows(subject.op, shape, P.ACCURACY_SEED, tokens, device), **params}
    inputs = {n: inputs[n] for n in subject.inputs}
    leaves = subject.leaves(inputs)
    if subject.has_backward:
        y = joined(subject.forward(leaves))
    else:
        with torch.no_grad():
            y = joined(subject.forward(leaves))
    upstream = draw_upstream([tuple(y.shape)], [y.dtype], P.ACCURACY_UPSTREAM_SEED, device)[0]
    if subject.has_backward:
        y.backward(upstream)
    with mode_off():
        ref, ref_grads = reference_outputs(subject, inputs, upstream if subject.has_backward else None)
    fwd = rel_err(y.detach(), ref)
    if not subject.has_backward:
        return Errors(fwd, None)
    grads = GradRelErr(**{g: rel_err(leaves[g].grad, ref_grads[g]) for g in subject.grads})
    repeatable = None
    if repeat_params and subject.param_grads:
        again = subject.leaves(inputs)
        joined(subject.forward(again)).backward(upstream)
        repeatable = all(torch.equal(leaves[g].grad, again[g].grad) for g in subject.param_grads)
    return Errors(fwd, grads, repeatable)
