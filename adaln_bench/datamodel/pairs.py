"""Every requested (mode, candidate) pair of a report, or of a run's reports, by what became of it: measured,
unavailable, failed (or crashed, or timed out), interrupted."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from adaln_bench.datamodel.schema import CandidateResult, Report

_FAILED = ("failed", "crashed", "timeout")


@dataclass
class PairCounts:
    """Every requested (mode, candidate) pair of a report, by what became of it."""

    measured: list[str] = field(default_factory=list)
    unavailable: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    interrupted: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.measured) + len(self.unavailable) + len(self.failed) + len(self.interrupted)


def count_pairs(report: Report | Sequence[Report]) -> PairCounts:
    """Every pair of one report (`mode/candidate`), or of a run's reports (`op/mode/candidate`)."""
    reports = [report] if isinstance(report, Report) else list(report)
    counts = PairCounts()
    for r in reports:
        _count(r, counts, f"{r.op}/" if len(reports) > 1 else "")
    return counts


def _count(report: Report, counts: PairCounts, prefix: str) -> None:
    for mode, candidates in report.results.items():
        for name, entry in candidates.items():
            label = f"{prefix}{mode}/{name}"
            if isinstance(entry, CandidateResult):
                counts.measured.append(label)
            elif entry.status in _FAILED:
                counts.failed.append(label)
            elif entry.status == "interrupted":
                counts.interrupted.append(label)
            else:  # "unavailable", or no status in a prior-art report
                counts.unavailable.append(label)
