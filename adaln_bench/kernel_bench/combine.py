"""Combining the processes of a `kernel-bench` run into its output's `combined` part, with the verdicts against
the targets (targets.py). Pure: tested on the CPU.

Each figure is the median over processes of one process's figure: its device-time median, its paired ratio to
the stock path (the median over rounds of candidate / stock), its fraction of the copy rate (the median over
rounds of copy / candidate, the copy moving the operator's fewest bytes from its Cost, the faster of a memcpy and
a copy kernel in that process), its host-inclusive median; where the operator has a floor (the fewest bytes and
the FLOPs at the GPU's ceilings), the floor's time over the median and the TFLOP/s.
"""
from __future__ import annotations

from typing import Optional

from adaln_bench.kernel_bench import targets as T
from adaln_bench.kernel_bench.floors import Work, rates
from adaln_bench.datamodel.kernel_bench import COPY, KINDS, STOCK
from adaln_bench.datamodel.stats import median

COPY_MEMCPY, COPY_KERNEL = "copy:memcpy", "copy:kernel"  # the copy's two ways; COPY's figure is the faster's
FIELDS = ("us", "vs_stock", "of_copy", "host_us")


def _median_of(values: list) -> Optional[float]:
    present = [v for v in values if v is not None]
    return median(present) if present else None


def combine_figure(per_process: list[dict], nbytes: float) -> dict:
    """One subject's figure at one size and kind, from each process's."""
    fig: dict = {"processes": len(per_process)}
    for key in FIELDS:
        values = [p.get(key) for p in per_process]
        m = _median_of(values)
        fig[key] = None if m is None else round(m, 4)
        fig[f"per_process_{key}"] = [None if v is None else round(v, 4) for v in values]
    fig["tbps"] = round(nbytes / (fig["us"] * 1e-6) / 1e12, 3) if fig["us"] else None
    return fig


def combine_copy(per_process: list[dict], nbytes: float) -> dict:
    """The copy's figure (each process's faster way), each way's median over processes, and the way each chose."""
    fig = combine_figure(per_process, nbytes)
    fig["way"] = [p.get("way") for p in per_process]
    ways = list(dict.fromkeys(w for p in per_process for w in p.get("ways_us", {})))
    fig["ways"] = {}
    for w in ways:
        us = _median_of([p.get("ways_us", {}).get(w) for p in per_process])
        fig["ways"][w] = {"us": None if us is None else round(us, 4),
                          "tbps": round(nbytes / (us * 1e-6) / 1e12, 3) if us else None}
    return fig


def with_floor(fig: dict, floor: Optional[dict]) -> dict:
    """The floor's time over the figure's and the TFLOP/s it reached, where the operator has a floor."""
    if floor and fig.get("us"):
        achieved = rates(Work(**floor), fig["us"])
        fig["of_floor"] = round(achieved["of_floor"], 4)
        fig["tflops"] = round(achieved["tflops"], 3)
    return fig


def combine_op(name: str, processes: list[dict], floors: Optional[dict] = None) -> dict:
    """The timed processes' figures (medians over them), and the bits and errors of the process that checked."""
    found = [p["ops"][name] for p in processes if name in p.get("ops", {})]
    runs = [r for r in found if r["sizes"]]
    checked = next((r for r in found if r.get("bits") or r.get("accuracy")), {})
    sizes = sorted({int(s) for r in runs for s in r["sizes"]})
    rows: dict = {}
    for s in sizes:
        here = [r["sizes"][str(s)] for r in runs if str(s) in r["sizes"]]
        row: dict = {"bytes": here[0]["bytes"], "copies": here[0]["copies"]}
        for kind in KINDS:
            nbytes = row["bytes"][kind]
            names = [n for n in dict.fromkeys(n for h in here for n in h.get(kind, {}))]
            floor = (floors or {}).get(str(s), {}).get(kind)
            row[kind] = {n: combine_copy([h[kind][n] for h in here if n in h.get(kind, {})], nbytes) if n == COPY
                         else with_floor(combine_figure([h[kind][n] for h in here if n in h.get(kind, {})], nbytes),
                                         floor) for n in names}
        rows[str(s)] = row
    entries = combine_entries([r.get("entries") or {} for r in runs])
    return {"subjects": (found[0] if found else {}).get("subjects", {}), "sizes": sizes, "rows": rows,
            "bits": checked.get("bits"), "accuracy": checked.get("accuracy"), **({"entries": entries} if entries else {})}


