"""Which files under results/ are the current answer: the layout's one rule, used by every command that picks.

`results/<gpu>/<op>/` holds what is current for one operator on one GPU:
- for each shape and each mode, the newest complete full report that measured that mode (full: not quick,
  not `--latency-only`, not `--accuracy-only`; complete: neither named `*.incomplete.json` nor marked
  `incomplete`);
- for each shape and each other draw geometry (`--draw-geometry`), the newest accuracy report made with it;
- the newest `adaln-bench kernel-bench` output that measured only this operator (`kernel_bench.*`), and the
  `adaln-bench fidelity` outputs (`fidelity.*.md`) of the reports that are current.
A kernel-bench output that measured several operators at once is current in `results/<gpu>/kernel_bench/`.
Everything older that the dashboard's series and `diff` still read is history, in one place per GPU:
`results/<gpu>/history/<op>/`, each file named by the commit that made it.
`results/<gpu>/evidence/<topic>/<commit>/` holds what backs a claim of the docs (reports, run indexes, diff
outputs, a README.md saying what was run): never an answer, never history, read by no command that picks.

"Newest" is what the files record, never their mtimes: a report's `started_at`, a kernel-bench output's
commit (ordered by its date in git). The reader of a report is passed in (`read`), so that this module holds
the rule and not the loading.
"""
from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional

from adaln_bench.reports.naming import is_incomplete_file
from adaln_bench.datamodel.schema import CandidateResult, Report

HISTORY = "history"
EVIDENCE = "evidence"  # results/<gpu>/evidence/: reports kept as evidence, outside the rule
RUNS = "runs"  # results/<gpu>/runs/: the run indexes of the current reports
KERNEL_BENCH = "kernel_bench"  # the file prefix of kernel-bench outputs, and the folder of multi-op ones
FIDELITY = "fidelity"  # the file prefix of fidelity outputs
NATIVE = "native"  # the draw geometry of a report drawn as on the GPU that ran it


def is_incomplete(path: Path, report: Optional[Report] = None) -> bool:
    """A run that was interrupted or failed: never a current answer, whatever else it holds."""
    return is_incomplete_file(path) or bool(report is not None and report.incomplete)


def gpu_slug(gpu_name: Optional[str]) -> str:
    """The folder of a GPU ("NVIDIA H200" -> "h200"), as `adaln-bench run` names it; "cpu" without one."""
    for token in (gpu_name or "").replace("-", " ").split():
        t = token.lower()
        if any(c.isdigit() for c in t) and t[0].isalpha():
            return t
    return "cpu" if not gpu_name else "gpu"


@dataclass(frozen=True)
class Facts:
    """What the rule reads from one report."""

    path: Path
    op: str
    gpu: str
    shape: str
    modes: tuple[str, ...]
    started_at: str  # ISO 8601 in UTC, so its text sorts as its time; "" when not recorded
    complete: bool
    full: bool
    accuracy_only: bool
    draws: str


def _measured(report: Report) -> list[CandidateResult]:
    return [e for cands in report.results.values() for e in cands.values() if isinstance(e, CandidateResult)]


def _has_latency(entry: CandidateResult) -> bool:
    return any(p.fwd_us is not None or p.fwd_bwd_us is not None for p in entry.accuracy_latency.values())


def _has_errors(entry: CandidateResult) -> bool:
    return any(p.fwd_rel_err is not None for p in entry.accuracy_latency.values())


def measured_modes(report: Report) -> tuple[str, ...]:
    """The modes a report has a result in: a mode whose every candidate was unavailable (its framework not
    installed, say) answers nothing."""
    return tuple(m for m, cands in report.results.items() if any(isinstance(e, CandidateResult) for e in cands.values()))


