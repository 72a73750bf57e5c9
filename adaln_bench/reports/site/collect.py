"""Find report files under the paths given and read them; skip what is not a report, and say how many."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from adaln_bench.errors import NotAReportError, UserError
from adaln_bench.reports.current import current_of, facts, in_evidence
from adaln_bench.reports.display import for_display
from adaln_bench.datamodel.load import load_json, read_limited, report_from_json
from adaln_bench.reports.naming import is_incomplete_file
from adaln_bench.datamodel.schema import Report

# A run's small index of the reports it wrote (the coming results/<gpu>/<op>/ layout): not a report.
RUN_INDEX_KIND = "adaln_bench_run_index"
# The file every published site holds (build.MARKER): a site under an input folder is not read back in.
SITE_MARKER = ".adaln-bench-site"


@dataclass(frozen=True)
class Loaded:
    """One report file: where it came from, its bytes' SHA-256, and its name in SITE/reports/."""

    path: Path
    report: Report
    sha256: str
    site_name: str
    data: bytes = field(repr=False)


@dataclass
class Collected:
    reports: list[Loaded]
    not_reports: list[Path] = field(default_factory=list)  # JSON that is not a report (quietly skipped)
    run_indexes: int = 0
    duplicates: int = 0  # the same bytes found twice (a report in results/ and in the kept history)
    current: set[Path] = field(default_factory=set)  # the reports that are current answers (reports/current.py)
    incomplete: int = 0  # `*.incomplete.json`: a run stopped or failed; the dashboard shows complete runs only


def skipped_counts(not_reports: int, run_indexes: int, duplicates: int, incomplete: int = 0,
                   not_reports_as: str = "JSON files that are not reports") -> list[str]:
    """What the site passed over, in words: one part per kind of file it met."""
    counts = ((not_reports, not_reports_as), (run_indexes, "run indexes"), (duplicates, "duplicates"),
              (incomplete, "files of incomplete runs (*.incomplete.json)"))
    return [f"{n} {what}" for n, what in counts if n]


def report_files(paths: Iterable[Path]) -> list[Path]:
    """Each file as given, and every *.json under each folder, recursively; sorted, each once."""
    found: dict[Path, None] = {}
    for p in paths:
        if p.is_dir():
            sites = {m.parent for m in p.rglob(SITE_MARKER)}
            for f in sorted(p.rglob("*.json")):
                if (f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts)
                        and not any(parent in sites for parent in f.parents) and not in_evidence(f, p)):
                    found[f] = None
        elif p.exists() or p.is_symlink():  # a FIFO or a symlink loop too: the loader skips and counts it
            found[p] = None
        else:
            raise UserError(f"{p}: no such file or directory")
    return list(found)


def _site_name(path: Path, digest: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", path.stem)[:80]
    return f"{stem}.{digest[:8]}.json"


def collect(paths: Iterable[Path]) -> Collected:
    out = Collected([])
    seen: set[str] = set()
    for f in report_files(paths):
        if is_incomplete_file(f):
            out.incomplete += 1
            continue
        try:
            data = read_limited(f)
        except UserError:  # a FIFO, a device, a file too large or unreadable: not a report
            out.not_reports.append(f)
            continue
        digest = hashlib.sha256(data).hexdigest()
        if digest in seen:
            out.duplicates += 1
            continue
        try:
            head = load_json(data, str(f))
            if isinstance(head, dict) and head.get("kind") == RUN_INDEX_KIND:
                out.run_indexes += 1
                continue
            report = report_from_json(head, str(f))
        except NotAReportError:
            out.not_reports.append(f)
            continue
        seen.add(digest)
        out.reports.append(Loaded(f, for_display(report), digest, _site_name(f, digest), data))
    # The series read every report, history included; which of them answer today is the layout's one rule.
    out.current = {f.path for f in current_of(facts(l.path, l.report) for l in out.reports)}
    return out
