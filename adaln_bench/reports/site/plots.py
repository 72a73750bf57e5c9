"""The plots of one series, drawn by matplotlib as SVG for inlining into its page (offline, no script).

Panels, where the series has data for them: the device time over the reference sampled beside it (paired
ratio), the absolute device time (filled where it is the figure a step is judged on, hollow where a ratio
exists and judges instead), and the worst forward and gradient errors against FP64, one line per T.
A step is a dashed vertical line before the first point at the new level (red: slower or less accurate,
green: faster or more accurate). Each marker links to the diff with the point before it (the first point
to its report). matplotlib is the `plot` extra; it is imported only here.
"""
from __future__ import annotations

import io
import re
from typing import Callable, Optional

from adaln_bench.errors import UserError
from adaln_bench.datamodel import format as fmt
from adaln_bench.reports.site.history import Mark, SeriesHistory
from adaln_bench.reports.site.series import RATIO, size_symbol
from adaln_bench.reports.thresholds import Thresholds

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#d62728")
UP, DOWN = "#d32f2f", "#2e7d32"
BAND = "#cfd8dc"  # the ratio panel's band within diff's latency threshold of the stock path


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError("publish draws its plots with matplotlib: pip install 'adaln-bench[plot]'") from None


def _prefix_ids(svg: str, prefix: str) -> str:
    """Several SVGs inlined in one page share one id space: give this one's ids a prefix of its own."""
    svg = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', svg)
    svg = re.sub(r'url\(#([^)]+)\)', lambda m: f"url(#{prefix}{m.group(1)})", svg)
    return re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m.group(1)}"', svg)


def _step_lines(ax, marks: list[Mark]) -> set[str]:
    """Dashed lines before each step's first point; the colours drawn, for the legend."""
    drawn = set()
    for at in sorted({m.index for m in marks}):
        here = [m for m in marks if m.index == at]
        colour = UP if any(m.direction == "up" for m in here) else DOWN
        ax.axvline(at - 0.5, color=colour, linestyle="--", linewidth=1.2, alpha=0.8)
        drawn.add(colour)
    return drawn


def _no_narrower_than(ax, values: list[float], rel: float, log: bool) -> None:
    """A y-range at least ±rel around the values, so that noise well inside the threshold `diff` applies
    (a 0.3 % wobble against its 5 %) does not fill the panel's height and read as a swing."""
    if not values:
        return
    lo, hi = min(values), max(values)
    if log:
        if lo <= 0:
            return
        centre = (lo * hi) ** 0.5
        lo, hi = min(lo, centre / (1 + rel)), max(hi, centre * (1 + rel))
        pad = (hi / lo) ** 0.08
        ax.set_ylim(lo / pad, hi * pad)
    else:
        centre = (lo + hi) / 2
        lo, hi = min(lo, centre * (1 - rel)), max(hi, centre * (1 + rel))
        pad = (hi - lo) * 0.08
        ax.set_ylim(lo - pad, hi + pad)


def _panels(history: SeriesHistory) -> list[tuple[str, str]]:
    series = history.series
    panels = []
    if any(r.basis == RATIO for r in history.runs):
        panels.append(("ratio", "device time ÷ reference beside it (paired)"))
    if history.runs:
        panels.append(("absolute", "device time per call (µs)"))
    if any(p.fwd_err for p in series.points):
        panels.append(("fwd", "worst forward error vs FP64"))
    if any(p.grad_err for p in series.points):
        panels.append(("grad", "worst gradient error vs FP64"))
    return panels


def _points(history: SeriesHistory, kind: str, t: str) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """(filled, hollow) markers of one T in one panel, as (point index, value)."""
    if kind == "ratio":
        return [(i, lat.value) for r in history.runs if r.t == t and r.basis == RATIO
                for i, lat in zip(r.indexes, r.latencies)], []
    if kind == "absolute":  # hollow where a ratio exists: context only, the ratio is what is judged
        filled, hollow = [], []
        for r in history.runs:
            if r.t == t:
                for i, lat in zip(r.indexes, r.latencies):
                    (hollow if r.basis == RATIO else filled).append((i, lat.absolute_us))
        return filled, hollow
    attr = "fwd_err" if kind == "fwd" else "grad_err"
    return [(i, v) for i, p in enumerate(history.series.points)
            if (v := getattr(p, attr).get(t)) is not None and v > 0], []


