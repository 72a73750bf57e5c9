"""The candidate registry: every implementation of an operator the harness can measure.

A candidate is registered once for its operator, with a cheap availability check and a builder. The harness
only ever sees `Implementation.forward(*inputs)`, the inputs in the operator's declared order (or the
candidate's own subset, `inputs`), returning the output tensor or a tuple of outputs; it differentiates
through it with autograd, so a candidate with a custom backward wraps it in a `torch.autograd.Function`.
A child process builds a candidate from its name alone: a registered name, an entry point of the
`adaln_bench.candidates` group, or `module:function`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from adaln_bench.named_registry import NamedRegistry
from adaln_bench.ops.compat import LEGACY_OPERATOR
from adaln_bench.shape import Shape

ForwardFn = Callable[..., object]
# A candidate or build context that names no operator (written before operators existed): the projection's,
# by the one compatibility rule (ops/compat.py). Kept under this name for plugins that import it.
DEFAULT_OP = LEGACY_OPERATOR


@dataclass(frozen=True)
class BuildContext:
    """What a candidate may need to build itself in the child process."""

    mode: str
    device: torch.device
    shape: Shape
    op: str = DEFAULT_OP

    @property
    def out_features(self) -> int:
        return self.shape.out_features


@dataclass
class Implementation:
    """A built candidate: `forward(*inputs) -> output or tuple of outputs` (the projection's:
    `forward(temb fp32 (T, D), w bf16 (N, D), b bf16 (N,)) -> bf16 (T, N)`)."""

    source: str
    has_backward: bool
    forward: ForwardFn
    # Anything the candidate wants recorded in the report beside its results (code path, build flags).
    details: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Candidate:
    name: str
    description: str
    # Modes the candidate runs in when the user names none; None means every mode the operator runs under.
    default_modes: Optional[tuple[str, ...]]
    # Returns None when the candidate can run here, else the reason it cannot. Must be cheap.
    availability: Callable[[], Optional[str]]
    build: Callable[[BuildContext], Implementation]
    # Names in the report: "diffusers" is reported as "diffusers[<mode>]" like the reference report.
    suffix_mode: bool = False
    op: str = DEFAULT_OP
    # A candidate that computes part of the operator (torch_rms_norm: the norm without the modulation) names
    # the inputs it takes, in order, the ones it differentiates, and the FP64 formula of what it computes.
    inputs: Optional[tuple[str, ...]] = None
    grads: Optional[tuple[str, ...]] = None
    reference: Optional[Callable[..., object]] = None
    # Modules `build` imports, that a CPU cold-start server may import ahead (harness/processes/fork_server.py).
    preload: tuple[str, ...] = ()

    def report_name(self, mode: str) -> str:
        return f"{self.name}[{mode}]" if self.suffix_mode else self.name


# Built-in candidates register themselves when their operator's module is imported (adaln_bench/ops/<op>/).
_REGISTRY: NamedRegistry[Candidate] = NamedRegistry("candidate", ())


def register(candidate: Candidate) -> Candidate:
    key = f"{candidate.op}/{candidate.name}"
    if key in _REGISTRY.entries:
        raise ValueError(f"candidate {candidate.name!r} of {candidate.op} is registered twice")
    _REGISTRY.entries[key] = candidate
    return candidate


def candidates_of(op: str) -> dict[str, Candidate]:
    """Every candidate of operator `op`, by name, in registration order (entry points last)."""
    from adaln_bench.ops.registry import load_operators

    load_operators()
    _load_entry_points()
    return {c.name: c for c in _REGISTRY.entries.values() if c.op == op}


_ENTRY_POINTS_LOADED = False


def _load_entry_points() -> None:
    """Candidates other packages declare under the `adaln_bench.candidates` entry-point group: read once per
    process (a scan of every installed distribution's metadata is ~20 ms, and a run looks candidates up hundreds
    of times)."""
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    from importlib.metadata import entry_points

    for ep in entry_points(group="adaln_bench.candidates"):
        if any(key.split("/", 1)[1] == ep.name for key in _REGISTRY.entries):
            continue
        obj = ep.load()
        candidate = obj() if callable(obj) and not isinstance(obj, Candidate) else obj
        if not isinstance(candidate, Candidate):
            raise TypeError(f"entry point {ep.name!r} gave {type(candidate).__name__}, not a Candidate")
        _REGISTRY.entries.setdefault(f"{candidate.op}/{candidate.name}", candidate)
    _ENTRY_POINTS_LOADED = True  # not before: a bad entry point keeps raising, as it always did


def get(name: str, op: str = DEFAULT_OP) -> Candidate:
    """A registered candidate of `op` by name, or a user's `module:function` candidate (for `op`)."""
    table = candidates_of(op)
    if name in table:
        return table[name]
    if ":" in name:
        from adaln_bench.ops.user_function import candidate_from_spec

        return candidate_from_spec(name, op)
    raise KeyError(name)


def other_operator_of(name: str, op: str) -> Optional[str]:
    """The operator a registered candidate `name` belongs to when it is not `op` (a plugin for another one)."""
    candidates_of(op)
    owners = [c.op for c in _REGISTRY.entries.values() if c.name == name and c.op != op]
    return owners[0] if owners else None
