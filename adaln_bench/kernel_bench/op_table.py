"""Combining the processes of a `kernel-bench --op` run, the verdicts against issue 32's targets, and the
Markdown (pure: tested on the CPU).

Each figure is the median over processes of one process's figure: its device-time median, its paired ratio to
the stock path (the median over rounds of candidate / stock), its fraction of the copy rate (the median over
rounds of copy / candidate, the copy moving the operator's fewest bytes from its Cost, the faster of a memcpy and
a copy kernel in that process), its host-inclusive
median.
"""
from __future__ import annotations

from typing import Optional

from adaln_bench.kernel_bench import targets as T
from adaln_bench.datamodel.stats import median

STOCK, COPY = "stock", "copy"  # the subjects every size has: the operator's stock path, the copy of its bytes
COPY_MEMCPY, COPY_KERNEL = "copy:memcpy", "copy:kernel"  # the copy's two ways; COPY's figure is the faster's
KINDS = ("fwd", "fwd_bwd")
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


def combine_op(name: str, processes: list[dict]) -> dict:
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
            row[kind] = {n: (combine_copy if n == COPY else combine_figure)(
                [h[kind][n] for h in here if n in h.get(kind, {})], nbytes) for n in names}
        rows[str(s)] = row
    return {"subjects": (found[0] if found else {}).get("subjects", {}), "sizes": sizes, "rows": rows,
            "bits": checked.get("bits"), "accuracy": checked.get("accuracy")}


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


def combine(processes: list[dict], table_grads: dict[str, tuple[str, ...]]) -> dict:
    """Every operator of the run: figures, and for the gathered operators (those with table gradients, issue 32's)
    the verdicts and the table-gradient error verdicts."""
    names = list(dict.fromkeys(n for p in processes for n in p.get("ops", {})))
    ops = {}
    for name in names:
        op = combine_op(name, processes)
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


# ------------------------------------------------------------------------------------------------ Markdown
def _num(v: Optional[float], spec: str, suffix: str = "") -> str:
    return "–" if v is None else f"{format(v, spec)}{suffix}"


def _cells(fig: Optional[dict]) -> list[str]:
    """device µs, host µs, × stock, % of copy."""
    if fig is None:
        return ["–"] * 4
    pct = None if fig["of_copy"] is None else 100 * fig["of_copy"]
    return [_num(fig["us"], ".1f"), _num(fig["host_us"], ".1f"), _num(fig["vs_stock"], ".3f"), _num(pct, ".0f", " %")]


def _copy_cell(c: Optional[dict]) -> str:
    """The faster copy's µs and rate, and each way's rate (memcpy / kernel)."""
    if not c:
        return "–"
    ways = "; ".join(f"{w.split(':')[-1]} {_num(f['tbps'], '.2f')}" for w, f in (c.get("ways") or {}).items())
    return f"{_num(c['us'], '.1f')} ({_num(c['tbps'], '.2f')} TB/s" + (f"; {ways}" if ways else "") + ")"


def times_markdown(op: dict) -> str:
    head = ("| S | subject | fwd µs | host µs | × stock | of copy | fwd+bwd µs | host µs | × stock | of copy |\n"
            "|" + " --- |" * 10 + "\n")
    lines = []
    for s in op["sizes"]:
        row = op["rows"][str(s)]
        names = [n for n in dict.fromkeys([*row["fwd"], *row["fwd_bwd"]]) if n != COPY]
        for n in names:
            lines.append("| " + " | ".join([str(s), n, *_cells(row["fwd"].get(n)), *_cells(row["fwd_bwd"].get(n))]) + " |")
        copy = [row[k].get(COPY) for k in KINDS]
        cells = [_copy_cell(c) for c in copy]
        mb = [row["bytes"][k] / 1e6 for k in KINDS]
        lines.append(f"| {s} | copy of the fewest bytes ({mb[0]:.0f} / {mb[1]:.0f} MB) | {cells[0]} | | | "
                     f"| {cells[1]} | | | |")
    return head + "\n".join(lines) + "\n"


