"""`adaln-bench compare`: tonight's reports against the committed baselines, one diff per operator.

What the nightly workflow does after its run, as a command anyone can run: each operator's baseline is chosen
by adaln_bench.reports.baselines; each operator is diffed with the diff engine (adaln_bench.reports.diff), so
its verdicts and exit codes are `adaln-bench diff`'s, and its Markdown and JSON are what `diff --markdown` and
`--json` print; the command's exit code is the worst of them.
"""
from __future__ import annotations

import json
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from adaln_bench.errors import UserError
from adaln_bench.reports.baselines import Baseline, Request, choose_baseline, parse_request
from adaln_bench.reports.current import Facts, facts, read_if_report
from adaln_bench.reports.diff import EXIT_BAD_INPUT, EXIT_NOT_COMPARABLE, EXIT_OK, EXIT_REGRESSION, FailOn, \
    diff_reports, exit_code
from adaln_bench.reports.diff_render import diff_to_json, render_markdown, render_rich
from adaln_bench.reports.git_source import load_report
from adaln_bench.reports.git_tree import Repository
from adaln_bench.datamodel.io import read_report
from adaln_bench.reports.thresholds import Thresholds

RUNS = "runs"  # the run index's folder beside the operators' folders: not a report

# Which exit code wins when operators disagree: unreadable input hides everything else, a report that cannot be
# compared hides a regression, a regression hides a pass.
SEVERITY = (EXIT_BAD_INPUT, EXIT_NOT_COMPARABLE, EXIT_REGRESSION, EXIT_OK)


def worst(codes: Iterable[int]) -> int:
    """The exit code that wins; a code diff never gives (a crash) counts as unreadable input."""
    codes = [c if c in SEVERITY else EXIT_BAD_INPUT for c in codes]
    return min(codes, key=SEVERITY.index, default=EXIT_OK)


# --- tonight's reports ------------------------------------------------------------------------------------


def tonight_folders(night: Path, ops: Iterable[str]) -> list[tuple[str, list[Path]]]:
    """Each operator folder of tonight's run that holds a report, with its *.json files: the known operators
    in their pipeline order, then any other folder by name; the run index's folder is not an operator."""
    if not night.is_dir():
        return []
    found = {d.name: sorted(p for p in d.glob("*.json") if p.is_file())
             for d in night.iterdir() if d.is_dir() and d.name != RUNS}
    ops = list(ops)
    order = [op for op in ops if op in found] + sorted(name for name in found if name not in ops)
    return [(op, found[op]) for op in order if found[op]]


def _tonight_facts(paths: list[Path]) -> Optional[Facts]:
    if len(paths) != 1:
        return None
    report = read_if_report(paths[0])
    return facts(paths[0], report) if report is not None else None


# --- one operator's diff ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    op: str
    code: int
    markdown: str
    document: dict


def diff_operator(op: str, reports: list[Path], baseline: Baseline, thresholds: Thresholds) -> Outcome:
    """Tonight's report of one operator against its baseline: the Markdown and JSON `adaln-bench diff` would
    write, and its exit code; the rich table goes to the log."""
    if len(reports) != 1:
        text = f"**{len(reports)} reports of {op} tonight, expected one**: {' '.join(map(str, reports))}"
        return Outcome(op, EXIT_BAD_INPUT, text + "\n", _failure(op, baseline, EXIT_BAD_INPUT, text))
    if baseline.ref is None:
        return Outcome(op, EXIT_OK, f"No baseline for {op}: tonight's report is not diffed.\n",
                       {"operator": op, "baseline": None})
    new = str(reports[0])
    try:
        old_report = baseline.report or load_report(baseline.ref)
        new_report = read_report(reports[0])
    except UserError as exc:
        text = f"**adaln-bench diff could not read its input (exit {EXIT_BAD_INPUT})**: {exc}"
        return Outcome(op, EXIT_BAD_INPUT, text + "\n", _failure(op, baseline, EXIT_BAD_INPUT, str(exc)))
    try:
        result = diff_reports(old_report, new_report, thresholds)
        code = exit_code(result, FailOn.regression)
        sides = {"OLD": (baseline.ref, old_report), "NEW": (new, new_report)}
        markdown = render_markdown(result, sides, FailOn.regression, code, False)
        document = diff_to_json(result, sides, FailOn.regression, code)
        render_rich(result, sides, FailOn.regression, code, False)
    except Exception as exc:  # noqa: BLE001  one operator's failure must not hide the others' verdicts
        traceback.print_exc()
        text = f"**adaln-bench diff failed ({type(exc).__name__}: {exc})**: see the log."
        return Outcome(op, EXIT_BAD_INPUT, text + "\n", _failure(op, baseline, EXIT_BAD_INPUT, text))
    return Outcome(op, code, markdown, document)


