"""`adaln-bench plot REPORT… [--out PNG]`: latency, accuracy and invariance of one to four reports, one PNG."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from adaln_bench.errors import UserError
from adaln_bench.reports.display import for_display
from adaln_bench.reports.git_source import load_report, parse_source
from adaln_bench.reports.plot import MAX_REPORTS, plot_reports, require_matplotlib


def plot_command(
    reports: List[str] = typer.Argument(
        ..., metavar="REPORT...", help=f"1 to {MAX_REPORTS} report files or REV:path; each gets its own line style."),
    out: Optional[Path] = typer.Option(
        None, "--out", metavar="PNG", help="Where to write the PNG (default: the first report's name with .png, "
        "in the current directory)."),
) -> None:
    """Plot forward and forward + backward latency and the errors against FP64 against T, per (mode, candidate),
    and a matrix of the batch-invariance probes. Two reports overlay, told apart by line style.

    Needs matplotlib: pip install 'adaln-bench[plot]'. Exit codes: 0 written; 2 bad input or no matplotlib.
    """
    require_matplotlib()  # before reading anything: the one line that says what to install
    if len(reports) > MAX_REPORTS:
        raise UserError(f"plot takes at most {MAX_REPORTS} reports, not {len(reports)}")
    loaded = [(text, for_display(load_report(text))) for text in reports]
    target = out if out is not None else Path(Path(parse_source(reports[0]).path).stem + ".png")
    if target.suffix.lower() != ".png":
        raise UserError(f"{target}: --out must name a .png file")
    if target.is_dir():
        raise UserError(f"{target}: is a directory; --out takes a file path")
    written = plot_reports(loaded, target)
    typer.echo(f"wrote {written}")
