"""Write results/README.md: one table of the current reports (results/<gpu>/<op>/*.json, archives left out).

Per operator and report: each (mode, candidate) measured, its invariance verdict, the forward + backward
device time with its ratio to the stock path sampled beside it at the shown sizes, and the worst forward and
gradient errors. Run from the repository root: python3 scripts/results_table.py > results/README.md
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adaln_bench.ops.registry import all_operators  # noqa: E402
from adaln_bench.reports import metrics  # noqa: E402
from adaln_bench.reports.io import read_report  # noqa: E402
from adaln_bench.reports.render import device_cells, invariance_verdict, shown_sizes, size_symbol  # noqa: E402
from adaln_bench.reports.schema import CandidateResult  # noqa: E402


def rows(path: Path):
    report = read_report(path)
    sizes = shown_sizes(report)
    for mode, candidates in report.results.items():
        for name, entry in candidates.items():
            if not isinstance(entry, CandidateResult):
                continue
            verdict = invariance_verdict(entry)
            if verdict.startswith("NO: "):  # the first failing count; `adaln-bench report` lists them all
                first = verdict[4:].split("; ")
                verdict = f"**NO**: {first[0]}" + (f" (+{len(first) - 1} more)" if len(first) > 1 else "")
            times = device_cells(entry, sizes) or ["—"] * len(sizes)
            worst = []
            for t in sizes:
                cells = dict(zip(metrics.summary_columns(), metrics.summary_cells(entry.accuracy_latency.get(t))))
                worst.append(f"{cells['fwd err']} / {cells['grad err']}")
            yield report, sizes, mode, name, verdict, times, worst


def main() -> int:
    out = ["# Current reports", "",
           "One table per operator, made by `python3 scripts/results_table.py` from the reports under "
           "`results/<gpu>/<op>/` (history under `archive/`). Device time is forward + backward by CUDA-graph "
           "replay, with its ratio to the operator's stock path sampled in the same rounds (×); errors are "
           "max |y − ref| / max |ref| against FP64, forward / worst gradient. `adaln-bench report FILE` shows "
           "any of them in full; `adaln-bench fidelity` compares them with RL-Kernel's B200 reports "
           "(`results/h200/fidelity/`).", ""]
    for op in all_operators():
        files = sorted(p for gpu in sorted((ROOT / "results").iterdir()) if gpu.is_dir()
                       for p in (gpu / op).glob("*.json"))
        if not files:
            continue
        out += [f"## {op}", ""]
        for path in files:
            got = list(rows(path))
            if not got:
                continue
            report, sizes, *_ = got[0]
            sym = size_symbol(report)
            out += [f"`{path.relative_to(ROOT)}` ({report.environment.gpu or 'CPU'})", "",
                    "| mode | candidate | batch-invariant | " + " | ".join(f"device time {sym}={s}" for s in sizes)
                    + " | " + " | ".join(f"errors {sym}={s}" for s in sizes) + " |",
                    "| --- | --- | --- | " + " | ".join(["---"] * (2 * len(sizes))) + " |"]
            for _, _, mode, name, verdict, times, worst in got:
                out.append(f"| {mode} | {name} | {verdict} | " + " | ".join(times) + " | " + " | ".join(worst) + " |")
            out.append("")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