def facts(path: Path, report: Report) -> Facts:
    argv = report.tool.argv if report.tool is not None else []
    measured = _measured(report)
    # Read from argv where the report records it; from what was measured where it does not (older reports).
    latency_only = "--latency-only" in argv or (not argv and bool(measured) and all(
        e.batch_invariance is None and not _has_errors(e) for e in measured))
    accuracy_only = "--accuracy-only" in argv or (not argv and bool(measured) and all(
        e.batch_invariance is None and not _has_latency(e) for e in measured))
    shape = "h3"
    if report.shape is not None:
        shape = report.shape.preset or "-".join(f"{k}{v}" for k, v in sorted(report.shape.sizes().items()))
    draws = report.draw_geometry.name.lower() if report.draw_geometry is not None else NATIVE
    return Facts(path=path, op=report.op, gpu=gpu_slug(report.environment.gpu), shape=shape,
                 modes=measured_modes(report), started_at=report.started_at or "",
                 complete=not is_incomplete(path, report), full=not (report.quick or latency_only or accuracy_only),
                 accuracy_only=accuracy_only and not report.quick, draws=draws)


def _newest(candidates: list[Facts]) -> Facts:
    # The file name breaks a tie of two reports started in the same second (or neither recording when).
    return max(candidates, key=lambda f: (f.started_at, f.path.name))


def answers(all_facts: Iterable[Facts]) -> dict[tuple[str, str, str, str, str], Facts]:
    """The current report of each question: (GPU, operator, shape, "mode", a mode) -> the newest complete full
    report that measured the mode; (GPU, operator, shape, "draws", a draw geometry) -> the newest accuracy
    report with those draws."""
    groups: dict[tuple[str, str, str, str, str], list[Facts]] = {}
    for f in all_facts:
        if not f.complete:
            continue
        if f.full and f.draws == NATIVE:
            for mode in f.modes:
                groups.setdefault((f.gpu, f.op, f.shape, "mode", mode), []).append(f)
        elif f.accuracy_only and f.draws != NATIVE:
            groups.setdefault((f.gpu, f.op, f.shape, "draws", f.draws), []).append(f)
    return {key: _newest(group) for key, group in groups.items()}


def current_of(all_facts: Iterable[Facts]) -> list[Facts]:
    """The current reports among these, each once, in the order given."""
    all_facts = list(all_facts)
    chosen = {f.path for f in answers(all_facts).values()}
    return [f for f in all_facts if f.path in chosen]


def primary(all_facts: Iterable[Facts], mode_order: Iterable[str]) -> list[Facts]:
    """One current report per GPU and operator, for a command that compares one report per operator
    (`fidelity` on folders): at the H3 shape where there is one, the report that answers the first mode in
    `mode_order` it has an answer for (plain, where measured), with native draws."""
    order = {m: i for i, m in enumerate(mode_order)}
    best: dict[tuple[str, str], tuple[tuple, Facts]] = {}
    for (gpu, op, shape, kind, mode), f in answers(all_facts).items():
        if kind != "mode":
            continue
        rank = (shape != "h3", shape, order.get(mode, len(order)), mode)
        if (gpu, op) not in best or rank < best[(gpu, op)][0]:
            best[(gpu, op)] = (rank, f)
    return [best[key][1] for key in sorted(best)]


def primary_reports(folder: Path) -> list[Path]:
    """`primary` of the reports under a folder, by the modes' registry order."""
    from adaln_bench.modes.registry import all_modes

    return [f.path for f in primary(read_facts([folder], read_if_report), all_modes())]


def in_evidence(path: Path, root: Path) -> bool:
    """True for a file found under `root` inside an evidence folder (results/<gpu>/evidence/)."""
    return EVIDENCE in path.relative_to(root).parts[:-1]


def in_local_runs(path: Path, root: Path) -> bool:
    """True for a file under `root`/cpu/: where `adaln-bench run` writes without a GPU (git-ignored). A local
    smoke run is never part of the committed answer, so a results folder scanned whole leaves it out."""
    return path.relative_to(root).parts[0] == gpu_slug(None)


def report_paths(paths: Iterable[Path]) -> list[Path]:
    """Every *.json under each folder (recursively, in name order, evidence folders and local CPU runs left out)
    and each file as given."""
    found: dict[Path, None] = {}
    for p in paths:
        p = Path(p)
        for f in (sorted(p.rglob("*.json")) if p.is_dir() else [p]):
            if not (p.is_dir() and (in_evidence(f, p) or in_local_runs(f, p))):
                found[f] = None
    return list(found)