def verdicts_markdown(op: dict) -> str:
    lines = ["| candidate | S | kind | target | × stock | of copy | verdict |", "|" + " --- |" * 7]
    for name, by_s in op["verdicts"].items():
        for s, kinds in by_s.items():
            for kind, v in kinds.items():
                fig = op["rows"][s][kind][name]
                pct = None if fig["of_copy"] is None else 100 * fig["of_copy"]
                word = ("pass" if v["passed"] else f"**FAIL** ({v['why']})") + \
                    ("" if v["processes"] >= T.MIN_PROCESSES else f" (provisional: {v['processes']} process(es))")
                lines.append(f"| {name} | {s} | {kind.replace('_', '+')} | {v['target']} | "
                             f"{_num(fig['vs_stock'], '.3f')} | {_num(pct, '.1f', ' %')} | {word} |")
    return "\n".join(lines) + "\n"


def errors_markdown(op: dict, table_grads: tuple[str, ...]) -> str:
    acc = op.get("accuracy") or {}
    grads = list(dict.fromkeys(g for by_s in acc.values() for e in by_s.values() for g in e.get("grads", {})))
    lines = ["| S | subject | output | " + " | ".join(f"{g}{' (table)' if g in table_grads else ''}" for g in grads)
             + " |", "|" + " --- |" * (3 + len(grads))]
    for s in sorted({int(s) for by_s in acc.values() for s in by_s}):
        for name, by_s in acc.items():
            e = by_s.get(str(s), {})
            if "error" in e:
                lines.append(f"| {s} | {name} | FAILED: {e['error'][:120]} |")
                continue
            g = e.get("grads", {})
            lines.append(f"| {s} | {name} | {_num(e.get('fwd'), '.2e')} | " +
                         " | ".join(_num(g.get(k), ".2e") for k in grads) + " |")
    checks = [(name, s, g, ok) for name, by_s in op.get("error_verdicts", {}).items() for s, gs in by_s.items()
              for g, ok in gs.items()]
    missed = [f"{name} {g} at S = {s}" for name, s, g, ok in checks if ok is False]
    if checks:
        lines.append("")
        rule = (f"Every error within max({T.MLP_ERROR_FACTOR:g}× the stock path's, {T.MLP_ERROR_FLOOR:g}) and at most "
                f"{T.MLP_ERROR_CEILING:g}" if not table_grads else
                f"Table gradients {T.ERROR_FACTOR:g}× closer to FP64 than the stock path's")
        lines.append(f"{rule}: " + ("all" if not missed else "NOT " + ", ".join(missed)) + f" ({len(checks)} checked).")
    return "\n".join(lines) + "\n"


def floors_markdown(op: dict, floors: dict) -> str:
    """Each size's floor (kernel_bench.floors.mlp_work) beside each candidate's device time."""
    lines = ["| T | kind | MB | TF32 GFLOP | floor µs (bound) | subject | µs | of floor |", "|" + " --- |" * 8]
    for s in op["sizes"]:
        for kind in KINDS:
            f = floors.get(str(s), {}).get(kind)
            if not f:
                continue
            for name, fig in op["rows"][str(s)][kind].items():
                if name == COPY:
                    continue
                of = None if not fig["us"] else f["floor_us"] / fig["us"]
                lines.append(f"| {s} | {kind.replace('_', '+')} | {f['bytes'] / 1e6:.0f} | {f['flops'] / 1e9:.1f} | "
                             f"{f['floor_us']:.1f} ({f['bound']}) | {name} | {_num(fig['us'], '.1f')} | "
                             f"{_num(None if of is None else 100 * of, '.0f', ' %')} |")
    return "\n".join(lines) + "\n"


def bits_markdown(op: dict) -> str:
    bits = op.get("bits")
    if not bits:
        return ""
    lines = [f"Bits (seed {bits['seed']}; the {max(bits['sizes'])}-token batch's prefixes at "
             f"{', '.join(str(s) for s in bits['sizes'][:-1]) or 'no other size'} and three rows alone against the "
             "whole batch; table gradients of two identical runs at every size):"]
    for name, r in bits["subjects"].items():
        if "error" in r:
            lines.append(f"- {name}: FAILED: {r['error']}")
            continue
        rep = ", ".join(f"{s}: {'yes' if v else 'NO' if v is False else '–'}" for s, v in r["params_repeatable"].items())
        lines.append(f"- {name}: {r['rows_differ']} of {r['rows_compared']} rows differ; table gradients repeat: {rep}"
                     + ("" if not r["failures"] else f" ({'; '.join(r['failures'][:4])})"))
    return "\n".join(lines) + "\n"


