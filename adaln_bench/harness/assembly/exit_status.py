"""What `adaln-bench run`'s exit code says, from the report it wrote: one code per kind of outcome.

In order of precedence: 2 bad input (raised before anything runs), 130 interrupted (143 on SIGTERM),
4 nothing measured at all, 3 some (mode, candidate) pair crashed, failed or timed out (or, with
`--strict`, was unavailable), 5 where it would be 0 but a report or the run index could not be written
where asked, 0 otherwise. 1 stays what Python gives a bug: an uncaught traceback.
"""
from __future__ import annotations

from typing import Optional, Sequence

from adaln_bench.datamodel.pairs import count_pairs
from adaln_bench.datamodel.schema import Report

OK = 0
BAD_INPUT = 2
PAIR_FAILED = 3
NOTHING_MEASURED = 4
WRITE_FAILED = 5  # measured, but a report could not be written where asked (it was kept elsewhere)
INTERRUPTED = 130  # 128 + SIGINT
TERMINATED = 143  # 128 + SIGTERM


def _listed(labels: list[str], limit: int = 3) -> str:
    more = f" and {len(labels) - limit} more" if len(labels) > limit else ""
    return ", ".join(labels[:limit]) + more


def run_exit(report: Report | Sequence[Report], strict: bool,
             signal_code: Optional[int] = None) -> tuple[int, Optional[str]]:
    """The exit code of a run that wrote `report` (or these reports), and one line that says why when it is
    not 0."""
    if signal_code is not None:
        return signal_code, None  # the interrupt has its own message
    counts = count_pairs(report)
    if not counts.measured:
        return NOTHING_MEASURED, (f"nothing was measured: {len(counts.failed)} of {counts.total} pair(s) crashed, "
                                  f"failed or timed out, {len(counts.unavailable)} unavailable")
    if counts.failed:
        return PAIR_FAILED, (f"{len(counts.failed)} of {counts.total} pair(s) crashed, failed or timed out: "
                             f"{_listed(counts.failed)}")
    if strict and counts.unavailable:
        return PAIR_FAILED, (f"--strict: {len(counts.unavailable)} of {counts.total} pair(s) unavailable here: "
                             f"{_listed(counts.unavailable)}")
    return OK, None


def closing(reports: dict, write_failed: Optional[str], strict: bool, signal_code: Optional[int],
            cause: Optional[str], signal_name: str) -> tuple[int, list[str]]:
    """The run's exit code and its closing lines, each said once. What is said follows what was written: a
    signal that arrived as the last mode finished left every report complete, and the line says so (the exit
    code still says that a signal ended the run)."""
    code, why = run_exit(list(reports.values()), strict, signal_code)
    lines = []
    if write_failed and code == 0:
        code, why = WRITE_FAILED, write_failed
    elif write_failed:  # beside the run's own reason for its exit code
        lines.append(write_failed)
    cut = [op for op, r in reports.items() if r.incomplete]
    if signal_code is not None and not cut:
        lines.append(f"{signal_name} arrived after the last mode had finished; the report"
                     f"{'s are' if len(reports) > 1 else ' is'} complete")
    elif signal_code is not None:
        which = "the report holds" if len(reports) == 1 else f"{len(cut)} of {len(reports)} reports hold"
        lines.append(f"{cause or 'interrupted'}; {which} the finished modes, written as *.incomplete.json beside "
                     "any complete report (never over one)")
    elif why:
        lines.append(f"{why} (exit {code})")
    return code, lines
