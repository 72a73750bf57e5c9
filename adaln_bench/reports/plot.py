"""One PNG that answers the three questions at a glance: how fast, how accurate, which pairs are invariant.

Panels: forward and forward + backward latency against T, the forward, d_temb and dW errors against
FP64 against T (all on log axes), and a matrix of the batch-invariance probes per (mode, candidate).
Colour and marker name the (mode, candidate); line style names the report, so two reports overlay.
Latencies with a kept distribution are drawn with their interquartile range shaded.
matplotlib is optional (the `plot` extra); the figure is drawn on the Agg canvas, without pyplot.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from adaln_bench.errors import UserError
from adaln_bench.reports.io import write_atomic
from adaln_bench.reports.schema import AccuracyLatency, CandidateResult, Report

INSTALL_HINT = "plotting needs matplotlib: pip install 'adaln-bench[plot]'"
LINE_STYLES = ("-", "--", ":", "-.")
LINE_STYLE_NAMES = ("solid", "dashed", "dotted", "dash-dot")
MAX_REPORTS = len(LINE_STYLES)
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*", "p")

# (panel title, metric) in panel order; the metric names are AccuracyLatency fields or grad_rel_err keys.
LATENCY_PANELS = (("Forward latency", "fwd_us"), ("Forward + backward latency", "fwd_bwd_us"))
ERROR_PANELS = (
    ("Forward error vs FP64", "fwd_rel_err"),
    ("d_temb error vs FP64", "grad_rel_err.temb"),
    ("dW error vs FP64", "grad_rel_err.w"),
)
PROBE_COLUMNS = ("fwd rows", "d_temb rows", "sub-batches", "sweep", "params", "invariant")

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


def _value(point: AccuracyLatency, metric: str) -> Optional[float]:
    if metric.startswith("grad_rel_err."):
        return None if point.grad_rel_err is None else getattr(point.grad_rel_err, metric.split(".", 1)[1])
    return getattr(point, metric)


def series(report: Report, metric: str) -> list[Series]:
    """Points of one metric against T per (mode, candidate); zero and missing values are left out (log axes)."""
    out = []
    for mode, candidates in report.results.items():
        for candidate, entry in candidates.items():
            if not isinstance(entry, CandidateResult):
                continue
            points = sorted(
                (int(t), v, getattr(p, metric + "_dist", None)) for t, p in entry.accuracy_latency.items()
                if t.isdigit() and (v := _value(p, metric)) is not None and v > 0
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
    """One cell per PROBE_COLUMNS entry: how many differ (red), 0 (green), or no result (grey)."""
    entry = report.results.get(mode, {}).get(candidate)
    if entry is None:
        return [Cell("", "white")] * len(PROBE_COLUMNS)
    if not isinstance(entry, CandidateResult):
        return [Cell("n/a", GREY)] * len(PROBE_COLUMNS)
    inv = entry.batch_invariance
    if inv is None:
        return [Cell("—", GREY)] * len(PROBE_COLUMNS)

    def count(n: int) -> Cell:
        return Cell(f"{n}", RED if n else GREEN)

    sub = inv.full_vs_sub_batches
    return [
        count(sum(c.fwd_differ for c in inv.all_rows.values())),
        count(sum(c.rowgrad_differ for c in inv.all_rows.values())),
        count(sub.fwd_differ + sub.rowgrad_differ),
        count(inv.batch_size_sweep.differ),
        Cell("yes" if inv.params_repeatable else "NO", GREEN if inv.params_repeatable else RED),
        Cell("YES" if inv.batch_invariant else "NO", GREEN if inv.batch_invariant else RED),
    ]


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


def _us_formatter(value: float, _pos: int) -> str:
    if value >= 1e6:
        return f"{value / 1e6:g} s"
    if value >= 1e3:
        return f"{value / 1e3:g} ms"
    return f"{value:g} µs"


def _err_formatter(value: float, _pos: int) -> str:
    return f"{value:.1e}".replace("e-0", "e-")


def plot_reports(reports: list[tuple[str, Report]], out: str | os.PathLike[str]) -> Path:
    """Draw the figure for one to four (label, report) pairs and write it to `out` as a PNG."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter

    if not 1 <= len(reports) <= MAX_REPORTS:
        raise UserError(f"plot takes 1 to {MAX_REPORTS} reports, not {len(reports)}")
    all_pairs = pairs([r for _, r in reports])
    import matplotlib

    palette = matplotlib.colormaps["tab10" if len(all_pairs) <= 10 else "tab20"]
    style = {
        key: (palette(i % palette.N), MARKERS[i % len(MARKERS)]) for i, key in enumerate(all_pairs)
    }

    fig = Figure(figsize=(21, 12), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(2, 3)
    axes = [fig.add_subplot(grid[i // 3, i % 3]) for i in range(5)]
    matrix_ax = fig.add_subplot(grid[1, 2])

    all_ts = sorted({t for _, r in reports for s in series(r, "fwd_us") + series(r, "fwd_rel_err") for t in s.ts})
    for ax, (title, metric) in zip(axes, LATENCY_PANELS + ERROR_PANELS):
        for (_, report), line_style in zip(reports, LINE_STYLES):
            for s in series(report, metric):
                colour, marker = style[s.key]
                ax.plot(s.ts, s.values, linestyle=line_style, color=colour, marker=marker, markersize=6,
                        linewidth=1.8, markerfacecolor=colour if line_style == "-" else "white")
                if s.q1:
                    ax.fill_between(s.ts, s.q1, s.q3, color=colour, alpha=0.15, linewidth=0)
        _t_axis(ax, all_ts)
        ax.set_yscale("log")
        if metric in ("fwd_us", "fwd_bwd_us"):
            ax.yaxis.set_major_formatter(FuncFormatter(_us_formatter))
            ax.set_ylabel("median time per call")
        else:
            # Errors of one candidate family often span less than a decade: label the minor ticks too.
            ax.yaxis.set_major_formatter(FuncFormatter(_err_formatter))
            low, high = ax.get_ylim()
            if high / low < 10:
                ax.yaxis.set_minor_formatter(FuncFormatter(_err_formatter))
                ax.tick_params(axis="y", which="minor", labelsize=8)
            ax.set_ylabel("max |y − ref| / max |ref|")
        ax.set_title(f"{title} (lower is better)", fontsize=13, loc="left")

    _draw_matrix(matrix_ax, reports, all_pairs, style)

    handles = [Line2D([], [], color=style[k][0], marker=style[k][1], linestyle="-", linewidth=2,
                      label=pair_label(*k)) for k in all_pairs]
    if len(reports) > 1:
        handles += [Line2D([], [], color="black", linestyle=ls, linewidth=2, label=label)
                    for (label, _), ls in zip(reports, LINE_STYLES)]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 5), fontsize=11,
               frameon=False)
    fig.suptitle(_title(reports), fontsize=15)
    return _save_png(fig, out)


def _draw_matrix(ax, reports: list[tuple[str, Report]], all_pairs: list[tuple[str, str]], style) -> None:
    from matplotlib.patches import Rectangle

    ncols = len(PROBE_COLUMNS)
    for col_block, (_, report) in enumerate(reports):
        for row, (mode, candidate) in enumerate(all_pairs):
            for col, cell in enumerate(invariance_cells(report, mode, candidate)):
                x = col_block * (ncols + 0.4) + col
                ax.add_patch(Rectangle((x, row), 0.96, 0.92, facecolor=cell.colour, edgecolor="white"))
                ax.text(x + 0.48, row + 0.46, cell.text, ha="center", va="center", fontsize=9,
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
        for col, name in enumerate(PROBE_COLUMNS):
            xs.append(left + col + 0.48)
            labels.append(name)
        if len(reports) > 1:
            ax.text(left + ncols / 2, -0.25, f"{Path(label).name}\n({LINE_STYLE_NAMES[block]})", ha="center",
                    va="bottom", fontsize=9)
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=9)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    hidden = pairs_without_result([r for _, r in reports])
    note = f"\n{hidden} (mode, candidate) pairs without a result are not shown" if hidden else ""
    ax.set_title(f"Batch invariance: rows or batches that differ\n(green: none, red: some, grey: no result){note}",
                 fontsize=11, loc="center", pad=32 if len(reports) > 1 else 6)


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
