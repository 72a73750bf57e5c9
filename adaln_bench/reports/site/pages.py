"""The HTML of the site: the index (per operator, a matrix of mode × candidate per group) and one page per
operator (per group, per series: the verdict band, the plots and a table of every point). Plain HTML and
one inline stylesheet: no script, nothing fetched, every link relative."""
from __future__ import annotations

import hashlib
import html
import re
from dataclasses import dataclass
from typing import Callable, Optional

from adaln_bench.datamodel import format as fmt
from adaln_bench.reports.current import is_incomplete
from adaln_bench.reports.site.collect import Collected, Loaded, skipped_counts
from adaln_bench.reports.site.history import SeriesHistory
from adaln_bench.reports.site.series import (
    FAILED, NO, NOT_PROBED, RATIO, UNAVAILABLE, YES, GroupKey, Latency, Point, _t_key, commit_of, gpu_of,
    size_symbol,
)

TREND_MARK = {"up": "▲", "down": "▼", "flat": "▬"}
TREND_WORD = {"up": "slower", "down": "faster", "flat": "flat"}
VERDICT_CLASS = {YES: "yes", NO: "no", UNAVAILABLE: "unavailable", FAILED: "failed", NOT_PROBED: "unprobed"}

CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.2em 2em;color:#222}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ddd}
h3{font-size:1.05em;margin:1.4em 0 .3em}h4{margin:.8em 0 .3em;font-size:.95em;color:#444}
a{color:#1559b0;text-decoration:none}a:hover{text-decoration:underline}
table{border-collapse:collapse;margin:.4em 0}th,td{border:1px solid #d5d9de;padding:3px 6px;vertical-align:top}
th{background:#f3f5f7;text-align:left;font-weight:600}
table.matrix td.cell{min-width:11em;font-size:12.5px}
.cell a{color:inherit;display:block}.cell a:hover{text-decoration:none;background:#f7f9fc}
.verdict{font-weight:700;display:inline-block;padding:0 .45em;border-radius:3px}
.v-yes .verdict,.b-yes{background:#c8e6c9;color:#1b5e20}.v-no .verdict,.b-no{background:#ffcdd2;color:#b71c1c}
.v-failed .verdict,.b-failed{background:#e57373;color:#fff}
.v-unavailable .verdict,.b-unavailable{background:#eceff1;color:#607d8b}
.v-unprobed .verdict,.b-unprobed{background:#fff8e1;color:#8d6e63}
.since{color:#777;font-size:11px}.muted{color:#888}
.trend-up{color:#d32f2f}.trend-down{color:#2e7d32}.trend-flat{color:#9e9e9e}
.band{display:flex;gap:2px;margin:.3em 0 .6em}.band a{display:block;width:1.6em;height:1.3em;border-radius:2px;
 font-size:10px;text-align:center;line-height:1.3em}
td.step-up{background:#ffebee;font-weight:700}td.step-down{background:#e8f5e9;font-weight:700}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.facts{color:#555;font-size:12.5px}.plot svg{max-width:100%;height:auto}
table.summary td,table.summary th{white-space:nowrap}table.summary th.mode{white-space:normal}
table.summary td{font-size:12px}.pick a{color:inherit}.pick-none .verdict{background:#ffcdd2;color:#b71c1c}
code{font-size:12px;background:#f3f5f7;padding:0 .2em}blockquote{color:#555;border-left:3px solid #ccc;margin-left:0;padding-left:.8em}
"""


def page(title: str, body: str, home: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>\n"
            f'<p class="facts"><a href="{home}">adaln-bench history</a></p>\n{body}\n</body></html>\n')


def e(text: object) -> str:
    return html.escape(str(text))


def latency_text(lat: Optional[Latency]) -> str:
    if lat is None:
        return fmt.MISSING
    return f"×{lat.value:.3f}" if lat.basis == RATIO else fmt.duration(lat.value, fmt.BRIEF)


def latency_title(lat: Latency) -> str:
    what = "forward + backward" if lat.metric == "fwd_bwd_us" else "forward"
    if lat.basis == RATIO:
        return f"{what} device time over the reference sampled beside it (paired); absolute {fmt.duration(lat.absolute_us)}"
    return f"{what} device time, absolute: this report has no reference sampled beside it"


def err_text(value: Optional[float]) -> str:
    return fmt.error(value, 2)


def point_at(point: Point) -> str:
    return f"{point.commit} · {point.date}"


@dataclass(frozen=True)
class Links:
    """Where a page finds the site's files: the index is at the root, operator pages one level down."""

    root: str  # "" or "../"

    def report(self, loaded: Loaded) -> str:
        return f"{self.root}reports/{loaded.site_name}"

    def op(self, op: str, anchor: str = "") -> str:
        return f"{self.root}op/{op_file(op)}" + (f"#{anchor}" if anchor else "")

    def diff(self, name: str) -> str:
        return f"{self.root}diffs/{name}.html"


def op_file(op: str) -> str:
    """The page's file name: the operator's name where it is a short plain one, else a cut and cleaned name
    with a hash of the whole after a `~` (which a plain name lacks): `adaln/projection` and
    `adaln_projection` get two pages, and a name of 300 characters one the file system accepts."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}", op):
        return op + ".html"
    digest = hashlib.sha256(op.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return re.sub(r"[^A-Za-z0-9._-]+", "_", op)[:60] + f"~{digest}.html"


def anchor(group: GroupKey, history: SeriesHistory) -> str:
    return f"{group.slug}--{history.series.slug}"


# --- the index ---------------------------------------------------------------------------------------


def _since(history: SeriesHistory, index: Optional[int], none: str, lead: str, first: Optional[int] = None,
           note: str = "") -> str:
    points = history.series.points
    if index is None:
        return f'<div class="since">{e(none)} since {e(point_at(points[first or 0]))}</div>'
    return f'<div class="since">{e(lead)} {e(point_at(points[index]))}{e(note)}</div>'


def _latency_lines(history: SeriesHistory) -> str:
    s = history.summary
    lat = s.latency
    if lat is None:
        return '<div class="ratio muted">no device time</div>'
    absolute = ' <span class="muted">absolute</span>' if lat.basis != RATIO else ""
    trend = (f'<span class="trend trend-{s.trend}" title="{e(s.trend_text)}">{TREND_MARK[s.trend]} '
             f"{TREND_WORD[s.trend]}</span>")
    note = " (absolute time)" if s.step_basis == "absolute" else ""
    return (f'<div class="ratio"><span title="{e(latency_title(lat))}">{e(latency_text(lat))}</span>{absolute} '
            f'<span class="muted">{size_symbol(history.series.group.op)}={e(s.headline_t)}</span> {trend}</div>'
            + _since(history, s.latency_since, "no step", "step at", s.latency_first, note))


def _error_lines(history: SeriesHistory) -> str:
    s = history.summary
    if s.fwd_err is None and s.grad_err is None:
        return ""
    return (f'<div class="err">fwd {e(err_text(s.fwd_err))} · grad {e(err_text(s.grad_err))}</div>'
            + _since(history, s.error_since, "unchanged", "changed at", s.error_first))


def index_cell(group: GroupKey, history: SeriesHistory, links: Links) -> str:
    """Today's verdict, latency figure with its trend and worst errors, each with where it last changed."""
    s = history.summary
    series = history.series
    nothing_measured = s.verdict in (UNAVAILABLE, FAILED) and s.latency is None and s.fwd_err is None
    body = "" if nothing_measured else _latency_lines(history) + _error_lines(history)
    return (f'<td class="cell v-{VERDICT_CLASS[s.verdict]}" data-mode="{e(series.mode)}" '
            f'data-candidate="{e(series.column)}" data-verdict="{e(s.verdict)}" '
            f'data-trend="{e(s.trend) if s.latency is not None else ""}">'
            f'<a href="{e(links.op(group.op, anchor(group, history)))}">'
            f'<span class="verdict" title="{e(s.verdict_detail)}">{e(s.verdict)}</span>'
            f'<div class="since">since {e(point_at(series.points[s.verdict_since]))}</div>{body}</a></td>')


def matrix(group: GroupKey, histories: list[SeriesHistory], links: Links) -> str:
    modes = list(dict.fromkeys(h.series.mode for h in histories))
    columns = list(dict.fromkeys(h.series.column for h in histories))
    cells = {(h.series.mode, h.series.column): h for h in histories}
    rows = []
    for mode in modes:
        tds = "".join(index_cell(group, cells[(mode, c)], links) if (mode, c) in cells else '<td class="muted">—</td>'
                      for c in columns)
        rows.append(f"<tr><th>{e(mode)}</th>{tds}</tr>")
    head = "".join(f"<th>{e(c)}</th>" for c in columns)
    return (f'<table class="matrix" data-group="{e(group.slug)}"><thead><tr><th>mode \\ candidate</th>{head}'
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def group_facts(histories: list[SeriesHistory]) -> str:
    reports = {p.loaded.sha256: p for h in histories for p in h.series.points}
    dated = sorted(reports.values(), key=lambda p: p.report.started_at or "")
    return (f'<p class="facts">{len(reports)} report{"s" if len(reports) != 1 else ""}, '
            f"{e(point_at(dated[0]))} → {e(point_at(dated[-1]))}</p>")


def reports_table(collected: Collected, links: Links) -> str:
    """Every report the site was built from, newest first, each linked to its copy under reports/ and marked
    where it is a current answer (reports/current.py) or an incomplete run."""
    rows = []
    for loaded in sorted(collected.reports, key=lambda l: l.report.started_at or "", reverse=True):
        r = loaded.report
        status = ("current" if loaded.path in collected.current
                  else "incomplete" if is_incomplete(loaded.path, r) else "history")
        rows.append(f'<tr><td><a href="{e(links.report(loaded))}">{e(loaded.path.name)}</a></td>'
                    f"<td><code>{e(commit_of(r))}</code></td><td>{e((r.started_at or '')[:16].replace('T', ' '))}</td>"
                    f"<td>{e(r.op)}</td><td>{e(gpu_of(r))}</td><td>{len(r.results)}</td>"
                    f"<td>{'quick' if r.quick else 'full'}</td><td>{status}</td></tr>")
    return ("<details><summary>Reports</summary><table><tr><th>file</th><th>commit</th><th>started (UTC)</th>"
            "<th>op</th><th>GPU</th><th>modes</th><th>probes</th><th>status</th></tr>" + "".join(rows)
            + "</table></details>")


def index_page(ops: dict[str, dict[GroupKey, list[SeriesHistory]]], collected: Collected, links: Links,
               lead: str = "") -> str:
    """`lead` (the summary of which implementation to use) comes first, before the matrices."""
    parts = ["<h1>adaln-bench: batch invariance, accuracy and speed over time</h1>", lead,
             '<h2 id="matrices">Every mode × candidate</h2>',
             '<p class="facts">Per operator and per GPU (one series per GPU, shape, probe size and input draw), '
             "a cell per mode × candidate: today's invariance verdict, the device time over the reference "
             "(the stock path sampled beside it, paired round by round) at the largest T or S with its trend "
             "(▲ slower, ▼ faster, ▬ no step beyond the series' own noise; a time in µs or ms where the report has no "
             "reference beside it), and the worst forward and gradient "
             "errors against FP64, each with the commit and date where it last changed. A cell links to its "
             "series.</p>"]
    for op, groups in ops.items():
        parts.append(f'<h2 id="op-{e(op)}"><a href="{e(links.op(op))}">{e(op)}</a></h2>')
        for group, histories in groups.items():
            parts.append(f'<h3 id="{e(op)}--{e(group.slug)}">{e(group.label)}</h3>')  # a GPU's group per op
            parts.append(group_facts(histories))
            parts.append(matrix(group, histories, links))
    skipped = skipped_counts(len(collected.not_reports), collected.run_indexes, collected.duplicates,
                             collected.incomplete)
    parts.append(reports_table(collected, links))
    parts.append(f'<p class="facts" id="counts">Built from {len(collected.reports)} reports'
                 + (f"; skipped {', '.join(skipped)}" if skipped else "") + ".</p>")
    return page("adaln-bench history", "\n".join(parts), "index.html")


# --- an operator's page ------------------------------------------------------------------------------


def band(history: SeriesHistory, links: Links) -> str:
    cells = []
    for i, p in enumerate(history.series.points):
        title = f"#{i} {point_at(p)}: {p.verdict} — {p.detail}"
        cells.append(f'<a class="b b-{VERDICT_CLASS[p.verdict]}" href="{e(links.report(p.loaded))}" '
                     f'title="{e(title)}">{"✓" if p.verdict == YES else "✗" if p.verdict in (NO, FAILED) else "·"}</a>')
    return f'<div class="band" aria-label="invariance verdict per point">{"".join(cells)}</div>'


def point_table(history: SeriesHistory, links: Links, diff_of: Callable[[int], Optional[str]], key: str) -> str:
    series = history.series
    symbol = size_symbol(series.group.op)
    ts = sorted({t for p in series.points for t in p.latency}, key=_t_key)
    steps = {(m.index, m.what): m for m in history.latency_steps()}
    changes = {(m.index, m.what): m for m in history.error_changes}
    head = ("<tr><th>#</th><th>commit</th><th>date</th><th>links</th><th>invariant</th>"
            + "".join(f"<th>{symbol}={e(t)}</th>" for t in ts) + "<th>worst fwd err</th><th>worst grad err</th></tr>")
    rows = []
    for i, p in enumerate(series.points):
        diff = diff_of(i)
        link_cell = f'<a href="{e(links.report(p.loaded))}">report</a>' + (
            f' · <a href="{e(links.diff(diff))}">diff</a>' if diff else "")
        tds = []
        for t in ts:
            lat = p.latency.get(t)
            m = steps.get((i, f"T={t}"))
            cls = f' class="num step-{m.direction}" data-step="{m.direction}"' if m else ' class="num"'
            title = f"step: {m.text}" if m else (latency_title(lat) if lat else "")
            tds.append(f'<td{cls} title="{e(title)}">{e(latency_text(lat))}{" " + TREND_MARK[m.direction] if m else ""}</td>')
        for kind, values in (("fwd", p.fwd_err), ("grad", p.grad_err)):
            worst_t = max(values, key=values.__getitem__, default=None)
            marked = [changes[(i, f"{kind} T={t}")] for t in series.ts() if (i, f"{kind} T={t}") in changes]
            cls = f' class="num step-{marked[0].direction}" data-step="{marked[0].direction}"' if marked else ' class="num"'
            title = "; ".join(f"{_what(m, symbol)}: {m.text}" for m in marked) or (
                f"at {symbol}={worst_t}" + (f" (d{p.grad_worst_of[worst_t]})" if kind == "grad" else "") if worst_t else "")
            tds.append(f'<td{cls} title="{e(title)}">{e(err_text(values[worst_t]) if worst_t else fmt.MISSING)}</td>')
        rows.append(f'<tr id="{e(key)}-p{i}" data-index="{i}"><td>{i}</td><td><code>{e(p.commit)}</code></td>'
                    f"<td>{e(p.date)}</td><td>{link_cell}</td>"
                    f'<td class="v-{VERDICT_CLASS[p.verdict]}"><span class="verdict">{e(p.verdict)}</span> '
                    f'<span class="since">{e(p.detail)}</span></td>{"".join(tds)}</tr>')
    return f'<table class="points">{head}{"".join(rows)}</table>'


def _what(mark, symbol: str) -> str:
    """A mark's `T=…` (its key along the series) as the operator's rows are called: T or S."""
    return mark.what.replace("T=", f"{symbol}=", 1)


def series_section(group: GroupKey, history: SeriesHistory, links: Links, svg: Optional[str],
                   diff_of: Callable[[int], Optional[str]]) -> str:
    s = history.series
    key = anchor(group, history)
    steps = history.latency_steps()
    notes = []
    symbol = size_symbol(group.op)
    if steps:
        notes.append("latency steps: " + "; ".join(f"#{m.index} {_what(m, symbol)} {m.text}" for m in steps))
    if history.error_changes:
        notes.append("error changes: " + "; ".join(f"#{m.index} {_what(m, symbol)} {m.text}"
                                                   for m in history.error_changes))
    if history.verdict_changes:
        notes.append("verdict changes: " + "; ".join(f"#{m.index} {m.text}" for m in history.verdict_changes))
    return (f'<section class="series" id="{e(key)}" data-mode="{e(s.mode)}" data-candidate="{e(s.candidate)}" '
            f'data-steps="{len(steps)}"><h3>{e(s.mode)} · {e(s.candidate)} '
            f'<span class="muted">on {e(group.gpu)}</span></h3>'
            + band(history, links)
            + (f'<div class="plot">{svg}</div>' if svg else "")
            + "".join(f'<p class="facts">{e(n)}</p>' for n in notes)
            + f"<details{' open' if len(s.points) <= 12 else ''}><summary>{len(s.points)} points</summary>"
            + point_table(history, links, diff_of, key) + "</details></section>")


def unavailable_list(group: GroupKey, histories: list[SeriesHistory], links: Links) -> str:
    """Series that were unavailable at every point: one line each, not a section of empty plots."""
    items = []
    for h in histories:
        last = h.series.points[-1]
        items.append(f'<li id="{e(anchor(group, h))}" data-mode="{e(h.series.mode)}" '
                     f'data-candidate="{e(h.series.candidate)}"><b>{e(h.series.mode)} · {e(h.series.candidate)}</b> '
                     f'<span class="muted">({len(h.series.points)} point{"s" if len(h.series.points) != 1 else ""}, '
                     f'last <a href="{e(links.report(last.loaded))}">{e(point_at(last))}</a>): {e(last.detail)}</span></li>')
    return f'<h3>Unavailable at every point</h3><ul class="unavailable">{"".join(items)}</ul>' if items else ""


def always_unavailable(history: SeriesHistory) -> bool:
    return all(p.verdict == UNAVAILABLE for p in history.series.points)


def op_page(op: str, sections: list[tuple[GroupKey, list[str]]]) -> str:
    parts = [f"<h1>{e(op)}</h1>",
             '<p class="facts">One section per GPU, shape, probe size and input draw: their reports never share '
             "a series. Per (mode, candidate): the invariance verdict per point (hover for the failing counts; "
             "each links to its report), the plots (each marker links to the diff with the point before it) and "
             "every point, with links to its report and that diff. Steps are marked only where the series "
             "moves beyond its own noise and the U test over the neighbouring points' samples confirms it.</p>"]
    parts.append("<ul>" + "".join(f'<li><a href="#{e(g.slug)}">{e(g.label)}</a></li>' for g, _ in sections) + "</ul>")
    for group, html_parts in sections:
        parts.append(f'<h2 id="{e(group.slug)}">{e(group.label)}</h2>')
        parts.extend(html_parts)
    return page(f"{op}: adaln-bench history", "\n".join(parts), "../index.html")


def diff_page(title: str, body_html: str, md_name: str) -> str:
    return page(title, f'<p class="facts"><a href="{e(md_name)}">Markdown</a></p>\n{body_html}', "../index.html")