def _tick_labels(history: SeriesHistory) -> list[str]:
    """Commit and day under each point; the commit alone when there are many, every k-th beyond 30."""
    points = history.series.points
    n = len(points)
    labels = [p.commit if n > 8 else f"{p.commit}\n{p.date[5:] if p.date != 'undated' else ''}" for p in points]
    every_k = max(1, (n + 29) // 30)
    return [label if i % every_k == 0 else "" for i, label in enumerate(labels)]


def series_svg(history: SeriesHistory, link: Callable[[int], str], prefix: str,
               thresholds: Thresholds = Thresholds()) -> Optional[str]:
    """The series' figure as an <svg> element, or None when it has fewer than two points or no numbers.
    The ratio panel shades the band within `diff`'s latency threshold of the stock path; every panel's
    y-range is at least as wide as the threshold `diff` applies to its figure."""
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    n = len(history.series.points)
    panels = _panels(history)
    if n < 2 or not panels:
        return None  # one point is a row of the table, not a history
    ts = history.series.ts()
    symbol = size_symbol(history.series.group.op)  # T or S: what the operator's rows are called
    colour = {t: PALETTE[i % len(PALETTE)] for i, t in enumerate(ts)}
    cols = 2 if len(panels) > 1 else 1
    rows = (len(panels) + cols - 1) // cols
    height = 2.9 * rows + 0.6
    # text.parse_math off: a commit or a name from a report is text, never mathtext (`$\foo$` would fail).
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "adaln-bench", "font.size": 8,
                                "text.parse_math": False}):
        fig = Figure(figsize=(5.4 * cols, height))
        # Fixed margins rather than a layout engine: it would draw every figure twice.
        fig.subplots_adjust(left=0.07, right=0.99, top=1 - 0.45 / height, bottom=0.13 if rows == 1 else 0.08,
                            wspace=0.15, hspace=0.55)
        axes = fig.subplots(rows, cols, squeeze=False).ravel()
        for ax in axes[len(panels):]:
            ax.set_visible(False)
        labels = _tick_labels(history)
        steps_drawn: set[str] = set()
        for ax, (kind, title) in zip(axes, panels):
            ax.set_title(title, fontsize=9, loc="left")
            values = []
            for t in ts:
                filled, hollow = _points(history, kind, t)
                every = sorted(filled + hollow)
                if not every:
                    continue
                values += [v for _, v in every]
                ax.plot([i for i, _ in every], [v for _, v in every], color=colour[t], linewidth=1, alpha=0.6)
                for group, face in ((filled, colour[t]), (hollow, "none")):
                    if group:
                        markers = ax.scatter([i for i, _ in group], [v for _, v in group], s=18, zorder=3,
                                             facecolors=face, edgecolors=colour[t])
                        markers.set_urls([link(i) for i, _ in group])
            if kind == "ratio":
                ax.axhline(1.0, color="#999", linewidth=0.8)
                band = thresholds.latency
                ax.axhspan(1 - band, 1 + band, color=BAND, alpha=0.35, linewidth=0, zorder=0)
                _no_narrower_than(ax, values + [1 - band, 1 + band], band, log=False)
                steps_drawn |= _step_lines(ax, [m for r in history.runs if r.basis == RATIO for m in r.steps])
            else:
                ax.set_yscale("log")
                ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0), numticks=12))
                # Plain tick labels: matplotlib's default log labels are mathtext, slow to lay out.
                label = (lambda v, _: fmt.duration(v, fmt.AXIS)) if kind == "absolute" else (
                    lambda v, _: fmt.axis_error(v))
                ax.yaxis.set_major_formatter(FuncFormatter(label))
                ax.yaxis.set_minor_formatter(NullFormatter())
                if kind == "absolute":
                    _no_narrower_than(ax, values, thresholds.latency, log=True)
                    steps_drawn |= _step_lines(ax, [m for r in history.runs if r.basis != RATIO for m in r.steps])
                else:
                    _no_narrower_than(ax, values, thresholds.accuracy, log=True)
                    steps_drawn |= _step_lines(
                        ax, [m for m in history.error_changes if m.what.startswith(kind + " ")])
            ax.set_xlim(-0.5, n - 0.5)
            ax.set_xticks(range(n), labels, rotation=60 if n > 6 else 0, fontsize=6.5)
            ax.grid(True, alpha=0.3)
        handles = [Line2D([], [], color=colour[t], marker="o", markersize=4, linewidth=1, label=f"{symbol}={t}")
                   for t in ts]
        if panels[0][0] == "ratio":
            handles.append(Patch(color=BAND, alpha=0.35, label=f"stock ±{thresholds.latency:.0%} (diff's threshold)"))
        for colour_, what in ((UP, "step: slower / less accurate"), (DOWN, "step: faster / more accurate")):
            if colour_ in steps_drawn:
                handles.append(Line2D([], [], color=colour_, linestyle="--", linewidth=1.2, label=what))
        fig.legend(handles=handles, loc="upper right", ncols=len(handles), fontsize=7, frameon=False)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = buf.getvalue()
    return _prefix_ids(svg[svg.index("<svg"):], prefix)
