"""`adaln-bench compare NIGHT_DIR --out DIR`: the nightly's comparison (reports/compare.py) as a command.

Argument handling only: which baseline each operator gets, the diffs and the exit code come from
adaln_bench.reports.compare.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

HELP = (
    "Diff each operator's report in NIGHT_DIR (an `adaln-bench run --out` folder: NIGHT_DIR/<op>/*.json) "
    "against its baseline, the way the nightly workflow does.\n\n"
    "Each operator's baseline is the newest report committed at REV directly in RESULTS/<op>/ that is "
    "comparable with tonight's: complete (never *.incomplete.json), full (or of tonight's kind: accuracy-only "
    "against accuracy-only), the same GPU, shape and draws, and where possible one that measured every mode "
    "tonight's did; newest by its started_at; read with git show, so the working tree may "
    "be at any commit. Without one, RL-Kernel's prior-art report RESULTS/<op>/<op>.<gpu>.prior-art.json; "
    "with neither, the operator is not diffed (which fails nothing).\n\n"
    "Writes OUT/<op>.md and OUT/<op>.json (what `adaln-bench diff --markdown` and `--json` print; "
    "OUT/none.md when NIGHT_DIR holds no report), the baselines file (one line per operator: "
    "\"<op> <REV:path>\", or \"<op>\" for none), and appends each operator's Markdown to --summary.\n\n"
    "Exit codes: the worst of the operators' `adaln-bench diff` codes, 2 (unreadable input, two reports of "
    "one operator, no report at all) before 3 (not comparable) before 1 (regression) before 0. "
    "See docs/diff.md.\n"
)


def compare_command(
    night: Path = typer.Argument(..., metavar="NIGHT_DIR", help="Tonight's reports: NIGHT_DIR/<op>/*.json."),
    out: Path = typer.Option(..., "--out", metavar="DIR", help="Where each operator's diff goes (DIR/<op>.md, "
                             "DIR/<op>.json)."),
    rev: str = typer.Option("HEAD", "--rev", metavar="REV", help="The revision the baselines are read at."),
    results: Optional[str] = typer.Option(
        None, "--results", metavar="DIR",
        help="The committed results of tonight's GPU (default: results/<gpu>/ of tonight's reports)."),
    baseline: str = typer.Option(
        "", "--baseline", metavar="SPEC",
        help="REV:dir: every operator's baseline from dir/<op>/ at REV. Any other text: one report (a file or "
             "REV:path), the projection's baseline, as the nightly's input has always meant; the others as usual."),
    baselines_file: Optional[Path] = typer.Option(
        None, "--baselines", metavar="FILE", help="The baselines file (default: DIR/baselines.txt)."),
    summary: Optional[Path] = typer.Option(
        None, "--summary", metavar="FILE", help="A file each operator's Markdown is appended to (a CI summary)."),
    thresholds_file: Optional[Path] = typer.Option(
        None, "--thresholds", metavar="FILE", help="TOML thresholds, as `adaln-bench diff --thresholds` reads."),
) -> None:
    from adaln_bench.ops.compat import LEGACY_OPERATOR
    from adaln_bench.ops.registry import all_operators
    from adaln_bench.reports.compare import Outputs, compare_night
    from adaln_bench.reports.thresholds import resolve_thresholds

    thresholds = resolve_thresholds(thresholds_file)
    outputs = Outputs(out, baselines_file or out / "baselines.txt", summary)
    code = compare_night(night, rev, results, baseline, list(all_operators()), LEGACY_OPERATOR, outputs, thresholds)
    if code:
        sys.exit(code)  # not typer.Exit: see commands/diff.py


compare_command.__doc__ = HELP
