"""One PNG that answers the three questions at a glance: how fast, how accurate, which pairs are invariant.

Panels: forward and forward + backward latency against T (host-inclusive event medians), the forward, d_temb
and dW errors against FP64 against T (all on log axes, ticks in units), and a matrix of the batch-invariance
probes per (mode, candidate). Panels with nothing to draw (the errors of a latency-only report) are left out;
series with the same points are drawn as rings round each other, with a note saying which.
Colour and marker name the (mode, candidate); line style names the report, so two reports overlay.
Latencies with a kept distribution are drawn with their interquartile range shaded.
matplotlib is optional (the `plot` extra); the figure is drawn on the Agg canvas, without pyplot.
"""
from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from adaln_bench.errors import UserError
from adaln_bench.datamodel import metrics
from adaln_bench.datamodel.format import MISSING
from adaln_bench.datamodel.io import write_atomic
from adaln_bench.datamodel.schema import CandidateResult, Report

INSTALL_HINT = "plotting needs matplotlib: pip install 'adaln-bench[plot]'"
LINE_STYLES = ("-", "--", ":", "-.")
LINE_STYLE_NAMES = ("solid", "dashed", "dotted", "dash-dot")
MAX_REPORTS = len(LINE_STYLES)
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*", "p")

PANEL_COLUMNS = 3  # panels per row of the figure; the invariance matrix takes the last place
PANEL_HEIGHT = 6  # inches per row

GREEN, RED, GREY = "#4caf50", "#e53935", "#cfd8dc"


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError(INSTALL_HINT) from None


# --- what is drawn, without matplotlib: small pure functions -----------------------------------------


@dataclass(frozen=True)
class Series:
    key: tuple[str, str]  # (mode, candidate)
    ts: tuple[int, ...]
    values: tuple[float, ...]
    # The interquartile range per point, for latencies whose distribution the report kept; else empty.
    q1: tuple[float, ...] = ()
    q3: tuple[float, ...] = ()


@dataclass(frozen=True)
class Cell:
    text: str
    colour: str


def pair_label(mode: str, candidate: str) -> str:
    """`plain: diffusers` rather than `plain / diffusers[plain]`: the mode is already named once."""
    short = candidate[: -len(f"[{mode}]")] if candidate.endswith(f"[{mode}]") else candidate
    return f"{mode}: {short}"


def pairs(reports: list[Report]) -> list[tuple[str, str]]:
    """Every (mode, candidate) with a result in any report, in the order they first appear. Pairs that are
    unavailable everywhere are left out: they have nothing to draw and would only crowd the colours."""
    seen: dict[tuple[str, str], None] = {}
    for report in reports:
        for mode, candidates in report.results.items():
            for candidate, entry in candidates.items():
                if isinstance(entry, CandidateResult):
                    seen.setdefault((mode, candidate), None)
    return list(seen)


def pairs_without_result(reports: list[Report]) -> int:
    every = {(m, c) for r in reports for m, cands in r.results.items() for c in cands}
    return len(every - set(pairs(reports)))


def panels(reports: Sequence[Report] = ()) -> list[metrics.PointMetric]:
    """The metrics drawn against T, latencies first, in table order within each kind; the gradients drawn are
    the first two each report's operator declares."""
    grads = list(dict.fromkeys(g for r in reports for g in _declared_grads(r.op)[:2]))
    drawn = [m for m in metrics.point_metrics(grads, plotted=grads) if m.plot]
    return [m for m in drawn if m.kind is metrics.LATENCY] + [m for m in drawn if m.kind is not metrics.LATENCY]


def drawn_panels(reports: list[Report]) -> list[metrics.PointMetric]:
    """The panels with something to draw in at least one report: a latency-only report has no errors
    against FP64, and three empty panels said nothing."""
    return [m for m in panels(reports) if any(series(r, m.name) for r in reports)]


def _declared_grads(op: str) -> tuple[str, ...]:
    from adaln_bench.ops.registry import all_operators

    operator = all_operators().get(op)
    return operator.grads if operator is not None else ()


def coinciding(drawn: list[Series]) -> list[list[Series]]:
    """Groups of two or more series of one panel and report with exactly the same points: drawn one over
    the other, only the last would show."""
    groups: dict[tuple, list[Series]] = {}
    for s in drawn:
        groups.setdefault((s.ts, s.values), []).append(s)
    return [g for g in groups.values() if len(g) > 1]


def panel_title(metric: metrics.PointMetric) -> str:
    """Latency panels say that they are the host-inclusive event medians (RL-Kernel's figure), not device
    time."""
    host = ", host-inclusive event median" if metric.kind is metrics.LATENCY else ""
    return f"{metric.title}{host} ({metric.better} is better)"


