"""Which parts of a measurement run (docs/spec.md#4-batch-invariance-probes, #5, #6): kept apart from the
measurement itself so that a run's configuration names them without importing torch."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Parts:
    """What to measure: the probes (with the fingerprint), the errors against FP64, the times."""

    probes: bool = True
    accuracy: bool = True
    latency: bool = True
