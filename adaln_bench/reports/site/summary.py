"""The index's answer at a glance: per operator and GPU, under each mode, which implementation to use.

The pick under a mode is the fastest candidate that is batch-invariant in the newest complete report of
that mode that probed invariance and timed it (not latency-only, not cut short), with its device time over
the stock path sampled beside it and its worst errors against FP64. Where no such report timed anything
(RL-Kernel's reports carry no device time), the most accurate invariant candidate, marked not timed.
Only one group per (operator, GPU) answers: full probes, native inputs, the shape with the most reports;
quick runs and inputs drawn as another GPU's are experiments, shown in the matrices below the summary.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from adaln_bench.datamodel import format as fmt
from adaln_bench.reports.site.history import SeriesHistory
from adaln_bench.reports.site.pages import Links, anchor, e, latency_text, latency_title
from adaln_bench.reports.site.series import (
    NATIVE_DRAW, NO, RATIO, YES, GroupKey, Latency, Point, _t_key, size_symbol,
)


@dataclass(frozen=True)
class Pick:
    """The answer under one mode of one (operator, GPU): `history` is None when no candidate is invariant.
    `t` is None when the report timed none of the invariant candidates: the most accurate one is named."""

    mode: str
    history: Optional[SeriesHistory]
    point: Optional[Point]
    t: Optional[str]
    latency: Optional[Latency]
    fwd_err: Optional[float]
    grad_err: Optional[float]
    measured: int  # candidates with a verdict under this mode in the chosen report
    invariant: int


@dataclass(frozen=True)
class Row:
    group: GroupKey
    picks: dict[str, Pick]  # by mode


def is_complete(point: Point) -> bool:
    """A report cut short (an incomplete flag, or a name the run gave it as such) never answers."""
    return not point.report.incomplete and not point.loaded.path.name.endswith(".incomplete.json")


def _newest_report(histories: list[SeriesHistory], mode: str) -> Optional[str]:
    """The SHA-256 of the newest complete report that probed invariance under `mode`, a timed one first
    (RL-Kernel's reports carry no device time: they answer only where no report of ours does)."""
    points = [p for h in histories if h.series.mode == mode for p in h.series.points
              if p.verdict in (YES, NO) and is_complete(p)]
    if not points:
        return None
    newest = max(points, key=lambda p: (bool(p.latency), p.report.started_at or "", str(p.loaded.path)))
    return newest.loaded.sha256


def _worst(values: dict[str, float]) -> Optional[float]:
    return max(values.values()) if values else None


def _accuracy_key(p: Point) -> tuple[float, float]:
    inf = float("inf")
    fwd, grad = _worst(p.fwd_err), _worst(p.grad_err)
    return (inf if fwd is None else fwd, inf if grad is None else grad)


def pick_of(histories: list[SeriesHistory], mode: str) -> Optional[Pick]:
    sha = _newest_report(histories, mode)
    if sha is None:
        return None
    here = [(h, p) for h in histories if h.series.mode == mode
            for p in h.series.points if p.loaded.sha256 == sha and p.verdict in (YES, NO)]
    invariant = [(h, p) for h, p in here if p.verdict == YES]
    if not invariant:
        return Pick(mode, None, None, None, None, None, None, len(here), 0)
    timed = [(h, p) for h, p in invariant if p.latency]
    if not timed:
        h, p = min(invariant, key=lambda hp: _accuracy_key(hp[1]))
        return Pick(mode, h, p, None, None, _worst(p.fwd_err), _worst(p.grad_err), len(here), len(invariant))
    # The largest T every timed candidate was timed at: the figure that matters for a long sequence.
    common = set.intersection(*(set(p.latency) for _, p in timed))
    t = max(common or {t for _, p in timed for t in p.latency}, key=_t_key)
    timed = [(h, p) for h, p in timed if t in p.latency]
    # Paired ratios where every candidate has one (one report: the same stock path beside each), else µs.
    by_ratio = all(p.latency[t].basis == RATIO for _, p in timed)
    h, p = min(timed, key=lambda hp: hp[1].latency[t].value if by_ratio else hp[1].latency[t].absolute_us)
    return Pick(mode, h, p, t, p.latency[t], _worst(p.fwd_err), _worst(p.grad_err), len(here), len(invariant))


def answering_groups(ops: dict[str, dict[GroupKey, list[SeriesHistory]]]) -> list[tuple[GroupKey, list[SeriesHistory]]]:
    """Per operator and GPU, the full-probe, native-input group with the most reports."""
    chosen: dict[tuple[str, str], tuple[int, GroupKey, list[SeriesHistory]]] = {}
    for op, groups in ops.items():
        for group, histories in groups.items():
            if group.quick or group.draw != NATIVE_DRAW:
                continue
            n = len({p.loaded.sha256 for h in histories for p in h.series.points})
            best = chosen.get((op, group.gpu))
            if best is None or n > best[0]:
                chosen[(op, group.gpu)] = (n, group, histories)
    return [(g, hs) for _, g, hs in (chosen[k] for k in sorted(chosen))]


def summary_rows(ops: dict[str, dict[GroupKey, list[SeriesHistory]]]) -> list[Row]:
    rows = []
    for group, histories in answering_groups(ops):
        modes = dict.fromkeys(h.series.mode for h in histories)
        picks = {m: pick for m in modes if (pick := pick_of(histories, m)) is not None}
        if picks:
            rows.append(Row(group, picks))
    return rows


# --- its HTML ----------------------------------------------------------------------------------------

INTRO = ("Per operator and GPU, under each mode: the fastest candidate that is batch-invariant in the newest "
         "complete report of that mode (full probes, native inputs); its device time over the stock path "
         "sampled beside it at the largest T or S it was timed at (×1.000 is as fast, under 1 faster; a time in µs "
         "or ms where the report has no stock path beside it); its worst forward · gradient error against "
         "FP64. Where a report timed nothing (RL-Kernel's), the most accurate invariant candidate, marked "
         "not timed. Hover a cell for its report; it links to its series. The full matrices follow.")


def _short_gpu(gpu: str) -> str:
    return gpu[len("NVIDIA "):] if gpu.startswith("NVIDIA ") else gpu


def _error(value: Optional[float]) -> str:
    return fmt.error(value, 1).replace("e-0", "e-")  # 3.7e-3: two of them fit a narrow cell


def _mode_head(mode: str) -> str:
    """A mode's name may break after its underscores, so that eight modes fit beside each other."""
    return "_<wbr>".join(e(part) for part in mode.split("_"))


def _cell(row: Row, mode: str, links: Links) -> str:
    pick = row.picks.get(mode)
    if pick is None:
        return '<td class="muted">—</td>'
    if pick.history is None:
        return (f'<td class="pick pick-none" data-mode="{e(mode)}"><span class="verdict">none</span>'
                f'<div class="since">of {pick.measured} invariant</div></td>')
    column = pick.history.series.column
    point = pick.point
    title = f"{point.loaded.path.name}: {point.commit} · {point.date}; {pick.invariant} of {pick.measured} invariant"
    if pick.latency is None:
        speed = '<span class="muted">not timed</span>'
    else:
        lat = pick.latency
        speed = (f'<span title="{e(latency_title(lat))}">{e(latency_text(lat))}</span>'
                 f' <span class="muted">{size_symbol(row.group.op)}={e(pick.t)}</span>')
    errors = " · ".join(_error(v) for v in (pick.fwd_err, pick.grad_err))
    return (f'<td class="pick" data-mode="{e(mode)}" data-candidate="{e(column)}" title="{e(title)}">'
            f'<a href="{e(links.op(row.group.op, anchor(row.group, pick.history)))}">'
            f'<b>{e(column)}</b><div>{speed}</div><div class="err">{e(errors)}</div></a></td>')


def summary_html(rows: list[Row], links: Links) -> str:
    """The table at the top of the index: one row per (operator, GPU), one column per mode."""
    if not rows:
        return ""
    modes = list(dict.fromkeys(m for r in rows for m in r.picks))
    head = "".join(f'<th class="mode">{_mode_head(m)}</th>' for m in modes)
    body = []
    for r in rows:
        cells = "".join(_cell(r, m, links) for m in modes)
        body.append(f'<tr data-op="{e(r.group.op)}" data-gpu="{e(r.group.gpu)}">'
                    f'<th><a href="{e(links.op(r.group.op))}">{e(r.group.op)}</a></th>'
                    f'<td title="{e(r.group.label)}">{e(_short_gpu(r.group.gpu))}</td>{cells}</tr>')
    return (f'<section id="summary"><h2>Which implementation to use</h2><p class="facts">{e(INTRO)}</p>'
            f'<table class="summary"><thead><tr><th>operator</th><th>GPU</th>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></section>")
