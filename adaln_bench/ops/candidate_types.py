"""What a candidate is: its record (`Candidate`), what it may need to build itself (`BuildContext`), and what it
builds (`Implementation`). The registry of candidates is candidates.py."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

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
