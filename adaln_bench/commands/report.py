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
    per-token ones. A kernel-bench output is shown as the command wrote it (its Markdown)."""
    from adaln_bench.reports.display import for_display
    from adaln_bench.datamodel.load import KernelBenchReport, read_document
    from adaln_bench.kernel_bench.show import show
    from adaln_bench.reports.render import markdown as to_markdown, print_summary

    document = read_document(file)
    if isinstance(document, KernelBenchReport):
        typer.echo(show(document, file.stem), nl=False)
        return
    report = for_display(document)
    if markdown:
        typer.echo(to_markdown(report), nl=False)
    else:
        print_summary(report)
