"""`adaln-bench compare`: tonight's reports against the committed baselines, one diff per operator.

What the nightly workflow does after its run, as a command anyone can run: for each operator, the baseline is
the newest committed report at a git revision that is comparable with tonight's (complete, full, the same
draws, shape and GPU, and where possible every mode tonight measured), read with `git show REV:path` so that
the working tree may be at any commit; failing that, RL-Kernel's prior-art report kept beside it. Each
operator is diffed with the diff engine (adaln_bench.reports.diff), so its verdicts and exit codes are
`adaln-bench diff`'s; the command's exit code is the worst of them.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Iterable, Optional

from adaln_bench.errors import NotAReportError, UserError
from adaln_bench.reports.current import NATIVE, Facts, facts, read_if_report
from adaln_bench.reports.diff import EXIT_BAD_INPUT, EXIT_NOT_COMPARABLE, EXIT_OK, EXIT_REGRESSION, FailOn, \
    diff_reports, exit_code
from adaln_bench.reports.diff_render import diff_to_json, render_markdown, render_rich
from adaln_bench.reports.git_source import git_show, load_report
from adaln_bench.reports.io import parse_report, read_report
from adaln_bench.reports.schema import Report
from adaln_bench.reports.thresholds import Thresholds

RUNS = "runs"  # the run index's folder beside the operators' folders: not a report
H3 = "h3"  # the shape of a run that names none, as adaln_bench.reports.current names shapes
PRIOR_ART = "prior-art"  # RL-Kernel's reference report: <op>.<gpu>.prior-art.json in the operator's folder

# Which exit code wins when operators disagree: unreadable input hides everything else, a report that cannot be
# compared hides a regression, a regression hides a pass.
SEVERITY = (EXIT_BAD_INPUT, EXIT_NOT_COMPARABLE, EXIT_REGRESSION, EXIT_OK)


def worst(codes: Iterable[int]) -> int:
    """The exit code that wins; a code diff never gives (a crash) counts as unreadable input."""
    codes = [c if c in SEVERITY else EXIT_BAD_INPUT for c in codes]
    return min(codes, key=SEVERITY.index, default=EXIT_OK)


# --- git ------------------------------------------------------------------------------------------------


def _git(args: list[str], cwd: Path) -> Optional[str]:
    """git's stdout, or None when it fails (an unknown revision or path)."""
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=60, check=False)
    except FileNotFoundError:
        raise UserError("compare reads the baselines from git, and the git command is not installed") from None
    except subprocess.TimeoutExpired:
        raise UserError(f"git {' '.join(args)} did not answer within 60 s") from None
    return proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else None


@dataclass(frozen=True)
class Repository:
    """The git checkout around the current directory: paths given on the command line are made git's (from
    the repository's root), so that `REV:path` names the same folder from any subdirectory."""

    root: Path
    prefix: str  # the current directory inside the repository, "" at its root

    @classmethod
    def here(cls) -> "Repository":
        top = _git(["rev-parse", "--show-toplevel"], Path.cwd())
        if top is None:
            raise UserError("compare reads the baselines from git: run it inside the repository")
        prefix = _git(["rev-parse", "--show-prefix"], Path.cwd()) or ""
        return cls(Path(top.strip()), prefix.strip())

    def git_path(self, path: str) -> str:
        if os.path.isabs(path):
            joined = os.path.relpath(Path(path).resolve(), self.root.resolve()).replace(os.sep, "/")
        else:
            joined = os.path.normpath(os.path.join(self.prefix, path)).replace(os.sep, "/")
        if joined.startswith("../") or joined == "..":
            raise UserError(f"{path}: outside the repository")
        return "" if joined == "." else joined

    def commit(self, rev: str) -> str:
        if rev.startswith("-") or _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], self.root) is None:
            raise UserError(f"{rev}: not a revision of this repository")
        return rev

    def is_tree(self, spec: str) -> bool:
        return (_git(["cat-file", "-t", spec], self.root) or "").strip() == "tree"

    def exists(self, rev: str, path: str) -> bool:
        return _git(["cat-file", "-e", f"{rev}:{path}"], self.root) is not None

    def files_in(self, rev: str, folder: str) -> list[str]:
        """The files committed directly in a folder at a revision (not in its subfolders), git paths."""
        out = _git(["ls-tree", "-z", "--full-tree", rev, "--", f"{folder}/"], self.root) or ""
        files = []
        for entry in filter(None, out.split("\0")):
            meta, _, path = entry.partition("\t")
            if meta.split()[1:2] == ["blob"]:
                files.append(path)
        return sorted(files)


