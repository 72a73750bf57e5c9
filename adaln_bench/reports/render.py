"""Rendering a report for people: a rich table on the terminal, or markdown for a pull request."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, get_args

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from adaln_bench.datamodel import metrics
from adaln_bench.datamodel.format import markdown_cell, markdown_table
from adaln_bench.datamodel.mode_environments import environment_lines, input_warning
from adaln_bench.datamodel.schema import CandidateResult, CandidateStatus, CandidateUnavailable, Report
from adaln_bench.reports.terminal import stdout_console

SHOWN_TOKENS = ("3", "256", "2048")  # of a full timestep report; an operator's own sizes otherwise


def shown_sizes(report: Report) -> tuple[str, ...]:
    """The sizes the tables show: T = 3, 256, 2048 where the report has them (the projection's full run),
    else every size it measured, up to three (a token operator's S = 4097 and 32768, a quick run's 1 and 3)."""
    measured = sorted({t for cands in report.results.values() for e in cands.values()
                       if isinstance(e, CandidateResult) for t in e.accuracy_latency if t.isdigit()}, key=int)
    if not measured or set(SHOWN_TOKENS) <= set(measured):
        return SHOWN_TOKENS
    return tuple(measured[:3]) if len(measured) <= 3 else (measured[1], measured[len(measured) // 2], measured[-1])


def size_symbol(report: Report) -> str:
    """T for a timestep operator, S for a token operator (adaln_bench/ops)."""
    from adaln_bench.ops.registry import all_operators

    op = all_operators().get(report.op)
    return op.family.size_symbol if op is not None else "T"


def _stock_short(report: Report) -> str | None:
    """How the report's operator names its stock path in a few words (ops/spec.py `stock_short`), if it does."""
    from adaln_bench.ops.registry import all_operators

    op = all_operators().get(report.op)
    return op.stock_short if op is not None else None


def stock_name(report: Report) -> str:
    return _stock_short(report) or "the stock path"


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


def column_title(tokens: str, symbol: str = "T") -> str:
    return f"{symbol}={tokens}: " + " / ".join(metrics.summary_columns())


def invariance_verdict(result: CandidateResult) -> str:
    failures = metrics.candidate_failures(result)
    prefix = f"{FAILED} ({'; '.join(failures)}); invariant: " if failures else ""
    bi = result.batch_invariance
    if bi is None:
        return prefix + "not probed"
    # The counts decide, not the stored flag: a hand-edited or buggy report can say true over non-zero counts.
    counted = metrics.probes_pass(bi)
    if counted and bi.batch_invariant:
        return prefix + "yes"
    if counted:  # the flag says no, yet every count is 0 and every flag holds
        return prefix + "NO: the report's batch_invariant is false, though every probe count is 0"
    note = "; the report's batch_invariant says true, its counts disagree" if bi.batch_invariant else ""
    return prefix + "NO: " + "; ".join(metrics.probe_failures(bi)) + note


def _cell(result: CandidateResult, tokens: str) -> str:
    entry = result.accuracy_latency.get(tokens)
    if entry is None:
        return "—"
    return " / ".join(metrics.summary_cells(entry))


def rows(report: Report) -> list[Row]:
    out = []
    sizes = shown_sizes(report)
    for mode, candidates in report.results.items():
        for name, entry in candidates.items():
            if isinstance(entry, CandidateUnavailable):
                label = entry.status or "unavailable"
                out.append(Row(mode, name, label, tuple("—" for _ in sizes), entry.unavailable))
            else:
                out.append(Row(mode, name, invariance_verdict(entry),
                               tuple(_cell(entry, t) for t in sizes), entry.source))
    return out


def row_grad_label(report: Report) -> str:
    """The consistency matrix's gradient column: `d_temb` for the projection, `d_x`, `d_res+d_y`, …"""
    names: dict[str, None] = {}
    for candidates in report.results.values():
        for entry in candidates.values():
            if isinstance(entry, CandidateResult) and entry.fingerprint is not None:
                names.update(dict.fromkeys(k[: -len("_sha256")] for k in entry.fingerprint.row_grad_hashes()))
    return "+".join(names) or "d_temb"


def consistency_groups(report: Report) -> list[tuple[str, str, str, str]]:
    """(mode, candidate, output group, row-gradient group): pairs with the same letter agree bitwise."""
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
                hashes = [h for h in fp.row_grad_hashes().values() if h is not None]
                grads = "+".join(hashes) if hashes else None
                groups.append((mode, name, letter(letters, fp.output_sha256), letter(grad_letters, grads)))
    return groups


def header(report: Report) -> str:
    env = report.environment
    where = env.gpu or "CPU"
    symbols = {"dim": "D", "hidden": "H", "modalities": "M", "frequency": "F"}
    sizes = report.shape.sizes() if report.shape else {}
    shown = " ".join(f"{symbols[k]}={v}" for k, v in sizes.items() if k in symbols)
    shape = f", shape {shown}" if shown else ""
    quick = ", QUICK (smoke test)" if report.quick else ""
    incomplete = ", INCOMPLETE" if report.incomplete else ""
    cuda = f"CUDA {env.cuda}" if env.cuda else "no CUDA"
    return f"{report.op} on {where}, torch {env.torch}, {cuda}{shape}{quick}{incomplete}"


def _short_name(mode: str, name: str) -> str:
    """A candidate's name under its mode's heading: `diffusers[plain]` under `plain` is `diffusers`."""
    suffix = f"[{mode}]"
    return name[: -len(suffix)] if name.endswith(suffix) and len(name) > len(suffix) else name


REPLAY_MARK = " (replay)"


def is_replay(entry) -> bool:
    """The stock candidate measured as its op-for-op replay (diffusers not installed): its source says so."""
    return isinstance(entry, CandidateResult) and bool(entry.source) and entry.source.startswith("replay of ")


def _table_name(mode: str, name: str, entry) -> str:
    """The short name, marked when the entry is a replay: `diffusers (replay)` is not diffusers' own code."""
    return _short_name(mode, name) + (REPLAY_MARK if is_replay(entry) else "")


def _summary(result: CandidateResult, tokens: str) -> dict[str, str]:
    """The `report` cells of one T (metrics.summary_columns(): fwd err, grad err, fwd+bwd), or dashes."""
    point = result.accuracy_latency.get(tokens)
    return dict(zip(metrics.summary_columns(), metrics.summary_cells(point)))


def _forward_time(result: CandidateResult, tokens: str) -> str:
    """The forward's event median, for an operator without a backward (timestep_sinusoid)."""
    point = result.accuracy_latency.get(tokens)
    value = point.fwd_us if point is not None else None
    return metrics.LATENCY.brief(value) if value is not None else "—"


def _verdict_and_detail(entry) -> tuple[str, Optional[str]]:
    """The short word the table shows (yes, NO, a status) and the detail printed under it."""
    if isinstance(entry, CandidateUnavailable):
        return entry.status or "unavailable", entry.unavailable
    verdict = invariance_verdict(entry)
    if verdict.startswith(FAILED):
        return FAILED, verdict[len(FAILED):].strip()
    if verdict.startswith("NO: "):
        return "NO", verdict[len("NO: "):]
    return verdict, None


_VERDICT_STYLE = {"yes": "green", "NO": "bold red", FAILED: "bold red"}


def _answer_table(report: Report) -> Table:
    """One row per (mode, candidate) under its mode: invariant or not, and forward + backward time.

    Narrow on purpose (about 75 columns with the longest mode name): the verdict and every time must show in
    full on an 80-column terminal, so counts, reasons and errors go below or in the next table.
    """
    backward = any(isinstance(e, CandidateResult) and e.has_backward for c in report.results.values()
                   for e in c.values())
    title = "batch-invariant, and forward + backward time" if backward else "batch-invariant, and forward time"
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("mode / candidate", overflow="fold", min_width=12)
    table.add_column("invariant", no_wrap=True)
    sizes, symbol = shown_sizes(report), size_symbol(report)
    for t in sizes:
        table.add_column(f"{symbol}={t}", justify="right", no_wrap=True)
    for mode, candidates in report.results.items():
        table.add_row(f"[bold]{escape(mode)}[/bold]", "", *("" for _ in sizes))
        for name, entry in candidates.items():
            word, _ = _verdict_and_detail(entry)
            style = _VERDICT_STYLE.get(word, "yellow")
            times = ["—"] * len(sizes)
            if isinstance(entry, CandidateResult):
                times = [_summary(entry, t)["fwd+bwd"] if backward else _forward_time(entry, t) for t in sizes]
            table.add_row(f"  {escape(_table_name(mode, name, entry))}", f"[{style}]{escape(word)}[/{style}]",
                          *times)
    return table


def _error_table(report: Report) -> Table:
    """Forward error and worst gradient error against FP64, for the pairs that were measured."""
    table = Table(title="error against FP64: forward / worst gradient", box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("mode / candidate", overflow="fold", min_width=12)
    sizes, symbol = shown_sizes(report), size_symbol(report)
    for t in sizes:
        table.add_column(f"{symbol}={t}", justify="right", no_wrap=True)
    for mode, candidates in report.results.items():
        measured = {name: e for name, e in candidates.items() if isinstance(e, CandidateResult)}
        if measured:
            table.add_row(f"[bold]{escape(mode)}[/bold]", *("" for _ in sizes))
        for name, entry in measured.items():
            cells = []
            for t in sizes:
                summary = _summary(entry, t)
                cells.append("—" if t not in entry.accuracy_latency else f"{summary['fwd err']}/{summary['grad err']}")
            table.add_row(f"  {escape(_short_name(mode, name))}", *cells)
    return table


def device_cells(result: CandidateResult, sizes: tuple[str, ...] = SHOWN_TOKENS) -> Optional[list[str]]:
    """Forward + backward device time at each shown size, with its ratio to the stock path sampled beside it
    where the report has one (`device_time.reference`); None when no shown size has device time."""
    cells, any_time = [], False
    for t in sizes:
        point = result.accuracy_latency.get(t)
        dt = point.device_time if point is not None else None
        if dt is None or dt.fwd_bwd_us is None:
            cells.append("—")
            continue
        any_time = True
        ratio = dt.reference.fwd_bwd_ratio if dt.reference is not None else None
        text = metrics.DEVICE.brief(dt.fwd_bwd_us)
        cells.append(f"{text} ×{ratio:.2f}" if ratio is not None else text)
    return cells if any_time else None


def has_ratios(report: Report) -> bool:
    return any(isinstance(e, CandidateResult) and any(
        p.device_time is not None and p.device_time.reference is not None
        and p.device_time.reference.fwd_bwd_ratio is not None for p in e.accuracy_latency.values())
        for cands in report.results.values() for e in cands.values())


def device_title(report: Report, markdown: bool = False) -> str:
    """Says × only where the report holds ratios (older reports have device time without a reference)."""
    if markdown:
        short = _stock_short(report)
        what = f"the {short} path" if short else "the stock path"
        return "Forward + backward device time" + (f" (× {what} sampled beside it)" if has_ratios(report) else "")
    return "forward + backward device time" + (
        f" (× {stock_name(report)}, timed beside it)" if has_ratios(report) else "")


def _device_table(report: Report) -> Table:
    """The device-time counterpart of the first table's event times: GPU time without the host's launch time,
    and (×) its ratio to the stock path sampled in the same rounds, which what moved the GPU's clock leaves
    alone."""
    table = Table(title=device_title(report), box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("mode / candidate", overflow="fold", min_width=12)
    sizes, symbol = shown_sizes(report), size_symbol(report)
    for t in sizes:
        table.add_column(f"{symbol}={t}", justify="right", no_wrap=True)
    for mode, candidates in report.results.items():
        measured = {name: cells for name, e in candidates.items()
                    if isinstance(e, CandidateResult) and (cells := device_cells(e, sizes)) is not None}
        if measured:
            table.add_row(f"[bold]{escape(mode)}[/bold]", *("" for _ in sizes))
        for name, cells in measured.items():
            table.add_row(f"  {escape(_short_name(mode, name))}", *cells)
    return table


def _detail_lines(report: Report) -> list[str]:
    """What the table's short words stand for: the failing counts of a NO, the reason for any other status.
    A mode whose every candidate gave no result for one reason gets one line."""
    lines = []
    for mode, candidates in report.results.items():
        details = {name: _verdict_and_detail(entry) for name, entry in candidates.items()}
        reasons = {(word, why) for word, why in details.values()}
        whole_mode = len(candidates) > 1 and len(reasons) == 1 and all(
            isinstance(e, CandidateUnavailable) for e in candidates.values())
        if whole_mode:
            ((word, why),) = reasons
            prefix = f"mode {mode} {word}: "
            why = why[len(prefix):] if why and why.startswith(prefix) else why
            lines.append(f"{mode} (every candidate): {word}: {why}")
            continue
        for name, (word, why) in details.items():
            if why:
                prefix = f"mode {mode} {word}: "
                why = why[len(prefix):] if why.startswith(prefix) else why
                lines.append(f"{mode} · {_short_name(mode, name)}: {word}: {why}")
    return lines


_MESSAGE = re.compile(r"\b[A-Za-z_][\w.]*(Warning|Error|Exception)\b:\s")


def telling_line(stderr: str) -> str:
    """The line of a child's stderr worth quoting: the last warning or error message (`…UserWarning: …`),
    not the source line Python prints under a warning (`return Variable._execution_engine.run_backward(`);
    the last line when none looks like one."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    messages = [line for line in lines if _MESSAGE.search(line)]
    return (messages or lines)[-1] if lines else ""


def print_summary(report: Report, console: Optional[Console] = None) -> None:
    console = console or stdout_console()
    console.print(escape(header(report)))
    console.print(_answer_table(report))
    device = _device_table(report)
    if device.row_count:
        console.print(device)
    errors = _error_table(report)
    if errors.row_count:
        console.print(errors)
    for line in _detail_lines(report):
        console.print(escape(line))
    groups = consistency_groups(report)
    if len(groups) > 1:
        matrix = Table(title="train–infer consistency (seed 3, 257 rows): same letter = bitwise identical",
                       box=box.SIMPLE_HEAD, title_justify="left")
        for col in ("mode", "candidate", "output", row_grad_label(report)):
            matrix.add_column(col, overflow="fold")
        for mode, name, out, grad in groups:
            matrix.add_row(escape(mode), escape(_short_name(mode, name)), out, grad)
        console.print(matrix)
    if report.modes:
        for name, run in report.modes.items():
            if run.observed is not None and run.observed.reference_mode_off is False:
                console.print(f"note: mode {escape(name)} has no switch-off; its FP64 reference ran with the mode on")
            if run.status == "ok" and run.stderr_tail and run.stderr_tail.strip():
                last = telling_line(run.stderr_tail)
                console.print(escape(f"note: mode {name} wrote to stderr (modes.{name}.stderr_tail), last line: {last}"))
    for line in environment_lines(report):
        console.print(escape(line))
    warning = input_warning(report)
    if warning:
        console.print(f"[bold red]{escape(warning)}[/bold red]")


def markdown(report: Report) -> str:
    lines = [f"**{markdown_cell(header(report))}**", ""]
    sizes, symbol = shown_sizes(report), size_symbol(report)
    cols = ["mode", "candidate", "invariant"] + [column_title(t, symbol) for t in sizes]
    table = []
    for row in rows(report):
        verdict = row.verdict if not row.verdict.startswith(NO_RESULT) else f"{row.verdict}: {row.note}"
        replay = REPLAY_MARK if row.note and row.note.startswith("replay of ") else ""
        table.append([row.mode, f"`{row.candidate}`{replay}", verdict, *row.cells])
    lines += markdown_table(cols, table)
    device = [(mode, f"`{name}`", *cells) for mode, candidates in report.results.items()
              for name, entry in candidates.items()
              if isinstance(entry, CandidateResult) and (cells := device_cells(entry, sizes)) is not None]
    if device:
        lines += ["", device_title(report, markdown=True) + ":", ""]
        lines += markdown_table(["mode", "candidate"] + [f"{symbol}={t}" for t in sizes], device)
    groups = consistency_groups(report)
    if len(groups) > 1:
        lines += ["", "Train–infer consistency (seed 3, 257 rows; same letter = bitwise identical):", ""]
        lines += markdown_table(["mode", "candidate", "output", row_grad_label(report)],
                                [(m, f"`{c}`", o, g) for m, c, o, g in groups])
    extra = environment_lines(report)
    warning = input_warning(report)
    if warning:
        extra.append(f"**{markdown_cell(warning)}**")
    if extra:
        lines += [""] + [f"- {line if line.startswith('**') else markdown_cell(line)}" for line in extra]
    return "\n".join(lines) + "\n"