def combine_entries(per_process: list[dict]) -> dict:
    """Per library, size and entry point, the median over processes of its device time alone (µs)."""
    out: dict = {}
    for entries in per_process:
        for lib, by_s in entries.items():
            for s, parts in by_s.items():
                for part, us in parts.items():
                    out.setdefault(lib, {}).setdefault(s, {}).setdefault(part, []).append(us)
    return {lib: {s: {part: _median_of(v) for part, v in parts.items()} for s, parts in by_s.items()}
            for lib, by_s in out.items()}


def verdicts(op: dict, op_name: str = "") -> dict:
    """{candidate: {S: {kind: {"passed", "target", "why", "processes"}}}} for every subject but the stock path
    (op_name picks the target table: timestep_mlp's is issue 43's)."""
    out: dict = {}
    for s, row in op["rows"].items():
        for kind in KINDS:
            for name, fig in row[kind].items():
                if name in (STOCK, COPY):
                    continue
                v = T.judge(kind, int(s), fig["vs_stock"], fig["of_copy"], op_name)
                out.setdefault(name, {}).setdefault(s, {})[kind] = {
                    "passed": v.passed, "target": v.target.describe(), "why": v.why, "processes": fig["processes"]}
    return out


def error_verdicts(op: dict, table_grads: tuple[str, ...], op_name: str = "") -> dict:
    """{candidate: {S: {grad: True/False/None}}}: each table gradient ERROR_FACTOR times closer to FP64 than stock;
    for the timestep MLP the output ("fwd") and every gradient within issue 43's bound (T.mlp_error_bound)."""
    acc = op.get("accuracy") or {}
    stock = acc.get(STOCK, {})
    out: dict = {}
    for name, by_s in acc.items():
        if name == STOCK:
            continue
        for s, entry in by_s.items():
            ours, theirs = entry.get("grads", {}), stock.get(s, {}).get("grads", {})
            if op_name == T.MLP_OP:
                checks = {"fwd": T.mlp_error_verdict(entry.get("fwd"), stock.get(s, {}).get("fwd"))}
                checks.update({g: T.mlp_error_verdict(ours.get(g), theirs.get(g)) for g in ours})
                out.setdefault(name, {})[s] = checks
            else:
                out.setdefault(name, {})[s] = {g: T.error_verdict(ours.get(g), theirs.get(g)) for g in table_grads}
    return out


def combine(processes: list[dict], table_grads: dict[str, tuple[str, ...]], floors: Optional[dict] = None) -> dict:
    """Every operator of the run: figures, and for the gathered operators (those with table gradients, issue 32's)
    and the timestep MLP the verdicts and the error verdicts. `floors`: per operator, size and kind, its floor."""
    names = list(dict.fromkeys(n for p in processes for n in p.get("ops", {})))
    ops = {}
    for name in names:
        op = combine_op(name, processes, (floors or {}).get(name))
        op["table_grads"] = list(table_grads.get(name, ()))
        op["verdicts"] = verdicts(op, name) if T.has_targets(name, table_grads.get(name, ())) else {}
        op["error_verdicts"] = error_verdicts(op, table_grads.get(name, ()), name)
        ops[name] = op
    return {"ops": ops}


def all_passed(combined: dict) -> bool:
    return all(k["passed"] for op in combined["ops"].values() for by_s in op["verdicts"].values()
               for kinds in by_s.values() for k in kinds.values())


def not_invariant(bits: Optional[dict]) -> list[str]:
    """Candidates (not the stock path, whose table gradients are known not to repeat) that failed a bits check or
    could not be checked."""
    subjects = (bits or {}).get("subjects", {})
    return [name for name, r in subjects.items()
            if name != STOCK and not (r.get("invariant") and r.get("repeatable") is not False)]


def failed_bits(combined: dict) -> list[str]:
    return [f"{name}/{c}" for name, op in combined["ops"].items() for c in not_invariant(op.get("bits"))]


