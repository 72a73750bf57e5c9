"""Rendering a report for people: a rich table on the terminal, or markdown for a pull request."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Optional, get_args

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from adaln_bench.reports import metrics
from adaln_bench.reports.format import markdown_table
from adaln_bench.reports.mode_environments import environment_lines, input_warning
from adaln_bench.reports.schema import CandidateResult, CandidateStatus, CandidateUnavailable, Report

SHOWN_TOKENS = ("3", "256", "2048")


@dataclass(frozen=True)
class Row:
    mode: str
    candidate: str
    verdict: str
    cells: tuple[str, ...]  # one per shown T: the metrics.summary_columns() joined by " / "
    note: str


# A row whose verdict starts with one of these gave no result; its note says why.
NO_RESULT = tuple(get_args(CandidateStatus))
FAILED = "FAILED"  # a result whose candidate status (metrics.CANDIDATE_STATUSES) is a failure


def column_title(tokens: str) -> str:
    return f"T={tokens}: " + " / ".join(metrics.summary_columns())


def invariance_verdict(result: CandidateResult) -> str:
    failures = metrics.candidate_failures(result)
    prefix = f"{FAILED} ({'; '.join(failures)}); invariant: " if failures else ""
    bi = result.batch_invariance
    if bi is None:
        return prefix + "not probed"
    if bi.batch_invariant:
        return prefix + "yes"
    return prefix + "NO: " + "; ".join(metrics.probe_failures(bi))


def _cell(result: CandidateResult, tokens: str) -> str:
    entry = result.accuracy_latency.get(tokens)
    if entry is None:
        return "—"
    return " / ".join(metrics.summary_cells(entry))


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
    return f"{report.op} on {where}, torch {env.torch}, CUDA {env.cuda}{shape}{quick}{incomplete}"


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
        table.add_column(column_title(t), no_wrap=True)
    for row in rows(report):
        style = "green" if row.verdict == "yes" else ("red" if row.verdict.startswith(("NO", FAILED)) else "yellow")
        verdict = row.verdict if not row.verdict.startswith(NO_RESULT) else f"{row.verdict}: {row.note}"
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
    for line in environment_lines(report):
        console.print(escape(line))
    warning = input_warning(report)
    if warning:
        console.print(f"[bold red]{escape(warning)}[/bold red]")


def markdown(report: Report) -> str:
    lines = [f"**{header(report)}**", ""]
    cols = ["mode", "candidate", "invariant"] + [column_title(t) for t in SHOWN_TOKENS]
    table = []
    for row in rows(report):
        verdict = row.verdict if not row.verdict.startswith(NO_RESULT) else f"{row.verdict}: {row.note}"
        table.append([row.mode, f"`{row.candidate}`", verdict, *row.cells])
    lines += markdown_table(cols, table)
    groups = consistency_groups(report)
    if len(groups) > 1:
        lines += ["", "Train–infer consistency (seed 3, 257 rows; same letter = bitwise identical):", ""]
        lines += markdown_table(["mode", "candidate", "output", "d_temb"],
                                [(m, f"`{c}`", o, g) for m, c, o, g in groups])
    extra = environment_lines(report)
    warning = input_warning(report)
    if warning:
        extra.append(f"**{warning}**")
    if extra:
        lines += [""] + [f"- {line}" for line in extra]
    return "\n".join(lines) + "\n"
