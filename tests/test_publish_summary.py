"""The published index answers at a glance (which implementation to use, first), its ids are unique, its
headings name only the sizes a report records, and its plots do not blow noise up into a swing."""
from __future__ import annotations

import copy
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from publish_fixtures import base, history, make

from adaln_bench.reports.site.build import build_site
from adaln_bench.reports.site.collect import collect
from adaln_bench.reports.site.history import analyse
from adaln_bench.reports.site.series import group_series, shape_of
from adaln_bench.reports.site.summary import summary_rows

pytest.importorskip("matplotlib")


def _rows(folder: Path):
    ops: dict = {}
    for group, series in group_series(collect([folder]).reports).items():
        ops.setdefault(group.op, {})[group] = [analyse(s) for s in series]
    return summary_rows(ops)


def _with_fast_copy(report: dict, ratio: float) -> dict:
    """A second invariant candidate under plain: bundled's entry, its paired ratio set to `ratio`."""
    fast = copy.deepcopy(report["results"]["plain"]["bundled"])
    for point in fast["accuracy_latency"].values():
        ref = (point.get("device_time") or {}).get("reference")
        if ref:
            ref["fwd_ratio"] = ref["fwd_bwd_ratio"] = ratio
    report["results"]["plain"]["bundled_fast"] = fast
    return report


def test_summary_is_first_and_names_the_invariant_candidate(tmp_path):
    history(tmp_path / "results")
    build_site([tmp_path / "results"], tmp_path / "site")
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    summary = index.index('<section id="summary">')
    assert summary < index.index('<table class="matrix"')
    assert index.count('<section id="summary">') == 1
    table = index[summary:index.index("</section>", summary)]
    # diffusers[plain] is not batch-invariant in the fixture, bundled is: bundled is the answer under
    # plain, at its ratio of the newest report (30 % over the 0.94 it started at).
    cells = re.findall(r'<td class="pick" data-mode="([^"]+)" data-candidate="([^"]+)"', table)
    assert cells == [("plain", "bundled")]
    assert "×1.22" in table and "T=2048" in table
    # vLLM was unavailable at every point: no answer, no column.
    assert "vllm" not in table


def test_the_fastest_invariant_wins_and_an_incomplete_report_never_answers(tmp_path):
    paths = history(tmp_path, n=2)
    newest = json.loads(paths[-1].read_text(encoding="utf-8"))
    (tmp_path / "newest.json").write_text(json.dumps(_with_fast_copy(copy.deepcopy(newest), 0.5)))
    later = make(base(), "c9" + "0" * 38, day=20, clock=1.0, bundled_ratio=0.2, seed=9)
    (tmp_path / "later.incomplete.json").write_text(json.dumps(later))
    flagged = make(base(), "c8" + "0" * 38, day=21, clock=1.0, bundled_ratio=0.1, seed=8)
    flagged["incomplete"] = True
    (tmp_path / "flagged.json").write_text(json.dumps(flagged))

    (row,) = _rows(tmp_path)
    pick = row.picks["plain"]
    assert pick.history.series.column == "bundled_fast"
    assert pick.latency.value == pytest.approx(0.5)
    assert pick.point.loaded.path.name == "newest.json"
    assert (pick.invariant, pick.measured) == (2, 3)


def test_no_invariant_candidate_is_said(tmp_path):
    report = make(base(), "c0" + "0" * 38, day=1, clock=1.0, bundled_ratio=0.94, seed=0)
    del report["results"]["plain"]["bundled"]
    (tmp_path / "r.json").write_text(json.dumps(report))
    (row,) = _rows(tmp_path)
    assert row.picks["plain"].history is None and row.picks["plain"].measured == 1


def test_headings_name_only_recorded_sizes():
    report = collect([Path(__file__).resolve().parents[1] / "results"]).reports
    shapes = {shape_of(l.report) for l in report}
    assert shapes and not any("None" in s for s in shapes)
    # A norm_modulate report records H and M only: its heading says so, without D or N.
    norm = [shape_of(l.report) for l in report if l.report.op == "norm_modulate" and l.report.shape is not None]
    assert norm and all("D=" not in s and "N=" not in s and "H=" in s for s in norm)


def test_every_id_is_unique_on_every_page_and_rows_are_t_or_s(tmp_path):
    """Two operators on one GPU and shape share a group slug: the index's headings must still differ."""
    for op, day in (("adaln_projection", 1), ("gate_residual", 2)):
        report = make(base(), op[:4].ljust(40, "0"), day=day, clock=1.0, bundled_ratio=0.94, seed=day)
        report["op"] = op
        (tmp_path / "results").mkdir(exist_ok=True)
        (tmp_path / "results" / f"{op}.json").write_text(json.dumps(report))
    history(tmp_path / "results" / "history")
    build_site([tmp_path / "results"], tmp_path / "site")
    pages = list((tmp_path / "site").rglob("*.html"))
    assert len(pages) > 3
    for page in pages:
        ids = re.findall(r'\bid="([^"]+)"', page.read_text(encoding="utf-8"))
        assert ids or page.parent.name == "diffs", page
        repeated = [i for i, n in Counter(ids).items() if n > 1]
        assert not repeated, f"{page.name}: {repeated[:3]}"
    # A token operator's rows are S, a timestep operator's T, in the tables' heads.
    tokens = (tmp_path / "site" / "op" / "gate_residual.html").read_text(encoding="utf-8")
    timesteps = (tmp_path / "site" / "op" / "adaln_projection.html").read_text(encoding="utf-8")
    assert "<th>S=" in tokens and not re.search(r"\bT=", tokens)
    assert "<th>T=" in timesteps and "<th>S=" not in timesteps


def test_plots_keep_the_threshold_band_and_mark_steps_in_the_legend(tmp_path):
    history(tmp_path / "results")
    build_site([tmp_path / "results"], tmp_path / "site")
    page = (tmp_path / "site" / "op" / "adaln_projection.html").read_text(encoding="utf-8")
    bundled = page[page.index('data-candidate="bundled"'):]
    bundled = bundled[:bundled.index("</section>")]
    assert "diff&#x27;s threshold" in bundled or "diff's threshold" in bundled
    assert "step: slower" in bundled  # the planted step, drawn and named in the legend
    svg = bundled[bundled.index("<svg"):bundled.index("</svg>")]
    assert re.search(r">\s*T=2048\s*<", svg)  # each line of the legend names its row count


def test_a_small_wobble_gets_a_range_no_narrower_than_the_threshold():
    from matplotlib.figure import Figure

    from adaln_bench.reports.site.plots import _no_narrower_than

    for log, values in ((False, [1.000, 1.003, 0.998]), (True, [400.0, 401.2, 399.5])):
        ax = Figure().subplots()
        ax.plot(range(3), values)
        if log:
            ax.set_yscale("log")
        _no_narrower_than(ax, values, 0.05, log=log)
        lo, hi = ax.get_ylim()
        assert hi / lo >= 1.05 ** 2 * 0.999 if log else hi - lo >= 0.1
        assert lo <= min(values) and hi >= max(values)
    # A range already wider than the threshold is left as the data make it.
    ax = Figure().subplots()
    _no_narrower_than(ax, [0.5, 1.5], 0.05, log=False)
    lo, hi = ax.get_ylim()
    assert lo < 0.5 and hi > 1.5 and hi - lo < 1.2