def series(report: Report, name: str) -> list[Series]:
    """Points of one metric against T per (mode, candidate); zero and missing values are left out (log axes)."""
    metric = metrics.point_metric(name)
    out = []
    for mode, candidates in report.results.items():
        for candidate, entry in candidates.items():
            if not isinstance(entry, CandidateResult):
                continue
            points = sorted(
                (int(t), v, metric.distribution(p)) for t, p in entry.accuracy_latency.items()
                if t.isdigit() and (v := metric.value(p)) is not None and v > 0
            )
            if not points:
                continue
            dists = [d for _, _, d in points]
            quartiles = all(d is not None for d in dists)
            out.append(Series(
                (mode, candidate), tuple(t for t, _, _ in points), tuple(v for _, v, _ in points),
                tuple(d.q1 for d in dists) if quartiles else (), tuple(d.q3 for d in dists) if quartiles else (),
            ))
    return out


def invariance_cells(report: Report, mode: str, candidate: str) -> list[Cell]:
    """One cell per metrics.matrix_columns() entry: how many differ (red), 0 (green), or no result (grey)."""
    columns = metrics.matrix_columns()
    entry = report.results.get(mode, {}).get(candidate)
    if entry is None:
        return [Cell("", "white")] * len(columns)
    if not isinstance(entry, CandidateResult):
        return [Cell("n/a", GREY)] * len(columns)
    cells = dict(_status_cells(entry))
    inv = entry.batch_invariance
    if inv is None:
        return [cells.get(column, Cell(MISSING, GREY)) for column in columns]
    counts: dict[str, int] = {}
    for probe in metrics.count_probes():
        for record in probe.records(inv).values():
            for count in probe.counts:
                counts[count.column] = counts.get(count.column, 0) + (metrics.lookup(record, count.field) or 0)
    for column, n in counts.items():
        cells[column] = Cell(f"{n}", RED if n else GREEN)
    for flag in metrics.flag_probes():
        ok = not flag.failing(flag.value(inv))
        cells[flag.column] = Cell("yes" if ok else "NO", GREEN if ok else RED)
    cells[metrics.INVARIANT_COLUMN] = Cell("YES" if inv.batch_invariant else "NO",
                                           GREEN if inv.batch_invariant else RED)
    return [cells.get(column, Cell(MISSING, GREY)) for column in columns]


def _status_cells(entry: CandidateResult) -> list[tuple[str, Cell]]:
    cells = []
    for status in metrics.CANDIDATE_STATUSES:
        value = status.value(entry)
        cell = Cell(MISSING, GREY) if value is None else Cell(value, RED if status.failing(value) else GREEN)
        cells.append((status.column, cell))
    return cells


# --- drawing ----------------------------------------------------------------------------------------


def _t_axis(ax, ts: list[int]) -> None:
    from matplotlib.ticker import FixedLocator, NullLocator

    ax.set_xscale("log")
    if ts:
        ax.xaxis.set_major_locator(FixedLocator(ts))
        ax.set_xticklabels([str(t) for t in ts])
        ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("T (rows)")
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", axis="y", alpha=0.12)


def plot_reports(reports: list[tuple[str, Report]], out: str | os.PathLike[str]) -> Path:
    """Draw the figure for one to four (label, report) pairs and write it to `out` as a PNG."""
    require_matplotlib()
    import matplotlib

    # Every label is a report's text, never mathtext: `$\foo$` in a name is shown, not parsed (and failed).
    with matplotlib.rc_context({"text.parse_math": False}):
        return _draw(reports, out)