def read_facts(paths: Iterable[Path], read: Callable[[Path], Optional[Report]]) -> list[Facts]:
    """Facts of each report among the files; `read` gives None for a file that is not a report."""
    out = []
    for path in report_paths(paths):
        report = read(path)
        if report is not None:
            out.append(facts(path, report))
    return out


def current_reports(folder: Path, read: Optional[Callable[[Path], Optional[Report]]] = None) -> list[Path]:
    """The current reports under a folder (results/, results/<gpu>/ or one operator's folder): the rule applied
    to every report found there, history included, so a stale report left beside the current ones is passed
    over."""
    return [f.path for f in current_of(read_facts([folder], read or read_if_report))]


def read_if_report(path: Path) -> Optional[Report]:
    """The report in a file, or None when it is not one (a run index, a kernel-bench output, anything else)."""
    from adaln_bench.errors import NotAReportError, UserError
    from adaln_bench.datamodel.io import parse_report

    try:
        text = path.read_text(encoding="utf-8")
        head = json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(head, dict) or "results" not in head or "environment" not in head:
        return None
    try:
        return parse_report(text, str(path))
    except (NotAReportError, UserError):
        return None


def where(f: Facts, current: bool) -> Path:
    """Where a report belongs under results/, relative to it."""
    return Path(f.gpu, f.op, f.path.name) if current else Path(f.gpu, HISTORY, f.op, f.path.name)


# --- kernel-bench and fidelity outputs ----------------------------------------------------------------------


def kernel_bench_ops(doc: dict) -> tuple[str, ...]:
    """The operators a kernel-bench output measured: its `sizes` keys; the projection's for the outputs made
    before kernel-bench took other operators (they record no operator)."""
    sizes = doc.get("sizes")
    from adaln_bench.ops.compat import LEGACY_OPERATOR

    return tuple(sizes) if isinstance(sizes, dict) and sizes else (LEGACY_OPERATOR,)


