"""`adaln-bench summary [RESULTS_DIR] [--check]`: write or check RESULTS_DIR/README.md (reports/summary.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import typer

from adaln_bench.errors import UserError

EXIT_DIFFERS = 1


def summary_command(
    results: Path = typer.Argument(Path("results"), metavar="RESULTS_DIR",
                                   help="The results folder: results/<gpu>/<op>/ and results/<gpu>/history/<op>/."),
    check: bool = typer.Option(False, "--check", help="Write nothing; exit 1 when RESULTS_DIR/README.md differs "
                               "from what the reports give."),
) -> None:
    """Write RESULTS_DIR/README.md: per operator and GPU, each candidate under each mode with its verdict,
    device-time ratio and worst error, from the reports that are current (docs/results.md says which).

    Exit codes: 0 written (with --check: the file is current); 1 with --check when the file differs; 2 bad input (no
    such folder, no reports in it).
    """
    from adaln_bench.datamodel.io import write_text_atomic
    from adaln_bench.reports.summary import summary_markdown

    if not results.is_dir():
        raise UserError(f"{results}: no such directory")
    text = summary_markdown(results)
    if text.count("\n## ") == 0:
        raise UserError(f"{results}: no current reports found (searched for *.json)")
    out = results / "README.md"
    if check:
        try:
            committed = out.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            committed = None
        if committed != text:
            print(f"adaln-bench: {out} is not what the reports give: run `adaln-bench summary {results}`",
                  file=sys.stderr)
            sys.exit(EXIT_DIFFERS)
        typer.echo(f"{out} is current")
        return
    write_text_atomic(text, out)
    typer.echo(f"wrote {out}")
