"""The table of probes and metrics: it agrees with the committed reports, and one entry is all a new probe,
candidate status or metric needs for diff, report and plot to show it.

The extension tests add an entry to the table and put its data in a report as a key the schema does not know
yet (pydantic keeps unknown keys), as a newer writer would.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from adaln_bench.datamodel import metrics
from adaln_bench.reports.diff import EXIT_REGRESSION, Verdict, diff_reports, exit_code
from adaln_bench.reports.diff_render import format_value
from adaln_bench.reports.plot import GREEN, GREY, RED, invariance_cells, panels
from adaln_bench.reports.render import invariance_verdict, markdown
from adaln_bench.datamodel.schema import Report

ROOT = Path(__file__).resolve().parents[1]
REPORTS = [ROOT / "results" / "b200" / "adaln_projection" / "adaln_projection.b200.prior-art.json",
           *sorted(p for p in (ROOT / "results" / "h200").rglob("adaln_projection.h200.*.json")
                   if ".accuracy." not in p.name)]  # an accuracy-only report has no verdict
REFERENCE_DATA = json.loads(REPORTS[0].read_text(encoding="utf-8"))
PAIR = ("vllm", "diffusers[vllm]")  # batch-invariant in the reference


def _results(report: Report):
    for mode, candidates in report.results.items():
        for name, entry in candidates.items():
            if hasattr(entry, "batch_invariance"):
                yield mode, name, entry


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.name)
def test_probes_pass_is_each_committed_verdict(path):
    report = Report.model_validate_json(path.read_text(encoding="utf-8"))
    verdicts = [(e.batch_invariance.batch_invariant, metrics.probes_pass(e.batch_invariance))
                for _, _, e in _results(report) if e.batch_invariance is not None]
    if not verdicts:  # only a latency-only run has no probe at all
        assert report.tool is not None and "--latency-only" in (report.tool.argv or []), path.name
        return
    assert all(written == derived for written, derived in verdicts)
    assert any(not written for written, _ in verdicts) or path.name != REPORTS[0].name


# What this project measures that RL-Kernel's report does not hold (absent there, so never compared with it).
ADDED_HERE = {"device_time.fwd_us", "device_time.fwd_bwd_us", "random_rows"}


def test_every_point_metric_and_probe_is_found_in_the_reference():
    report = Report.model_validate(REFERENCE_DATA)
    entry = report.results["plain"]["diffusers[plain]"]
    point = entry.accuracy_latency["256"]
    assert {m.name: m.value(point) is not None for m in metrics.POINT_METRICS} == {
        m.name: m.name not in ADDED_HERE for m in metrics.POINT_METRICS}
    for probe in metrics.count_probes():
        assert bool(probe.records(entry.batch_invariance)) == (probe.name not in ADDED_HERE), probe.name
    # Megatron te_native's d_temb rows differ in every counting probe; its outputs never do.
    te_native = report.results["megatron_te_native"]["diffusers[megatron_te_native]"].batch_invariance
    assert metrics.probe_failures(te_native) == [
        "all_rows[64] fwd 0/192, rowgrad 192/192", "all_rows[257] fwd 0/771, rowgrad 771/771",
        "all_rows[2048] fwd 0/6144, rowgrad 6144/6144", "sub_batches fwd 0/2060, rowgrad 2056/2060",
        "sweep 1104/2256"]


def _with(edit, data=None) -> Report:
    data = copy.deepcopy(data or REFERENCE_DATA)
    edit(data["results"][PAIR[0]][PAIR[1]])
    return Report.model_validate(data)


def test_a_new_count_probe_is_one_entry(monkeypatch):
    column = "shuffled rows"
    probe = metrics.CountProbe("shuffled_rows", "shuffled_rows",
                               (metrics.Count("fwd_differ", "fwd", column),
                                metrics.Count("rowgrad_differ", "rowgrad", column)), total="comparisons")
    monkeypatch.setattr(metrics, "PROBES", metrics.PROBES + (probe,))

    def counts(fwd: int, invariant: bool):
        def edit(entry):
            entry["batch_invariance"]["shuffled_rows"] = {"comparisons": 100, "fwd_differ": fwd, "rowgrad_differ": 0}
            entry["batch_invariance"]["batch_invariant"] = invariant
        return edit

    old, new = _with(counts(0, True)), _with(counts(3, False))
    assert metrics.probes_pass(old.results[PAIR[0]][PAIR[1]].batch_invariance)
    assert not metrics.probes_pass(new.results[PAIR[0]][PAIR[1]].batch_invariance)

    result = diff_reports(old, new)
    [row] = result.changes
    assert (row.metric, row.verdict) == ("batch_invariant", Verdict.WORSE)
    assert row.note == "lost batch invariance: shuffled_rows fwd_differ 0 → 3 of 100"
    assert exit_code(result) == EXIT_REGRESSION

    assert invariance_verdict(new.results[PAIR[0]][PAIR[1]]) == "NO: shuffled_rows fwd 3/100, rowgrad 0/100"
    assert column in metrics.matrix_columns()
    cells = dict(zip(metrics.matrix_columns(), invariance_cells(new, *PAIR)))
    assert (cells[column].text, cells[column].colour) == ("3", RED)
    # A report written before the probe existed shows no count for it, not a pass.
    before = Report.model_validate(REFERENCE_DATA)
    cells = dict(zip(metrics.matrix_columns(), invariance_cells(before, *PAIR)))
    assert (cells[column].text, cells[column].colour) == ("—", GREY)


def test_a_new_candidate_status_is_one_entry(monkeypatch):
    status = metrics.CandidateStatus("warm_start", "warm_start.status", "warm start")
    monkeypatch.setattr(metrics, "CANDIDATE_STATUSES", (status,))

    def cold(value: str):
        return lambda entry: entry.__setitem__("warm_start", {"status": value, "wall_s": 3.0})

    old, new = _with(cold("ok")), _with(cold("crashed"))
    result = diff_reports(old, new)
    [row] = result.changes
    assert (row.metric, row.old, row.new, row.verdict) == ("warm_start", "ok", "crashed", Verdict.WORSE)
    assert exit_code(result) == EXIT_REGRESSION
    assert diff_reports(new, old).changes[0].verdict is Verdict.BETTER
    # Measured for the first time: new, not a regression.
    assert diff_reports(Report.model_validate(REFERENCE_DATA), old).changes[0].verdict is Verdict.NEW

    entry = new.results[PAIR[0]][PAIR[1]]
    assert invariance_verdict(entry) == "FAILED (warm_start crashed); invariant: yes"
    assert "FAILED (warm_start crashed)" in markdown(new)
    cells = dict(zip(metrics.matrix_columns(), invariance_cells(new, *PAIR)))
    assert (cells["warm start"].text, cells["warm start"].colour) == ("crashed", RED)
    cells = dict(zip(metrics.matrix_columns(), invariance_cells(old, *PAIR)))
    assert (cells["warm start"].text, cells["warm start"].colour) == ("ok", GREEN)


def test_a_new_point_metric_is_one_entry(monkeypatch):
    metric = metrics.PointMetric("host_time.fwd_us", metrics.LATENCY, "Forward host time",
                                 dist="host_time.fwd_us_dist", plot=True)
    monkeypatch.setattr(metrics, "POINT_METRICS", metrics.POINT_METRICS + (metric,))

    def device_time(median: float):
        def edit(entry):
            for point in entry["accuracy_latency"].values():
                point["host_time"] = {"fwd_us": median, "fwd_us_dist": {
                    "min": median * 0.9, "q1": median * 0.98, "median": median, "q3": median * 1.02,
                    "max": median * 1.1, "count": 100}}
        return edit

    result = diff_reports(_with(device_time(100.0)), _with(device_time(150.0)))
    assert {(r.metric, r.verdict) for r in result.changes} == {("host_time.fwd_us", Verdict.WORSE)}
    assert len(result.changes) == len(REFERENCE_DATA["results"][PAIR[0]][PAIR[1]]["accuracy_latency"])
    assert result.changes[0].note.startswith("quartiles apart: OLD [98.0 µs, 102.0 µs]")
    assert format_value("host_time.fwd_us", 1500.0) == "1.5 ms"
    assert metric in panels()