def commit_time(commit: Optional[str], repo: Path) -> int:
    """The commit's date in git (seconds), 0 when git does not know it: outputs are ordered by their commit."""
    if not commit:
        return 0
    try:
        out = subprocess.run(["git", "show", "-s", "--format=%ct", f"{commit}^{{commit}}"], cwd=repo,
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return 0
    text = out.stdout.strip().splitlines()
    return int(text[0]) if out.returncode == 0 and text and text[0].isdigit() else 0


def kernel_bench_gpu(doc: dict) -> str:
    device = doc.get("device")
    return gpu_slug(device.get("name") if isinstance(device, dict) else device if isinstance(device, str) else None)


def read_kernel_bench(path: Path) -> Optional[dict]:
    """A kernel-bench output's JSON, or None when the file is not one."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return doc if isinstance(doc, dict) and "combined" in doc and "per_process" in doc else None


def newest_kernel_bench(outputs: Iterable[Path], repo: Path) -> dict[tuple[str, str], Path]:
    """Per (GPU, operator), the newest kernel-bench output (its JSON) that measured it, by its commit's date."""
    best: dict[tuple[str, str], tuple[int, str, Path]] = {}
    for path in outputs:
        doc = read_kernel_bench(path)
        if doc is None:
            continue
        rank = (commit_time((doc.get("tool") or {}).get("commit"), repo), path.name, path)
        for op in kernel_bench_ops(doc):
            key = (kernel_bench_gpu(doc), op)
            if key not in best or rank[:2] > best[key][:2]:
                best[key] = rank
    return {key: rank[2] for key, rank in best.items()}


def kernel_bench_home(doc: dict) -> Path:
    """Where a current kernel-bench output belongs under results/: its operator's folder, or
    <gpu>/kernel_bench/ for one that measured several operators at once."""
    ops = kernel_bench_ops(doc)
    return Path(kernel_bench_gpu(doc), ops[0] if len(ops) == 1 else KERNEL_BENCH)


_FIDELITY_SUBJECT = re.compile(r"^Against `[^`]+` \([^)]*\), for `([^`]+)`", re.MULTILINE)


def fidelity_subjects(text: str) -> list[str]:
    """The report files a fidelity output compared with the reference (one per operator section)."""
    return _FIDELITY_SUBJECT.findall(text)


def fidelity_is_current(text: str, current_names: set[str]) -> bool:
    """A fidelity output is current while every report it compared is."""
    subjects = fidelity_subjects(text)
    return bool(subjects) and all(s in current_names for s in subjects)


def _is_run_index(path: Path) -> bool:
    from adaln_bench.reports.naming import RUN_INDEX_KIND

    if path.suffix != ".json":
        return False
    try:
        head = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(head, dict) and head.get("kind") == RUN_INDEX_KIND


def _run_index_problem(path: Path, rel: Path, current_paths: set) -> Optional[str]:
    """A run index stays while a report it wrote is current, in its GPU's runs/ folder."""
    if len(rel.parts) != 3 or rel.parts[1] != RUNS:
        return f"a run index belongs in <gpu>/{RUNS}/"
    try:
        written = json.loads(path.read_text(encoding="utf-8")).get("reports") or {}
    except (OSError, ValueError):
        return "an unreadable run index"
    targets = {(path.parent / p).resolve() for p in written.values() if isinstance(p, str)}
    if not targets & {p.resolve() for p in current_paths}:
        return "a run index of no current report"
    return None


def layout_problems(results: Path, repo: Optional[Path] = None) -> list[str]:
    """What in results/ breaks the rule: a report that is not where the rule puts it (current in its operator's
    folder, the rest in history/), a fidelity output of a report that is not current, a kernel-bench output
    that is not the newest for any operator or not in its place, or any other file. `repo`: the git checkout
    that dates kernel-bench outputs' commits (results/'s parent by default)."""
    repo = repo or results.resolve().parent
    problems = []
    all_facts = read_facts([results], read_if_report)
    current = [f for f in current_of(all_facts)]
    current_paths = {f.path for f in current}
    current_names = {f.path.name: f for f in current}
    for f in all_facts:
        rel, expected = f.path.relative_to(results), where(f, f.path in current_paths)
        if rel != expected:
            problems.append(f"{rel}: belongs at {expected}")
    newest = set(newest_kernel_bench(sorted(results.rglob(f"{KERNEL_BENCH}.*.json")), repo).values())
    reports = {f.path for f in all_facts}
    for path in sorted(p for p in results.rglob("*") if p.is_file()):
        rel = path.relative_to(results)
        if path in reports or rel == Path("README.md") or in_local_runs(path, results):
            continue
        if in_evidence(path, results):
            if len(rel.parts) < 4 or rel.parts[1] != EVIDENCE:
                problems.append(f"{rel}: evidence belongs in <gpu>/{EVIDENCE}/<topic>/")
            continue
        name = path.name
        if _is_run_index(path):
            problem = _run_index_problem(path, rel, current_paths)
            if problem:
                problems.append(f"{rel}: {problem}")
            continue
        if name.startswith(f"{FIDELITY}.") and name.endswith(".md"):
            subjects = fidelity_subjects(path.read_text(encoding="utf-8", errors="replace"))
            if not fidelity_is_current(path.read_text(encoding="utf-8", errors="replace"), set(current_names)):
                problems.append(f"{rel}: a fidelity output of a report that is not current")
            elif rel.parent != where(current_names[subjects[0]], True).parent:
                problems.append(f"{rel}: belongs beside {subjects[0]}")
        elif name.startswith(f"{KERNEL_BENCH}.") and name.endswith((".json", ".md")):
            json_path = path.with_suffix(".json")
            doc = read_kernel_bench(json_path) if json_path.is_file() else None
            if doc is None or json_path not in newest:
                problems.append(f"{rel}: not the newest kernel-bench output of any operator")
            elif rel.parent != kernel_bench_home(doc):
                problems.append(f"{rel}: belongs in {kernel_bench_home(doc)}/")
        else:
            problems.append(f"{rel}: neither a report nor a current fidelity or kernel-bench output")
    return problems