# --- the baselines ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Baseline:
    """One operator's baseline: `ref` is what `adaln-bench diff` reads (REV:path, or a report as the user
    named it); None when the operator has none. `report` holds it where choosing it already read it."""

    op: str
    ref: Optional[str]
    report: Optional[Report] = None

    def line(self) -> str:
        """Its line in the baselines file: "<op> <ref>", or "<op>" alone."""
        return self.op if self.ref is None else f"{self.op} {self.ref}"


@dataclass(frozen=True)
class Request:
    """Where the baselines are looked for: each operator's folder `folder/<op>/` at `rev`, and optionally one
    report named for the compatibility operator (the nightly's `baseline` input of one report)."""

    rev: str
    folder: str
    named_op: Optional[str] = None
    named: Optional[str] = None


def parse_request(repo: Repository, rev: str, results: str, baseline: str, named_op: str) -> Request:
    """The nightly's `baseline` input: empty (every operator from `results` at `rev`), REV:dir (from dir/<op>/
    at REV), or any other text: one report, the baseline of `named_op` (the others as usual). `results` is a
    path from the current directory."""
    if baseline and ":" in baseline and repo.is_tree(baseline):
        req_rev, _, folder = baseline.partition(":")
        return Request(repo.commit(req_rev), folder.strip("/"))
    folder = repo.git_path(results)
    if not folder:
        raise UserError(f"{results}: name the committed results of one GPU (for example results/b200)")
    return Request(repo.commit(rev), folder, named_op if baseline else None, baseline or None)


def _report_from_text(text: str, name: str) -> Optional[Report]:
    """The report in a committed file's text, or None when it is not one (a kernel-bench output, say)."""
    try:
        head = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(head, dict) or "results" not in head or "environment" not in head:
        return None
    try:
        return parse_report(text, name)
    except (NotAReportError, UserError):
        return None


def comparable(candidate: Facts, tonight: Optional[Facts]) -> bool:
    """Could this committed report be tonight's baseline at all: complete, full (a run of tonight's kind where
    tonight's is not: accuracy-only against accuracy-only), and the same GPU, shape and draws; without a report
    of tonight, a full one drawn as on its GPU."""
    if not candidate.complete:
        return False
    if tonight is None:
        return candidate.full and candidate.draws == NATIVE
    return ((candidate.full, candidate.accuracy_only, candidate.gpu, candidate.shape, candidate.draws)
            == (tonight.full, tonight.accuracy_only, tonight.gpu, tonight.shape, tonight.draws))


def rank(candidate: Facts, tonight: Optional[Facts]) -> tuple:
    """Higher is better: a report that measured every mode tonight did, else one that shares a mode with it,
    then the newest (its `started_at`, the name breaking a tie). Without a report of tonight, one at the
    model's shape (H3, what a plain run measures) first."""
    modes, theirs = set(tonight.modes) if tonight else set(), set(candidate.modes)
    shape = tonight.shape if tonight else H3
    return (candidate.shape == shape, modes <= theirs, bool(modes & theirs), candidate.started_at,
            candidate.path.name)


def prior_art_path(folder: str, op: str) -> str:
    return f"{folder}/{op}/{op}.{PurePosixPath(folder).name}.{PRIOR_ART}.json"


def choose_baseline(repo: Repository, request: Request, op: str, tonight: Optional[Facts]) -> Baseline:
    if request.named is not None and op == request.named_op:
        return Baseline(op, request.named)  # as named, even when it cannot be read: the diff says so
    reference = prior_art_path(request.folder, op)
    best: Optional[tuple[tuple, Report, str]] = None
    for path in repo.files_in(request.rev, f"{request.folder}/{op}"):
        if not path.endswith(".json") or path == reference:
            continue
        spec = f"{request.rev}:{path}"
        try:
            report = _report_from_text(git_show(request.rev, path, repo.root), spec)
        except UserError:
            continue  # unreadable at that revision: not a baseline
        if report is None or report.op != op:
            continue
        found = facts(Path(path), report)
        if comparable(found, tonight):
            key = rank(found, tonight)
            if best is None or key > best[0]:
                best = (key, report, spec)
    if best is not None:
        return Baseline(op, best[2], best[1])
    if repo.exists(request.rev, reference):
        return Baseline(op, f"{request.rev}:{reference}")
    return Baseline(op, None)


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
