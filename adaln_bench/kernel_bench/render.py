"""A `kernel-bench` output's Markdown (pure): the summary line per operator, candidate and size, then per operator
its subjects, times, targets, floors, entry points, errors against FP64 and bits. What the command prints and what
`adaln-bench report` shows for a kernel-bench output."""
from __future__ import annotations

from typing import Optional

from adaln_bench.kernel_bench import targets as T
from adaln_bench.kernel_bench.combine import all_passed
from adaln_bench.datamodel.kernel_bench import COPY, KINDS, STOCK, KernelBenchReport

ENTRY_POINTS = ("fwd", "d_temb", "dW", "db")


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
    lines = ["| T | kind | MB | GFLOP | floor µs (bound) | subject | µs | of floor |", "|" + " --- |" * 8]
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
        if r.get("error"):
            lines.append(f"- {name}: FAILED: {r['error']}")
            continue
        rep = ", ".join(f"{s}: {'yes' if v else 'NO' if v is False else '–'}" for s, v in r["params_repeatable"].items())
        lines.append(f"- {name}: {r['rows_differ']} of {r['rows_compared']} rows differ; table gradients repeat: {rep or '–'}"
                     + ("" if not r["failures"] else f" ({'; '.join(r['failures'][:4])})"))
    return "\n".join(lines) + "\n"


def _worst(entry: Optional[dict], grads: tuple[str, ...]) -> Optional[float]:
    values = [(entry or {}).get("grads", {}).get(g) for g in grads]
    present = [v for v in values if v is not None]
    return max(present) if present else None


def entries_markdown(entries: dict) -> str:
    """Per library and size, the median over processes of each C entry point's device time alone (µs)."""
    lines = ["| library | T | " + " | ".join(ENTRY_POINTS) + " |", "|" + " --- |" * (2 + len(ENTRY_POINTS))]
    for name, by_s in entries.items():
        for s in sorted(by_s, key=int):
            lines.append(f"| {name} | {s} | " + " | ".join(_num(by_s[s].get(p), ".1f") for p in ENTRY_POINTS) + " |")
    return "\n".join(lines) + "\n"


def table_grads_of(combined: dict) -> dict[str, tuple[str, ...]]:
    return {name: tuple(op.get("table_grads") or ()) for name, op in combined["ops"].items()}


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


FLOORS_NOTE = {T.MLP_OP: "fewest bytes at 4.13 TB/s; 3xTF32 tensor-core work at the mma.sync TF32 rate"}


def report_markdown(report: KernelBenchReport, stem: str) -> str:
    """The Markdown of a validated output (`adaln-bench report`)."""
    note = "" if report.converted_from is None else \
        f"(Read from kernel-bench's older {report.converted_from} layout.)\n\n"
    text = document_markdown(stem, report.document())
    head, sep, rest = text.partition("\n\n")
    return head + sep + note + rest


def document_markdown(stem: str, doc: dict) -> str:
    combined = doc["combined"]
    table_grads = table_grads_of(combined)
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
        if (doc.get("floors") or {}).get(name):
            what = FLOORS_NOTE.get(name, "fewest bytes at 4.13 TB/s; the GEMMs at 790 TFLOP/s bf16")
            md += [f"\nFloors ({what}):\n\n", floors_markdown(op, doc["floors"][name])]
        if op.get("entries"):
            md += ["\nC entry points alone (µs):\n\n", entries_markdown(op["entries"])]
        if op.get("accuracy"):
            md += ["\nErrors against FP64 (max |y − ref| / max |ref|, inputs of seed 11):\n\n", errors_markdown(op, grads)]
        bits = bits_markdown(op)
        if bits:
            md += ["\n", bits]
    if any(op["verdicts"] for op in combined["ops"].values()):
        md.append(f"\nTargets: {'all met' if all_passed(combined) else 'NOT all met'}.\n")
    md += [f"\nFAILED {key}: {err}\n" for key, err in doc.get("subject_errors", [])]
    md += [f"\nPROCESS FAILED: {err}\n" for err in doc.get("process_errors", [])]
    return "".join(md)
