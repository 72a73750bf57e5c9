"""Rendering a report for people: a rich table on the terminal, or markdown for a pull request."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Optional

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from adaln_bench.reports.schema import CandidateResult, CandidateUnavailable, Report

SHOWN_TOKENS = ("3", "256", "2048")


@dataclass(frozen=True)
class Row:
    mode: str
    candidate: str
    verdict: str
    cells: tuple[str, ...]  # one per shown T: "fwd err / worst grad err / fwd+bwd time"
    note: str


def _fmt_err(x: Optional[float]) -> str:
    return "—" if x is None else f"{x:.1e}"


def _fmt_us(x: Optional[float]) -> str:
    if x is None:
        return "—"
    return f"{x / 1000:.2f} ms" if x >= 1000 else f"{x:.0f} µs"


def invariance_verdict(result: CandidateResult) -> str:
    bi = result.batch_invariance
    if bi is None:
        return "not probed"
    if bi.batch_invariant:
        return "yes"
    parts = []
    for n, c in bi.all_rows.items():
        if c.fwd_differ or c.rowgrad_differ:
            parts.append(f"all_rows[{n}] fwd {c.fwd_differ}/{c.rows}, rowgrad {c.rowgrad_differ}/{c.rows}")
    s = bi.full_vs_sub_batches
    if s.fwd_differ or s.rowgrad_differ:
        parts.append(f"sub_batches fwd {s.fwd_differ}/{s.sub_batches}, rowgrad {s.rowgrad_differ}/{s.sub_batches}")
    w = bi.batch_size_sweep
    if w.differ:
        parts.append(f"sweep {w.differ}/{w.comparisons}")
    if not bi.params_repeatable:
        parts.append("dW/db not repeatable")
    return "NO: " + "; ".join(parts)


def _cell(result: CandidateResult, tokens: str) -> str:
    entry = result.accuracy_latency.get(tokens)
    if entry is None:
        return "—"
    grads = entry.grad_rel_err
    worst = None
    if grads is not None:
        values = [v for v in (grads.temb, grads.w, grads.b) if v is not None]
        worst = max(values) if values else None
    return f"{_fmt_err(entry.fwd_rel_err)} / {_fmt_err(worst)} / {_fmt_us(entry.fwd_bwd_us)}"


def rows(report: Report) -> list[Row]:
    out = []
    for mode, candidates in report.results.items():
        for name, entry in candidates.items():
            if isinstance(entry, CandidateUnavailable):
                label = entry.status or "unavailable"
                out.append(Row(mode, name, label, tuple("—" for _ in SHOWN_TOKENS), entry.unavailable))
            else:
                out.append(Row(mode, name, invariance_verdict(entry),
                               tuple(_cell(entry, t) for t in SHOWN_TOKENS), entry.source))
    return out


def consistency_groups(report: Report) -> list[tuple[str, str, str, str]]:
    """(mode, candidate, output group, d_temb group): pairs with the same letter agree bitwise."""
    letters: dict[str, str] = {}
    grad_letters: dict[str, str] = {}

    def letter(table: dict[str, str], key: Optional[str]) -> str:
        if key is None:
            return "—"
        if key not in table:
            table[key] = chr(ord("A") + len(table)) if len(table) < 26 else f"G{len(table)}"
        return table[key]

    groups = []
    for mode, candidates in report.results.items():
        for name, entry in candidates.items():
            if isinstance(entry, CandidateResult) and entry.fingerprint is not None:
                fp = entry.fingerprint
                groups.append((mode, name, letter(letters, fp.output_sha256), letter(grad_letters, fp.d_temb_sha256)))
    return groups


def header(report: Report) -> str:
    env = report.environment
    where = env.gpu or "CPU"
    shape = f", shape D={report.shape.dim} H={report.shape.hidden} M={report.shape.modalities}" if report.shape else ""
    quick = ", QUICK (smoke test)" if report.quick else ""
    incomplete = ", INCOMPLETE" if report.incomplete else ""
    cuda = f"CUDA {env.cuda}" if env.cuda else "no CUDA"
    return f"{report.op} on {where}, torch {env.torch}, {cuda}{shape}{quick}{incomplete}"


def wide_console() -> Console:
    """A stdout console; piped output (CI logs, files) is not cut to an 80-column terminal."""
    return Console(width=None if sys.stdout.isatty() else 200)


def print_summary(report: Report, console: Optional[Console] = None) -> None:
    console = console or wide_console()
    console.print(header(report))
    table = Table(show_lines=False)
    table.add_column("mode", no_wrap=True)
    table.add_column("candidate", no_wrap=True)
    table.add_column("invariant", overflow="fold", min_width=12)
    for t in SHOWN_TOKENS:
        table.add_column(f"T={t}: fwd err / grad err / fwd+bwd", no_wrap=True)
    for row in rows(report):
        style = "green" if row.verdict == "yes" else ("red" if row.verdict.startswith("NO") else "yellow")
        verdict = row.verdict if not row.verdict.startswith(("unavailable", "failed", "crashed", "timeout", "interrupted")) \
            else f"{row.verdict}: {row.note}"
        table.add_row(escape(row.mode), escape(row.candidate), f"[{style}]{escape(verdict)}[/{style}]", *row.cells)
    console.print(table)
    groups = consistency_groups(report)
    if len(groups) > 1:
        matrix = Table(title="train–infer consistency (seed 3, 257 rows): same letter = bitwise identical")
        for col in ("mode", "candidate", "output", "d_temb"):
            matrix.add_column(col)
        for g in groups:
            matrix.add_row(*(escape(x) for x in g))
        console.print(matrix)
    if report.modes:
        for name, run in report.modes.items():
            if run.observed is not None and run.observed.reference_mode_off is False:
                console.print(f"note: mode {name} has no switch-off; its FP64 reference ran with the mode on")


def markdown(report: Report) -> str:
    lines = [f"**{header(report)}**", ""]
    cols = ["mode", "candidate", "invariant"] + [f"T={t}: fwd err / grad err / fwd+bwd" for t in SHOWN_TOKENS]
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("|" + "---|" * len(cols))
    for row in rows(report):
        verdict = row.verdict if row.verdict in ("yes", "not probed") or row.verdict.startswith("NO") \
            else f"{row.verdict}: {row.note}"
        cells = [row.mode, f"`{row.candidate}`", verdict.replace("|", "\\|"), *row.cells]
        lines.append("| " + " | ".join(cells) + " |")
    groups = consistency_groups(report)
    if len(groups) > 1:
        lines += ["", "Train–infer consistency (seed 3, 257 rows; same letter = bitwise identical):", "",
                  "| mode | candidate | output | d_temb |", "|---|---|---|---|"]
        lines += [f"| {m} | `{c}` | {o} | {g} |" for m, c, o, g in groups]
    return "\n".join(lines) + "\n"
