"""`adaln-bench fidelity REFERENCE REPORT`: a report against RL-Kernel's on another GPU (reports/fidelity.py)."""
from __future__ import annotations

from pathlib import Path

import typer


def fidelity_command(
    reference: Path = typer.Argument(..., help="The reference report, e.g. results/b200/adaln_projection.b200.prior-art.json."),
    report: Path = typer.Argument(..., help="A report from another GPU."),
) -> None:
    """Per mode: the invariance verdict on both GPUs, the time ratio, and whether W and b errors match exactly.

    Prints Markdown. Exit 0 when every mode measured on both sides has the same verdict, 1 when one differs
    or no mode was measured on both, 2 for a file that is not a report.
    """
    from adaln_bench.reports.fidelity import compare, to_markdown
    from adaln_bench.reports.io import read_report

    result = compare(read_report(reference), read_report(report))
    typer.echo(to_markdown(result, reference.name, report.name), nl=False)
    raise typer.Exit(0 if result.verdicts_agree else 1)
