"""A run's output: each operator's report written (or kept elsewhere when the disk refuses), its summary
printed, and the run index that lists them (docs/spec.md#9-the-report)."""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from adaln_bench.datamodel.io import Written, write_report_or_keep, write_text_atomic
from adaln_bench.datamodel.pairs import count_pairs
from adaln_bench.reports.naming import RUN_INDEX_KIND, RunName, incomplete_path, index_path, report_path
from adaln_bench.reports.render import print_summary
from adaln_bench.datamodel.schema import SCHEMA_VERSION, Report


@dataclass
class RunWritten:
    reports: dict[str, Written] = field(default_factory=dict)
    index: Optional[Path] = None
    failed: Optional[str] = None  # one line: what could not be written where it was asked


def is_complete(report: Report) -> bool:
    """A report that may stand as `<name>.json`: its run was not stopped, and it measured something."""
    return not report.incomplete and bool(count_pairs(report).measured)


def _settle(path: Path, complete: bool) -> Path:
    """Where a report (or the index) goes: a complete one to `path`, then its stale incomplete sibling goes;
    an incomplete one beside it, so that a complete report there is never replaced by less."""
    if complete:
        return path
    target = incomplete_path(path)
    if path.exists():
        print(f"adaln-bench: {path} kept (complete); this run's incomplete report goes to {target.name}",
              file=sys.stderr)
    return target


def write_run(reports: dict[str, Report], out: Path, name: RunName, single_file: bool, slots: list,
              quiet: bool, time_spent: Optional[dict] = None) -> RunWritten:
    """`out` is the report file (one operator, `--out FILE.json`) or the directory of the run."""
    written = RunWritten()
    for op, report in reports.items():
        path = out if single_file else report_path(out, name, op)
        complete = is_complete(report)
        target = _settle(path, complete)
        if complete and path.exists():
            print(f"adaln-bench: replacing {path} (a report of the same operator, shape, probes and modes)",
                  file=sys.stderr)
        written.reports[op] = result = write_report_or_keep(report, target)
        if result.error:
            written.failed = written.failed or f"{result.error}; the report was kept in {result.path}"
        elif complete:
            incomplete_path(path).unlink(missing_ok=True)  # a complete report replaces the incomplete one too
    if not quiet:
        for report in reports.values():
            print_summary(report)
    if not single_file:
        written.index = _write_index(reports, written, out, name, slots, time_spent)
    stream = sys.stderr if quiet else sys.stdout
    for op, result in written.reports.items():
        print(f"report: {result.path}", file=stream)
    if written.index is not None:
        print(f"run index: {written.index}", file=stream)
    return written


def _write_index(reports: dict[str, Report], written: RunWritten, out: Path, name: RunName,
                 slots: list, time_spent: Optional[dict] = None) -> Optional[Path]:
    """The small file a nightly reads first: which reports one run wrote, where, and how long it took."""
    first = next(iter(reports.values()))
    complete = all(is_complete(r) for r in reports.values())
    final = index_path(out, name)
    path = final if complete else incomplete_path(final)
    index = {
        "kind": RUN_INDEX_KIND,
        "schema_version": SCHEMA_VERSION,
        "tool": first.tool.model_dump(mode="json") if first.tool else None,
        "device": first.device,
        "gpu": first.environment.gpu,
        "gpus": list(dict.fromkeys(s for s in slots if s is not None)),  # a GPU of several slots once
        "started_at": first.started_at,
        "wall_s": first.wall_s,
        "quick": first.quick,
        "incomplete": any(r.incomplete for r in reports.values()),
        "modes": list(first.modes or {}),
        "reports": {op: _relative(w.path, path.parent) for op, w in written.reports.items()},
    }
    if time_spent is not None:  # harness/assembly/time_accounting.py; docs/running.md says how to read it
        index["time"] = time_spent
    try:
        done = write_text_atomic(json.dumps(index, indent=2) + "\n", path)
    except Exception as exc:  # noqa: BLE001 - the reports are written; the index is a convenience
        written.failed = written.failed or f"the run index could not be written: {exc}"
        return None
    if complete:
        incomplete_path(final).unlink(missing_ok=True)
    return done


def _relative(path: Path, base: Path) -> str:
    """A report's path from the index's folder (`../norm_modulate/…json`), absolute where it was kept elsewhere."""
    try:
        return os.path.relpath(path.resolve(), base.resolve())
    except ValueError:
        return str(path.resolve())
