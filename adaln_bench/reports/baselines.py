"""Which committed report is an operator's baseline for tonight's: the nightly's rule, written once.

The newest report committed at a revision directly in the operator's folder that is comparable with
tonight's (complete, full, the same GPU, shape and draws, and where possible every mode tonight measured);
failing that, RL-Kernel's prior-art report kept beside it. "Newest" is the report's `started_at`, as in
adaln_bench.reports.current.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Optional

from adaln_bench.errors import NotAReportError, UserError
from adaln_bench.reports.current import NATIVE, Facts, facts
from adaln_bench.reports.git_source import git_show
from adaln_bench.reports.git_tree import Repository
from adaln_bench.datamodel.io import parse_report
from adaln_bench.datamodel.schema import Report

H3 = "h3"  # the shape of a run that names none, as adaln_bench.reports.current names shapes
PRIOR_ART = "prior-art"  # RL-Kernel's reference report: <op>.<gpu>.prior-art.json in the operator's folder


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
