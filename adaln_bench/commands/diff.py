"""`adaln-bench diff OLD NEW`: verdicts between two reports, as a rich table, Markdown or JSON.

Argument handling only: the verdicts come from the engine in adaln_bench.reports.diff and are presented by
adaln_bench.reports.diff_render; this module reads the two reports, resolves the thresholds, and turns the
result into the exit code.
"""
from __future__ import annotations

import json
import math
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from adaln_bench.errors import UserError
from adaln_bench.reports.diff import FailOn, diff_reports, exit_code
from adaln_bench.reports.diff_render import diff_to_json, render_markdown, render_rich
from adaln_bench.reports.display import for_display
from adaln_bench.reports.git_source import load_document
from adaln_bench.datamodel.kernel_bench import KernelBenchReport
from adaln_bench.reports.thresholds import resolve_thresholds

# Paragraphs are single lines: typer reflows them to the terminal's width.
class LatencyBasis(str, Enum):
    device = "device"
    events = "events"


HELP = (
    "Compare two reports and give a verdict per mode, candidate and metric.\n\n"
    "OLD and NEW are each a report file or REV:path read from git in the current repository "
    "(for example main:results/b200/nightly.json or HEAD~1:./report.json).\n\n"
    "Verdicts: SAME, BETTER, WORSE, AMBIGUOUS (changed, but within the noise or in no clear direction), "
    "MISSING (a result that is gone), NEW. WORSE and MISSING are regressions. Losing batch invariance is a "
    "regression whatever else changed. A latency is WORSE or BETTER only when the medians differ by more than "
    "the threshold and the change is significant: on device time (CUDA-graph replay, every sample of every "
    "process) by a Mann-Whitney U test at --latency-alpha; where a side has no device time, on the event medians "
    "with interquartile ranges apart.\n\n"
    "Exit codes: 0 no regression; 1 regression (or any change, with --fail-on any-change); "
    "2 bad input (unreadable file, not a report, bad REV:path, bad thresholds); "
    "3 not comparable (different GPUs, one quick and one full report, different shapes, reports that measured "
    "different things or drew other inputs, no mode in common). Only the modes both reports have are compared; "
    "an incomplete report is said first, and what it lacks is not a regression. Two kernel-bench outputs are "
    "compared by each candidate's ratio to the stock path per size (--latency-threshold the change that counts). "
    "See docs/diff.md.\n"
)

def json_safe(value: object) -> object:
    """`value` with every non-finite number as null: JSON has no inf or NaN, and a change against an error of
    5e-324 overflows."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def diff_command(
    old: str = typer.Argument(..., metavar="OLD", help="Report file or REV:path (the baseline)."),
    new: str = typer.Argument(..., metavar="NEW", help="Report file or REV:path (the candidate)."),
    latency_threshold: Optional[float] = typer.Option(
        None, "--latency-threshold", help="Relative change of a median latency that may count (default 0.05)."),
    accuracy_threshold: Optional[float] = typer.Option(
        None, "--accuracy-threshold", help="Relative change of an error against FP64 that counts (default 0.10)."),
    accuracy_floor: Optional[float] = typer.Option(
        None, "--accuracy-floor", help="Absolute change of an error below which it never counts (default 1e-05)."),
    latency_alpha: Optional[float] = typer.Option(
        None, "--latency-alpha", help="Significance a device-time change needs (Mann-Whitney U; default 0.002)."),
    latency_basis: LatencyBasis = typer.Option(
        LatencyBasis.device, "--latency-basis", case_sensitive=False,
        help="What gates latency: device time where both sides have it (else event medians), or events."),
    thresholds_file: Optional[Path] = typer.Option(
        None, "--thresholds", metavar="FILE",
        help="TOML file with latency_threshold, latency_alpha, accuracy_threshold, accuracy_floor; options "
             "override it."),
    fail_on: FailOn = typer.Option(
        FailOn.regression, "--fail-on", case_sensitive=False,
        help="Exit 1 on a regression, on any verdict other than SAME, or never."),
    allow_different_device: bool = typer.Option(
        False, "--allow-different-device", help="Compare reports from different GPUs (or CPU and GPU)."),
    allow_quick_mismatch: bool = typer.Option(
        False, "--allow-quick-mismatch",
        help="Compare a quick report with a full one: invariance verdicts and the common T only."),
    show_all: bool = typer.Option(False, "--all", help="List SAME rows too, not only the changes."),
    markdown: bool = typer.Option(False, "--markdown", help="Markdown on stdout, for a PR comment or a CI summary."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document on stdout, nothing else."),
) -> None:
    if markdown and as_json:
        raise UserError("--markdown and --json are exclusive: choose one output")
    thresholds = resolve_thresholds(thresholds_file, latency_threshold, accuracy_threshold, accuracy_floor,
                                    latency_alpha)
    old_doc, new_doc = load_document(old), load_document(new)
    if isinstance(old_doc, KernelBenchReport) or isinstance(new_doc, KernelBenchReport):
        _diff_kernel_bench(old, new, old_doc, new_doc, latency_threshold, thresholds.latency, fail_on,
                           allow_different_device, show_all, markdown, as_json)
        return
    old_report, new_report = for_display(old_doc), for_display(new_doc)
    result = diff_reports(old_report, new_report, thresholds, allow_different_device, allow_quick_mismatch,
                          latency_basis.value)
    code = exit_code(result, fail_on)
    sides = {"OLD": (old, old_report), "NEW": (new, new_report)}
    if as_json:
        document = json_safe(diff_to_json(result, sides, fail_on, code))
        sys.stdout.write(json.dumps(document, indent=2, allow_nan=False) + "\n")
    elif markdown:
        sys.stdout.write(render_markdown(result, sides, fail_on, code, show_all))
    else:
        render_rich(result, sides, fail_on, code, show_all)
    if code:
        # SystemExit rather than typer.Exit: under standalone_mode=False click turns typer.Exit into a return
        # value, which a caller may drop; the exit code is this command's whole answer in CI.
        sys.exit(code)


def _diff_kernel_bench(old: str, new: str, old_doc, new_doc, given: Optional[float], threshold: float,
                       fail_on: FailOn, allow_different_device: bool, show_all: bool, markdown: bool,
                       as_json: bool) -> None:
    """Two kernel-bench outputs: per-size ratio rows (kernel_bench/show.py)."""
    from adaln_bench.reports.display import clip
    from adaln_bench.kernel_bench import show as kb

    if not (isinstance(old_doc, KernelBenchReport) and isinstance(new_doc, KernelBenchReport)):
        typer.echo("adaln-bench: not comparable: a kernel-bench output compares only with another kernel-bench "
                   "output", err=True)
        sys.exit(3)
    result = kb.diff_kernel_bench(old_doc, new_doc, given if given is not None else threshold,
                                  allow_different_device)
    code = kb.exit_code(result, fail_on.value)
    if as_json:
        sys.stdout.write(json.dumps(json_safe(kb.to_json(result, old, new, code)), indent=2, allow_nan=False) + "\n")
    else:
        text = kb.to_markdown(result, old, new, code, show_all)
        sys.stdout.write(clip(text, len(text)))
    if code:
        sys.exit(code)


diff_command.__doc__ = HELP