def _draw(reports: list[tuple[str, Report]], out: str | os.PathLike[str]) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, NullFormatter

    if not 1 <= len(reports) <= MAX_REPORTS:
        raise UserError(f"plot takes 1 to {MAX_REPORTS} reports, not {len(reports)}")
    all_pairs = pairs([r for _, r in reports])
    import matplotlib

    palette = matplotlib.colormaps["tab10" if len(all_pairs) <= 10 else "tab20"]
    style = {
        key: (palette(i % palette.N), MARKERS[i % len(MARKERS)]) for i, key in enumerate(all_pairs)
    }

    drawn = drawn_panels([r for _, r in reports]) or panels()[:1]
    grid_rows = len(drawn) // PANEL_COLUMNS + 1  # the matrix after the last panel
    fig = Figure(figsize=(21, PANEL_HEIGHT * grid_rows), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(grid_rows, PANEL_COLUMNS)
    axes = [fig.add_subplot(grid[i // PANEL_COLUMNS, i % PANEL_COLUMNS]) for i in range(len(drawn))]
    matrix_ax = fig.add_subplot(grid[len(drawn) // PANEL_COLUMNS, len(drawn) % PANEL_COLUMNS])

    all_ts = sorted({t for _, r in reports for m in drawn for s in series(r, m.name) for t in s.ts})
    for ax, metric in zip(axes, drawn):
        notes = []
        for (_, report), line_style in zip(reports, LINE_STYLES):
            report_series = series(report, metric.name)
            # Series with the same points: each later one drawn smaller, so the earlier show as rings round it.
            layer = {}
            for group in coinciding(report_series):
                for depth, s in enumerate(group):
                    layer[s.key] = (depth, len(group))
                note = " = ".join(pair_label(*s.key) for s in group)
                if note not in notes:
                    notes.append(note)
            for s in report_series:
                colour, marker = style[s.key]
                depth, size = layer.get(s.key, (0, 1))
                grow = size - 1 - depth
                ax.plot(s.ts, s.values, linestyle=line_style, color=colour, marker=marker,
                        markersize=6 + 4 * grow, linewidth=1.8 + 1.6 * grow,
                        markerfacecolor=colour if line_style == "-" and grow == 0 else "white")
                if s.q1:
                    ax.fill_between(s.ts, s.q1, s.q3, color=colour, alpha=0.15, linewidth=0)
        _t_axis(ax, all_ts)
        ax.set_yscale("log")
        ticks = FuncFormatter(lambda value, _pos, kind=metric.kind: kind.axis(value))
        ax.yaxis.set_major_formatter(ticks)
        # One formatter for every labelled tick: matplotlib's own minor labels (`2×10²`) have no unit beside
        # the major ones (`1 ms`). A span under about a decade and a half gets its minor ticks labelled.
        low, high = ax.get_ylim()
        if high / low < 30:
            ax.yaxis.set_minor_formatter(ticks)
            ax.tick_params(axis="y", which="minor", labelsize=8)
        else:
            ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_ylabel(metric.kind.axis_label)
        ax.set_title(panel_title(metric), fontsize=13, loc="left")
        if notes:
            text = textwrap.fill("same values, drawn as rings: " + "; ".join(notes), width=90)
            note = ax.text(0.01, 0.01, text, transform=ax.transAxes, fontsize=8, ha="left", va="bottom",
                           color="#455a64")
            note.set_in_layout(False)  # inside the axes: constrained layout must not make room for it

    _draw_matrix(matrix_ax, reports, all_pairs, style)

    handles = [Line2D([], [], color=style[k][0], marker=style[k][1], linestyle="-", linewidth=2,
                      label=pair_label(*k)) for k in all_pairs]
    if len(reports) > 1:
        handles += [Line2D([], [], color="black", linestyle=ls, linewidth=2, label=Path(label).name)
                    for (label, _), ls in zip(reports, LINE_STYLES)]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4), fontsize=11,
               frameon=False)
    fig.suptitle(_title(reports), fontsize=15)
    return _save_png(fig, out)


def _draw_matrix(ax, reports: list[tuple[str, Report]], all_pairs: list[tuple[str, str]], style) -> None:
    from matplotlib.patches import Rectangle

    columns = metrics.matrix_columns()
    ncols = len(columns)
    for col_block, (_, report) in enumerate(reports):
        for row, (mode, candidate) in enumerate(all_pairs):
            for col, cell in enumerate(invariance_cells(report, mode, candidate)):
                x = col_block * (ncols + 0.4) + col
                ax.add_patch(Rectangle((x, row), 0.96, 0.92, facecolor=cell.colour, edgecolor="white"))
                ax.text(x + 0.48, row + 0.46, cell.text, ha="center", va="center",
                        fontsize=9 if len(cell.text) <= 3 else 7,
                        color="white" if cell.colour in (GREEN, RED) else "black", fontweight="bold")
    width = len(reports) * (ncols + 0.4) - 0.4
    ax.set_xlim(-0.05, width)
    ax.set_ylim(len(all_pairs), -0.1)
    ax.set_yticks([i + 0.46 for i in range(len(all_pairs))])
    ax.set_yticklabels([pair_label(*k) for k in all_pairs], fontsize=10)
    for tick, key in zip(ax.get_yticklabels(), all_pairs):
        tick.set_color(style[key][0])
        tick.set_fontweight("bold")
    xs, labels = [], []
    for block, (label, _) in enumerate(reports):
        left = block * (ncols + 0.4)
        for col, name in enumerate(columns):
            xs.append(left + col + 0.48)
            labels.append(name)
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=9)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    hidden = pairs_without_result([r for _, r in reports])
    note = f"\n{hidden} (mode, candidate) pairs without a result are not shown" if hidden else ""
    if not any(isinstance(e, CandidateResult) and e.batch_invariance is not None
               for _, r in reports for cands in r.results.values() for e in cands.values()):
        note += "\nno invariance probes: latency-only (run --latency-only)"
    # The reports' blocks are named in the title, left to right: a label over the blocks ran into it.
    blocks = ("\n" + "  |  ".join(f"{Path(label).name} ({LINE_STYLE_NAMES[i]})" for i, (label, _)
                                  in enumerate(reports))) if len(reports) > 1 else ""
    ax.set_title(f"Batch invariance: rows or batches that differ\n(green: none, red: some, grey: no result)"
                 f"{note}{blocks}", fontsize=11, loc="center", pad=6)


def _title(reports: list[tuple[str, Report]]) -> str:
    first = reports[0][1]
    gpu = first.environment.gpu or first.device or first.environment.device or "unknown device"
    quick = " (quick)" if first.quick else ""
    if len(reports) == 1:
        return f"AdaLN projection on {gpu}{quick}: {reports[0][0]}"
    names = "  vs  ".join(f"{label} ({name})" for (label, _), name in zip(reports, LINE_STYLE_NAMES))
    return f"AdaLN projection on {gpu}{quick}: {names}"


def _save_png(fig, out: str | os.PathLike[str]) -> Path:
    return write_atomic(out, lambda fh: fig.savefig(fh, format="png"))
