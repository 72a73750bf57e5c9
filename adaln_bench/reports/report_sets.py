"""Reports from files and directories, grouped by operator: one side of a comparison across runs.

A run writes one report per operator under `<out>/<op>/` and a run index under `<out>/runs/`
(reports/naming.py). A reader names a run's directory, a few report files, or both: a directory is searched
for `*.json` files (recursively, in name order), and what in it is not a report (a run index, some other
JSON file) or is an incomplete one (`*.incomplete.json`) is passed over; a file named on the command line
must be a report.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from adaln_bench.errors import UserError
from adaln_bench.datamodel.load import load_json, one_line, read_limited, report_from_json
from adaln_bench.reports.naming import RUN_INDEX_KIND, is_incomplete_file
from adaln_bench.datamodel.schema import Report


@dataclass(frozen=True)
class LoadedReport:
    path: Path
    report: Report

    @property
    def op(self) -> str:
        return self.report.op


def _read(path: Path) -> object:
    """The JSON of a file through the shared loader: a UserError (one line) when it cannot be read or parsed."""
    return load_json(read_limited(path), one_line(str(path), 400))


def _kind(data: object) -> object:
    return data.get("kind") if isinstance(data, dict) else None


def load_path(path: Path) -> list[LoadedReport]:
    """The reports a file or a directory holds. A named file that is not a report is the user's error; in a
    directory it is skipped, and a directory without any report is an error too."""
    if path.is_dir():
        found = []
        files = sorted(p for p in path.rglob("*.json") if p.is_file())
        # An interrupted or failed run's report is no answer for its operator: passed over in a directory
        # (a file named on the command line is read as given).
        incomplete = [p for p in files if is_incomplete_file(p)]
        for file in (p for p in files if not is_incomplete_file(p)):
            try:  # what is not a report this tool wrote is passed over like the rest
                data = _read(file)
                if _kind(data) == RUN_INDEX_KIND:
                    continue
                found.append(LoadedReport(file, report_from_json(data, str(file))))
            except UserError:
                continue
        if not found and incomplete:
            raise UserError(f"{path}: only incomplete reports in this directory ({incomplete[0].name}"
                            f"{f' and {len(incomplete) - 1} more' if len(incomplete) > 1 else ''}): name one "
                            "to compare it anyway")
        if not found:
            raise UserError(f"{path}: no reports in this directory (searched for *.json)")
        return found
    if not path.exists():
        raise UserError(f"{path}: no such file or directory")
    data = _read(path)
    if _kind(data) == RUN_INDEX_KIND:
        raise UserError(f"{path}: a run index, not a report: name the run's directory or its reports")
    return [LoadedReport(path, report_from_json(data, one_line(str(path), 400)))]


def by_operator(reports: Sequence[LoadedReport], side: str) -> dict[str, LoadedReport]:
    """One report per operator, in the order they came. Two of one operator on one side would make the
    pairing a guess, so that is the user's to resolve."""
    grouped: dict[str, LoadedReport] = {}
    for loaded in reports:
        if loaded.op in grouped:
            raise UserError(f"{side}: two reports of {loaded.op} ({grouped[loaded.op].path}, {loaded.path}): "
                            "name one of them")
        grouped[loaded.op] = loaded
    return grouped


def run_key(report: Report) -> str:
    """What tells two runs' reports apart when the sides are given together: the GPU that ran them (or the
    device kind where none is named)."""
    return report.environment.gpu or report.device or report.environment.device or "an unknown device"


def load_sides(paths: Sequence[Path]) -> tuple[list[LoadedReport], list[LoadedReport]]:
    """The reference's reports and those to compare with them. Two paths: one side each. More: the sides are
    told apart by the GPU that ran them; the reference is the leading paths of the first path's GPU, and the
    rest must be of one other GPU."""
    if len(paths) < 2:
        raise UserError("give the reference's reports and those to compare with them: at least two paths")
    groups = [load_path(Path(p)) for p in paths]
    if len(groups) == 2:
        return groups[0], groups[1]
    keys = []
    for path, group in zip(paths, groups):
        group_keys = sorted({run_key(r.report) for r in group})
        if len(group_keys) > 1:
            raise UserError(f"{path}: holds reports of several GPUs ({', '.join(group_keys)}): with more than "
                            "two paths each must hold one GPU's")
        keys.append(group_keys[0])
    first = keys[0]
    split = next((i for i, key in enumerate(keys) if key != first), None)
    if split is None:
        raise UserError(f"every path holds reports of {first}: with more than two paths the sides are told "
                        "apart by GPU; give one file or directory per side")
    rest = sorted(set(keys[split:]))
    if len(rest) > 1:
        raise UserError(f"more than two GPUs among the paths ({', '.join([first, *rest])}): give the "
                        "reference's paths first, then those of one other GPU")
    return ([r for g in groups[:split] for r in g], [r for g in groups[split:] for r in g])
