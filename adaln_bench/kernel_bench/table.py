"""Combining the processes of a `kernel-bench` run, and its table (pure: tested on the CPU).

Each figure is the median over processes of each process's device-time median; the ratio is a subject's
figure over the cuBLAS path's at the same T, both from the same processes.
"""
from __future__ import annotations

import json
from typing import Optional

from adaln_bench.kernel_bench.floors import Ceilings, forward_backward_work, forward_work, rates
from adaln_bench.kernel_bench.subjects import CUBLAS
from adaln_bench.datamodel.stats import median
from adaln_bench.shape import Shape

KINDS = ("fwd", "fwd_bwd")


def combine(processes: list[dict], shape: Shape, ceilings: Ceilings = Ceilings()) -> dict:
    """Per subject and T: per-process figures, their median, the ratio to cuBLAS, rates and floor fraction."""
    names: list[str] = []
    for p in processes:
        names += [n for n in p.get("times", {}) if n not in names]
    sizes = sorted({int(t) for p in processes for rows in p.get("times", {}).values() for t in rows})
    rows: dict = {}
    for name in names:
        for t in sizes:
            entry = {}
            for kind in KINDS:
                values = [p["times"][name][str(t)][kind]["us"] for p in processes
                          if str(t) in p.get("times", {}).get(name, {})]
                if not values:
                    continue
                work = (forward_work if kind == "fwd" else forward_backward_work)(shape, t, ceilings)
                us = median(values)
                entry[kind] = {"us": round(us, 2), "per_process_us": [round(v, 2) for v in values],
                               **{k: round(v, 4) for k, v in rates(work, us).items()},
                               "floor_us": round(work.floor_us, 2), "floor_bound": work.bound}
            if entry:
                rows.setdefault(name, {})[str(t)] = entry
    for name, by_t in rows.items():
        for t, entry in by_t.items():
            for kind, fig in entry.items():
                base = rows.get(CUBLAS, {}).get(t, {}).get(kind)
                fig["vs_cublas"] = round(fig["us"] / base["us"], 4) if base else None
    return {"sizes": sizes, "subjects": names, "rows": rows}


def _cells(fig: Optional[dict]) -> list[str]:
    """µs, ratio to cuBLAS, TB/s, TFLOP/s, fraction of the floor."""
    if fig is None:
        return ["–"] * 5
    ratio = "–" if fig["vs_cublas"] is None else f"{fig['vs_cublas']:.3f}"
    return [f"{fig['us']:.1f}", ratio, f"{fig['tbps']:.2f}", f"{fig['tflops']:.0f}", f"{fig['of_floor']:.2f}"]


def to_markdown(combined: dict) -> str:
    head = ("| T | subject | fwd µs | ×cuBLAS | TB/s | TFLOP/s | of floor "
            "| fwd+bwd µs | ×cuBLAS | TB/s | TFLOP/s | of floor |")
    lines = [head, "|" + " --- |" * 12]
    for t in combined["sizes"]:
        for name in combined["subjects"]:
            entry = combined["rows"].get(name, {}).get(str(t))
            if entry is None:
                continue
            cells = [str(t), name, *_cells(entry.get("fwd")), *_cells(entry.get("fwd_bwd"))]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def entries_markdown(processes: list[dict]) -> str:
    """Per library and T, the median over processes of each C entry point's device time (µs)."""
    names: list[str] = []
    for p in processes:
        names += [n for n in p.get("entries", {}) if n not in names]
    if not names:
        return ""
    lines = ["| library | T | fwd | d_temb | dW | db |", "|" + " --- |" * 6]
    for name in names:
        sizes = sorted({int(t) for p in processes for t in p.get("entries", {}).get(name, {})})
        for t in sizes:
            cells = []
            for part in ("fwd", "d_temb", "dW", "db"):
                vals = [p["entries"][name][str(t)][part]["us"] for p in processes
                        if str(t) in p.get("entries", {}).get(name, {})]
                cells.append(f"{median(vals):.1f}" if vals else "–")
            lines.append(f"| {name} | {t} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def not_invariant(doc: dict) -> list[str]:
    """Libraries whose bits check failed (or could not run)."""
    libraries = (doc.get("bits") or {}).get("libraries", {})
    return [name for name, r in libraries.items() if not r.get("invariant", False)]


def document_markdown(stem: str, doc: dict, processes: list[dict]) -> str:
    """The whole Markdown of a run: the table, the entry points, bits, errors against FP64, failures."""
    md = [f"# kernel-bench {stem}\n", f"{doc['device']['name']}, torch {doc['tool']['torch']}, {doc['processes']} "
          "process(es); device time (CUDA-graph replay), median over processes.\n", to_markdown(doc["combined"])]
    entries = entries_markdown(processes)
    if entries:
        md += ["\nC entry points alone (µs):\n", entries]
    if doc.get("bits"):
        md.append("\nBits (rows compared with the whole 2048-row batch; other libraries with the first):\n")
        md += [f"- {name}: {json.dumps(r)}\n" for name, r in doc["bits"]["libraries"].items()]
    if doc.get("accuracy"):
        md.append("\nErrors against FP64:\n")
        md += [f"- {name}: {json.dumps(by_t)}\n" for name, by_t in doc["accuracy"].items()]
    md += [f"\nFAILED {key}: {err}\n" for key, err in doc.get("subject_errors", [])]
    return "".join(md)