def _worst(entry: Optional[dict], grads: tuple[str, ...]) -> Optional[float]:
    values = [(entry or {}).get("grads", {}).get(g) for g in grads]
    present = [v for v in values if v is not None]
    return max(present) if present else None


def summary_markdown(combined: dict, table_grads: dict[str, tuple[str, ...]]) -> str:
    """One line per operator, candidate and size: times, ratios, copy fractions, table-gradient errors, verdicts."""
    lines = ["| operator | candidate | S | fwd µs (× stock, of copy) | fwd+bwd µs (× stock, of copy) "
             "| table-grad error (stock) | targets |", "|" + " --- |" * 7]
    for name, op in combined["ops"].items():
        acc = op.get("accuracy") or {}
        grads = table_grads.get(name, ())
        for s in op["sizes"]:
            row = op["rows"][str(s)]
            for cand in [n for n in row["fwd_bwd"] if n not in (STOCK, COPY)]:
                cells = []
                for kind in KINDS:
                    f = row[kind].get(cand)
                    cells.append("–" if f is None else f"{_num(f['us'], '.1f')} ({_num(f['vs_stock'], '.3f')}×, "
                                 f"{_num(None if f['of_copy'] is None else 100 * f['of_copy'], '.0f', ' %')})")
                err = f"{_num(_worst(acc.get(cand, {}).get(str(s)), grads), '.1e')} " \
                      f"({_num(_worst(acc.get(STOCK, {}).get(str(s)), grads), '.1e')})" if grads else "–"
                v = op["verdicts"].get(cand, {}).get(str(s))
                verdict = "–" if not v else ", ".join(
                    f"{k.replace('_', '+')} {'pass' if x['passed'] else 'FAIL'}" for k, x in v.items())
                lines.append(f"| {name} | {cand} | {s} | {cells[0]} | {cells[1]} | {err} | {verdict} |")
    return "\n".join(lines) + "\n"


def document_markdown(stem: str, doc: dict, table_grads: dict[str, tuple[str, ...]]) -> str:
    combined = doc["combined"]
    md = [f"# kernel-bench {stem}\n\n", f"{doc['device']['name']}, torch {doc['tool']['torch']}, {doc['processes']} "
          "process(es). Device time by CUDA-graph replay (row inputs rotated past L2), paired with the stock path "
          "in the same rounds; host µs: one call between two events with the host in the loop; of copy: the "
          "faster of two device-to-device copies of the operator's fewest bytes (its Cost): torch's copy_ (a "
          "memcpy) and an elementwise kernel, each way's TB/s beside it, over the subject's time, paired in the "
          "same rounds; medians over processes.\n\n", summary_markdown(combined, table_grads)]
    for name, op in combined["ops"].items():
        grads = table_grads.get(name, ())
        md += [f"\n## {name}\n\n", "\n".join(f"- {n}: {what}" for n, what in op["subjects"].items()) + "\n\n",
               times_markdown(op)]
        if op["verdicts"]:
            md += [f"\nTargets ({T.issue_of(name)}):\n\n", verdicts_markdown(op)]
        if name == T.MLP_OP and doc.get("floors", {}).get(name):
            md += ["\nFloors (fewest bytes at 4.13 TB/s; 3xTF32 tensor-core work at the mma.sync TF32 rate):\n\n",
                   floors_markdown(op, doc["floors"][name])]
        if op.get("accuracy"):
            md += ["\nErrors against FP64 (max |y − ref| / max |ref|, inputs of seed 11):\n\n", errors_markdown(op, grads)]
        bits = bits_markdown(op)
        if bits:
            md += ["\n", bits]
    md.append(f"\nTargets: {'all met' if all_passed(combined) else 'NOT all met'}.\n")
    md += [f"\nFAILED {key}: {err}\n" for key, err in doc.get("subject_errors", [])]
    md += [f"\nPROCESS FAILED: {err}\n" for err in doc.get("process_errors", [])]
    return "".join(md)
