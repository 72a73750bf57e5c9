"""results/README.md: the current answer of every operator on every GPU, made from the reports that
reports/current.py calls current. No I/O but reading the reports; the command writes or checks the file."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from adaln_bench.datamodel import format as fmt
from adaln_bench.datamodel import metrics
from adaln_bench.reports.current import (
    FIDELITY,
    KERNEL_BENCH,
    Facts,
    answers,
    kernel_bench_home,
    kernel_bench_ops,
    newest_kernel_bench,
    read_facts,
    read_if_report,
    read_kernel_bench,
)
from adaln_bench.reports.render import device_cells, invariance_verdict, shown_sizes, size_symbol
from adaln_bench.datamodel.schema import CandidateResult, Report

INTRO = """\
# Current results

Made by `adaln-bench summary` from the reports under `results/`; do not edit it by hand (`adaln-bench summary
--check` and the test suite fail when it differs from what the reports give). Which report is current, and
where the older ones are kept, is written in `docs/results.md`.

Per operator and GPU, each candidate under each mode, from the newest complete full report that measured that
mode. Device time is forward + backward by CUDA-graph replay, × the operator's stock path timed beside it in
the same rounds where the report has that ratio. Worst error is the largest max |y − ref| / max |ref| against
FP64 over every size the report measured: the forward's / the worst gradient's. `adaln-bench report FILE`
shows any report in full.
"""


def _short_verdict(entry: CandidateResult) -> str:
    verdict = invariance_verdict(entry)
    if verdict.startswith("NO: "):  # the first failing count; `adaln-bench report` lists them all
        first = verdict[4:].split("; ")
        return f"**NO**: {first[0]}" + (f" (+{len(first) - 1} more)" if len(first) > 1 else "")
    return verdict


def worst_errors(entry: CandidateResult) -> str:
    """The worst forward and the worst gradient error over every size measured."""
    points = list(entry.accuracy_latency.values())
    cells = []
    for column in ("fwd err", "grad err"):
        members = [m for m in metrics.metrics_for(points) if m.summary == column]
        values = [v for m in members for p in points if (v := m.value(p)) is not None]
        cells.append(members[0].kind.brief(members[0].worst(values)) if values else fmt.MISSING)
    return " / ".join(cells)


def _tag(f: Facts, report: Report) -> str:
    """The report's commit, or what its file is named for (RL-Kernel's prior-art reports record none)."""
    commit = report.tool.commit if report.tool is not None else None
    return commit[:7] if commit else f.path.stem.removeprefix(f"{f.op}.{f.gpu}.")


def _link(f: Facts, report: Report, root: Path) -> str:
    return f"[{_tag(f, report)}]({f.path.relative_to(root).as_posix()})"


def _mode_table(rows: list[tuple[str, Facts, Report]], root: Path) -> list[str]:
    """One row per (mode, candidate) measured, each from its mode's current report."""
    sizes = shown_sizes(rows[0][2])
    sym = size_symbol(rows[0][2])
    out = ["| mode | candidate | batch-invariant | " + " | ".join(f"device time {sym}={s}" for s in sizes)
           + " | worst error | report |",
           "| --- | --- | --- | " + " | ".join("---" for _ in sizes) + " | --- | --- |"]
    for mode, f, report in rows:
        for name, entry in report.results.get(mode, {}).items():
            if not isinstance(entry, CandidateResult):
                continue
            times = device_cells(entry, sizes) or [fmt.MISSING] * len(sizes)
            out.append(f"| {mode} | {name} | {_short_verdict(entry)} | " + " | ".join(times)
                       + f" | {worst_errors(entry)} | {_link(f, report, root)} |")
    return out


def _draws_table(rows: list[tuple[str, Facts, Report]], root: Path) -> list[str]:
    out = ["| inputs drawn as on | mode | candidate | worst error | report |", "| --- | --- | --- | --- | --- |"]
    for draws, f, report in rows:
        for mode, cands in report.results.items():
            for name, entry in cands.items():
                if isinstance(entry, CandidateResult):
                    out.append(f"| {draws} | {mode} | {name} | {worst_errors(entry)} | {_link(f, report, root)} |")
    return out


def _outputs(root: Path, gpu: str, op: str, kernel_bench: dict[tuple[str, str], Path]) -> list[str]:
    """The operator's current kernel-bench and fidelity outputs, as links."""
    lines = []
    bench = kernel_bench.get((gpu, op))
    if bench is not None:
        doc = read_kernel_bench(bench) or {}
        shared = f" (with {', '.join(o for o in kernel_bench_ops(doc) if o != op)})" \
            if kernel_bench_home(doc).name == KERNEL_BENCH else ""
        shown = bench.with_suffix(".md") if bench.with_suffix(".md").is_file() else bench
        lines.append(f"- kernel-bench{shared}: [{shown.name}]({shown.relative_to(root).as_posix()})")
    folder = root / gpu / op
    for md in sorted(folder.glob(f"{FIDELITY}.*.md")) if folder.is_dir() else []:
        lines.append(f"- fidelity against the B200 reference: [{md.name}]({md.relative_to(root).as_posix()})")
    return lines


def summary_markdown(root: Path, repo: Optional[Path] = None) -> str:
    """results/README.md's text for the results folder `root`."""
    from adaln_bench.modes.registry import all_modes
    from adaln_bench.ops.registry import all_operators

    reports: dict[Path, Report] = {}

    def read(path: Path) -> Optional[Report]:
        report = read_if_report(path)
        if report is not None:
            reports[path] = report
        return report

    chosen = answers(read_facts([root], read))
    kernel_bench = newest_kernel_bench(sorted(root.rglob(f"{KERNEL_BENCH}.*.json")), repo or root.resolve().parent)
    order = {op: i for i, op in enumerate(all_operators())}
    mode_order = {mode: i for i, mode in enumerate(all_modes())}
    out = [INTRO]
    ops = sorted({key[1] for key in chosen} | {key[1] for key in kernel_bench}, key=lambda o: (order.get(o, 99), o))
    for op in ops:
        out += [f"## {op}", ""]
        gpus = sorted({key[0] for key in chosen if key[1] == op} | {g for g, o in kernel_bench if o == op})
        for gpu in gpus:
            keys = sorted((k for k in chosen if k[:2] == (gpu, op)), 
                          key=lambda k: (k[2] != "h3", k[2], k[3] != "mode", mode_order.get(k[4], 99), k[4]))
            shapes = list(dict.fromkeys(k[2] for k in keys))
            gpu_name = next((reports[chosen[k].path].environment.gpu for k in keys), None) or gpu.upper()
            for shape in shapes or [None]:
                out += [f"### {gpu_name}" + (f", {shape} shape" if shape and shape != "h3" else ""), ""]
                modes = [(k[4], chosen[k], reports[chosen[k].path]) for k in keys if k[2] == shape and k[3] == "mode"]
                draws = [(k[4], chosen[k], reports[chosen[k].path]) for k in keys if k[2] == shape and k[3] == "draws"]
                if modes:
                    out += _mode_table(modes, root) + [""]
                if draws:
                    out += _draws_table(draws, root) + [""]
            extra = _outputs(root, gpu, op, kernel_bench)
            if extra:
                out += extra + [""]
    return "\n".join(out).rstrip("\n") + "\n"
