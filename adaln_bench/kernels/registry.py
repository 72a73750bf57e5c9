"""The candidate registry: every implementation of the AdaLN projection the harness can measure.

A candidate is registered once, with a cheap availability check and a builder. The harness only
ever sees `Implementation.forward(temb, w, b) -> table`; it differentiates through it with autograd,
so a candidate with a custom backward wraps it in a `torch.autograd.Function`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from adaln_bench.named_registry import NamedRegistry
from adaln_bench.shape import Shape

ForwardFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class BuildContext:
    """What a candidate may need to build itself in the child process."""

    mode: str
    device: torch.device
    shape: Shape

    @property
    def out_features(self) -> int:
        return self.shape.out_features


@dataclass
class Implementation:
    """A built candidate: `forward(temb fp32 (T, D), w bf16 (N, D), b bf16 (N,)) -> bf16 (T, N)`."""

    source: str
    has_backward: bool
    forward: ForwardFn
    # Anything the candidate wants recorded in the report beside its results (code path, build flags).
    details: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Candidate:
    name: str
    description: str
    # Modes the candidate runs in when the user names none; None means every mode.
    default_modes: Optional[tuple[str, ...]]
    # Returns None when the candidate can run here, else the reason it cannot. Must be cheap.
    availability: Callable[[], Optional[str]]
    build: Callable[[BuildContext], Implementation]
    # Names in the report: "diffusers" is reported as "diffusers[<mode>]" like the reference report.
    suffix_mode: bool = False

    def report_name(self, mode: str) -> str:
        return f"{self.name}[{mode}]" if self.suffix_mode else self.name


# Built-in candidates register themselves when their module is imported, on the first lookup.
_REGISTRY: NamedRegistry[Candidate] = NamedRegistry("candidate", (
    "adaln_bench.kernels.diffusers_baseline",
    "adaln_bench.kernels.bundled.candidate",
    "adaln_bench.kernels.rl_kernel",
))
register = _REGISTRY.register


def all_candidates() -> dict[str, Candidate]:
    _REGISTRY.load()
    _load_entry_points()
    return dict(_REGISTRY.entries)


def _load_entry_points() -> None:
    """Candidates other packages declare under the `adaln_bench.candidates` entry-point group."""
    from importlib.metadata import entry_points

    for ep in entry_points(group="adaln_bench.candidates"):
        if ep.name in _REGISTRY.entries:
            continue
        obj = ep.load()
        candidate = obj() if callable(obj) and not isinstance(obj, Candidate) else obj
        if not isinstance(candidate, Candidate):
            raise TypeError(f"entry point {ep.name!r} gave {type(candidate).__name__}, not a Candidate")
        _REGISTRY.entries.setdefault(candidate.name, candidate)


def get(name: str) -> Candidate:
    """A registered candidate by name, or a user's `module:function` candidate."""
    candidates = all_candidates()
    if name in candidates:
        return candidates[name]
    if ":" in name:
        from adaln_bench.kernels.user_function import candidate_from_spec

        return candidate_from_spec(name)
    raise KeyError(name)