def _failure(op: str, baseline: Baseline, code: int, error: str) -> dict:
    return {"operator": op, "baseline": baseline.ref, "exit_code": code, "error": error}


# --- the whole comparison ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outputs:
    """Where the comparison writes: `diffs/<op>.md` and `diffs/<op>.json` per operator (`diffs/none.md` when
    tonight has no report), the baselines file, and a summary that each operator's Markdown is appended to."""

    diffs: Path
    baselines: Path
    summary: Optional[Path] = None


def _append(path: Optional[Path], text: str) -> None:
    if path is not None:
        with path.open("a", encoding="utf-8") as f:
            f.write(text)


def default_results(repo: Repository, tonight: Iterable[Optional[Facts]], night: Path) -> str:
    """The committed results of tonight's GPU, results/<gpu>/ at the repository's root (a path from the current
    directory); results/<night folder's name>/ when no report of tonight says which GPU."""
    gpu = next((f.gpu for f in tonight if f is not None), night.resolve().name)
    return os.path.relpath(repo.root / "results" / gpu)


def compare_night(night: Path, rev: str, results: Optional[str], baseline: str, ops: list[str], named_op: str,
                  outputs: Outputs, thresholds: Thresholds = Thresholds()) -> int:
    """The command: where to look (`parse_request`), then `compare`."""
    repo = Repository.here()
    if results is None:
        results = default_results(repo, (_tonight_facts(p) for _, p in tonight_folders(night, ops)), night)
    request = parse_request(repo, rev, results, baseline, named_op)
    return compare(night, request, repo, ops, outputs, thresholds)


def compare(night: Path, request: Request, repo: Repository, ops: list[str], outputs: Outputs,
            thresholds: Thresholds = Thresholds()) -> int:
    """Choose each operator's baseline, diff tonight's report of each against it, write the outputs; the worst
    exit code. Every operator in `ops` (and any other tonight) gets a line in the baselines file."""
    folders = tonight_folders(night, ops)
    tonight = {op: _tonight_facts(paths) for op, paths in folders}
    every_op = list(ops) + [op for op in tonight if op not in ops]
    baselines = {op: choose_baseline(repo, request, op, tonight.get(op)) for op in every_op}
    outputs.diffs.mkdir(parents=True, exist_ok=True)
    outputs.baselines.parent.mkdir(parents=True, exist_ok=True)
    outputs.baselines.write_text("".join(b.line() + "\n" for b in baselines.values()), encoding="utf-8")
    for b in baselines.values():
        print(f"{b.op}: {b.ref or 'no baseline'}")
    sys.stdout.flush()
    if not folders:
        text = f"**No report tonight under {night}/: nothing to diff (exit {EXIT_BAD_INPUT}).**\n"
        (outputs.diffs / "none.md").write_text(text, encoding="utf-8")
        _append(outputs.summary, text)
        print(text, end="")
        return EXIT_BAD_INPUT
    codes = []
    for op, paths in folders:
        outcome = diff_operator(op, paths, baselines[op], thresholds)
        (outputs.diffs / f"{op}.md").write_text(outcome.markdown, encoding="utf-8")
        (outputs.diffs / f"{op}.json").write_text(json.dumps(outcome.document, indent=2, allow_nan=False) + "\n",
                                                 encoding="utf-8")
        _append(outputs.summary, f"## {op}\n\n{outcome.markdown}\n")
        print(f"{op}: exit {outcome.code} against {baselines[op].ref or 'no baseline'}")
        sys.stdout.flush()
        codes.append(outcome.code)
    return worst(codes)
