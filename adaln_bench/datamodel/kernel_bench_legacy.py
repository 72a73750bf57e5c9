"""kernel-bench's two older output layouts, read into today's (`KernelBenchReport`), so that `report` and `diff`
read every committed output.

- "operators" (`--op`, before the output had a kind): today's layout without `kind`, `schema_version` and each
  operator's `table_grads` (the gathered operators' table gradients are the ones their error verdicts name).
- "projection" (the bundled projection's libraries against cuBLAS): per subject and T, the figures with
  `vs_cublas`, the floor beside them; bits per library against the whole 2048-row batch; errors as fwd, d_temb,
  dW, db. cuBLAS becomes the stock path, `vs_cublas` the ratio to it; the C entry points' medians are taken from
  the processes' own figures, as that layout's table took them.
"""
from __future__ import annotations

from typing import Optional

from adaln_bench.datamodel.kernel_bench import KERNEL_BENCH_KIND, KINDS, STOCK
from adaln_bench.datamodel.stats import median

PROJECTION = "adaln_projection"
MLP = "timestep_mlp"  # its error verdicts name the output and every gradient, not table gradients
CUBLAS = "cublas"
PROJECTION_GRADS = {"d_temb": "temb", "dW": "w", "db": "b"}


def layout_of(value: dict) -> Optional[str]:
    """"current", "operators", "projection", or None when the JSON is no kernel-bench output."""
    if value.get("kind") == KERNEL_BENCH_KIND:
        return "current"
    if "combined" not in value or "per_process" not in value or not isinstance(value["combined"], dict):
        return None
    return "operators" if "ops" in value["combined"] else "projection"


def upgrade(value: dict) -> dict:
    """The JSON of an output of any layout, as today's layout (not yet validated)."""
    layout = layout_of(value)
    if layout == "operators":
        return _from_operators(value)
    if layout == "projection":
        return _from_projection(value)
    return value


def _from_operators(value: dict) -> dict:
    ops = {}
    for name, op in value["combined"]["ops"].items():
        if not isinstance(op, dict):
            ops[name] = op  # the schema says why
            continue
        grads: list[str] = []
        if name != MLP:
            for by_s in (op.get("error_verdicts") or {}).values():
                for checks in by_s.values():
                    grads += [g for g in checks if g not in grads]
        ops[name] = {**op, "table_grads": grads}
    return {**value, "kind": KERNEL_BENCH_KIND, "combined": {**value["combined"], "ops": ops},
            "converted_from": "operators"}


def _figure(old: dict) -> dict:
    fig = {k: v for k, v in old.items() if k != "vs_cublas"}
    fig["vs_stock"] = old.get("vs_cublas")
    fig["processes"] = len(old.get("per_process_us") or [])
    return fig


def _floor(old: dict) -> Optional[dict]:
    if old.get("floor_us") is None or not old.get("us") or old.get("tbps") is None:
        return None
    us = old["us"] * 1e-6
    return {"bytes": old["tbps"] * 1e12 * us, "flops": (old.get("tflops") or 0) * 1e12 * us,
            "floor_us": old["floor_us"], "bound": old.get("floor_bound")}


def _name(subject: str) -> str:
    return STOCK if subject == CUBLAS else subject


def _from_projection(value: dict) -> dict:
    combined = value["combined"]
    sizes = [int(t) for t in combined.get("sizes", [])]
    rows: dict = {}
    floors: dict = {}
    for subject, by_t in (combined.get("rows") or {}).items():
        for t, entry in by_t.items():
            row = rows.setdefault(t, {"bytes": {}, "copies": 1, "fwd": {}, "fwd_bwd": {}})
            for kind in KINDS:
                if kind in entry:
                    row[kind][_name(subject)] = _figure(entry[kind])
                    floor = _floor(entry[kind])
                    if floor is not None:
                        row["bytes"][kind] = floor["bytes"]
                        floors.setdefault(t, {})[kind] = floor
    subjects = {_name(n): info.get("what") or ", ".join(f"{k}: {v}" for k, v in info.items() if v and k != "kind")
                for n, info in (value.get("subjects") or {}).items()}
    op = {"subjects": subjects, "table_grads": [], "sizes": sizes, "rows": rows, "verdicts": {},
          "error_verdicts": {}, "bits": _bits(value.get("bits")), "accuracy": _accuracy(value.get("accuracy")),
          "entries": _entries(value.get("per_process") or [])}
    libraries = [n for n in subjects if n != STOCK]
    return {"kind": KERNEL_BENCH_KIND, "tool": value.get("tool") or {}, "device": value.get("device") or {},
            "shape": value.get("shape"), "sizes": {PROJECTION: sizes}, "candidates": libraries,
            "floors": {PROJECTION: floors}, "processes": value.get("processes"),
            "process_errors": value.get("process_errors") or [], "combined": {"ops": {PROJECTION: op}},
            "subject_errors": value.get("subject_errors") or [], "per_process": value.get("per_process") or [],
            "converted_from": "projection"}


def _bits(old: Optional[dict]) -> Optional[dict]:
    """Each library's rows against the whole batch (a row counts once whether its output or d_temb differs
    is not recorded, so the larger count stands); no table gradients to repeat."""
    if not old:
        return None
    subjects = {}
    for name, r in (old.get("libraries") or {}).items():
        if "error" in r:
            subjects[name] = {"error": r["error"]}
            continue
        differ = r.get("rows_differ") or {}
        failures = [f"{f.get('what')}: {f.get('out_rows', 0)} output and {f.get('d_temb_rows', 0)} d_temb rows differ"
                    for f in r.get("failures") or []]
        failures += [f"{k[3:]}: {v} rows differ" for k, v in
                     ((k, sum(d.values())) for k, d in r.items() if k.startswith("vs_") and isinstance(d, dict)) if v]
        subjects[name] = {"rows_compared": r.get("rows_compared", 0), "rows_differ": max(differ.values(), default=0),
                          "params_repeatable": {}, "failures": failures, "invariant": r.get("invariant"),
                          "repeatable": None}
    return {"seed": old.get("seed", 0), "sizes": [*old.get("sizes", []), old.get("full_rows", 0)],
            "subjects": subjects}


def _accuracy(old: Optional[dict]) -> Optional[dict]:
    if not old:
        return None
    out: dict = {}
    for name, by_t in old.items():
        for t, e in by_t.items():
            out.setdefault(_name(name), {})[t] = e if "error" in e else {
                "fwd": e.get("fwd"), "grads": {new: e.get(k) for k, new in PROJECTION_GRADS.items()}}
    return out


def _entries(processes: list[dict]) -> Optional[dict]:
    found: dict = {}
    for p in processes:
        for lib, by_t in (p.get("entries") or {}).items():
            for t, parts in by_t.items():
                for part, fig in parts.items():
                    found.setdefault(lib, {}).setdefault(t, {}).setdefault(part, []).append(fig["us"])
    if not found:
        return None
    return {lib: {t: {part: median(v) for part, v in parts.items()} for t, parts in by_t.items()}
            for lib, by_t in found.items()}
