"""`adaln-bench report FILE`: one row per (mode, candidate), for a person or a pull request."""
from __future__ import annotations

from pathlib import Path

import typer


def report_command(
    file: Path = typer.Argument(..., help="A report written by adaln-bench or RL-Kernel's runner."),
    markdown: bool = typer.Option(False, "--markdown", help="Markdown instead of a terminal table."),
) -> None:
    """Show a report: invariant or not (with the failing counts), and error and time at up to three row
    counts: T = 3, 256, 2048 (timesteps) for the timestep operators, the S (tokens) measured for the
    per-token ones."""
    from adaln_bench.reports.display import for_display
    from adaln_bench.datamodel.io import read_report
    from adaln_bench.reports.render import markdown as to_markdown, print_summary

    report = for_display(read_report(file))
    if markdown:
        typer.echo(to_markdown(report), nl=False)
    else:
        print_summary(report)
