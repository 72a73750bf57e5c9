"""One built candidate of one operator, as every measurement sees it: which inputs it takes, in which order,
which of them it differentiates, and the FP64 formula its outputs are compared with."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch

from adaln_bench.ops.candidates import Candidate, Implementation
from adaln_bench.ops.spec import Formula, Operator
from adaln_bench.shape import Shape


def as_outputs(value) -> tuple[torch.Tensor, ...]:
    """A formula's or a candidate's result as a tuple of output tensors."""
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


@dataclass(frozen=True)
class Subject:
    op: Operator
    impl: Implementation
    inputs: tuple[str, ...]  # passed positionally, in this order
    grads: tuple[str, ...]  # inputs that get fresh leaves (none without a backward)
    reference: Formula  # FP64 formula over `inputs`
    stock: Formula  # the operator's stock path over all its inputs
    sizes: Shape

    @classmethod
    def of(cls, op: Operator, candidate: Candidate, impl: Implementation, sizes: Shape) -> "Subject":
        inputs = candidate.inputs or tuple(t.name for t in op.tensors)
        grads = tuple(g for g in (candidate.grads or op.grads) if g in inputs) if impl.has_backward else ()
        return cls(op, impl, inputs, grads, candidate.reference or op.reference_for(sizes), op.stock_for(sizes),
                   sizes)

    @classmethod
    def for_forward(cls, op: Operator, impl: Implementation, sizes: Shape) -> "Subject":
        """A forward function of the whole operator (the kernel tools' libraries), with the operator's inputs,
        gradients and formula."""
        grads = op.grads if impl.has_backward else ()
        return cls(op, impl, tuple(t.name for t in op.tensors), grads, op.reference_for(sizes), op.stock_for(sizes),
                   sizes)

    def as_stock(self) -> "Subject":
        """The operator's stock path as a subject of its own: every input, every gradient."""
        return Subject(self.op, self.impl, tuple(t.name for t in self.op.tensors), self.op.grads,
                       self.op.reference_for(self.sizes), self.stock, self.sizes)

    @property
    def row_grads(self) -> tuple[str, ...]:
        return tuple(g for g in self.grads if self.op.tensor(g).role == "row")

    @property
    def param_grads(self) -> tuple[str, ...]:
        return tuple(g for g in self.grads if self.op.tensor(g).role == "param")

    @property
    def has_backward(self) -> bool:
        return bool(self.grads)

    def leaves(self, tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The inputs, with fresh leaves that require grad for `grads`."""
        return {n: tensors[n].detach().requires_grad_() if n in self.grads else tensors[n] for n in self.inputs}

    def forward(self, tensors: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        return as_outputs(self.impl.forward(*(tensors[n] for n in self.inputs)))

    def stock_forward(self, tensors: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """The operator's stock path on the operator's inputs (the device-time reference)."""
        return as_outputs(self.stock(*(tensors[t.name] for t in self.op.tensors)))
