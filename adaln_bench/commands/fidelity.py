"""`adaln-bench fidelity REFERENCE... REPORT...`: reports against RL-Kernel's from another GPU, per operator
(reports/fidelity.py; the paths are read by reports/report_sets.py)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from adaln_bench.errors import UserError

EXIT_NOT_COMPARABLE = 3


def _current_in_folders(paths: List[Path]) -> List[Path]:
    """Each folder replaced by its current reports, one per operator (reports/current.py); files as given. A
    folder without any stays, for the loader to say so."""
    from adaln_bench.reports.current import primary_reports

    out: List[Path] = []
    for path in paths:
        picked = primary_reports(path) if path.is_dir() else []
        out.extend(picked or [path])
    return out


def fidelity_command(
    paths: List[Path] = typer.Argument(
        ..., metavar="PATH",
        help="Report files or folders: the reference's first (e.g. results/b200/), then those from another GPU "
             "(e.g. results/h200/). A folder gives each operator's current report that answers the plain mode "
             "(the rule of results/, docs/results.md); name a file to compare another. Two paths are one side "
             "each; with more, the sides are told apart by the GPU that ran them."),
    out: Optional[Path] = typer.Option(None, "--out", metavar="FILE.md", help="Also write the Markdown there."),
) -> None:
    """Per operator and candidate: the invariance verdict on both GPUs, the forward + backward time ratio, and which errors against FP64 are equal to every digit, with the likely reason for each that is not: `draw` (an input drawn differently on a GPU of another SM count) or `implementation` (the same inputs).

    Reports are paired by operator. Prints Markdown. Exit 0 when every candidate measured on both sides has the same verdict, 1 when one differs or none was measured on both, 2 for bad input (no such file, not a report), 3 when the reports are not comparable (a CPU or quick report, another shape, no operator on both sides).
    """
    from adaln_bench.reports.fidelity import compare_sets, sets_not_comparable, to_markdown
    from adaln_bench.datamodel.io import write_text_atomic
    from adaln_bench.reports.display import for_display
    from adaln_bench.reports.report_sets import LoadedReport, by_operator, load_sides

    reference_side, report_side = ([LoadedReport(r.path, for_display(r.report)) for r in side]
                                   for side in load_sides(_current_in_folders(paths)))
    references, reports = by_operator(reference_side, "REFERENCE"), by_operator(report_side, "REPORT")
    if out is not None and out.is_dir():
        raise UserError(f"{out}: is a directory; --out takes a file path")
    reasons = sets_not_comparable({op: r.report for op, r in references.items()},
                                  {op: r.report for op, r in reports.items()})
    if reasons:
        print("adaln-bench: not comparable: " + "; ".join(reasons), file=sys.stderr)
        sys.exit(EXIT_NOT_COMPARABLE)
    result = compare_sets({op: (r.path.name, r.report) for op, r in references.items()},
                          {op: (r.path.name, r.report) for op, r in reports.items()})
    text = to_markdown(result)
    if out is not None:
        write_text_atomic(text, out)
    typer.echo(text, nl=False)
    # SystemExit rather than typer.Exit: under standalone_mode=False click returns typer.Exit's code as a value.
    sys.exit(0 if result.verdicts_agree else 1)

