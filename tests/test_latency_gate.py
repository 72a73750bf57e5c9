"""Gating latency on device time, the fallback to event medians, and the schema's compatibility."""
import json
import random

import pytest

from adaln_bench.datamodel.io import read_report
from adaln_bench.reports.latency_gate import fallback_note, gate_device_time
from adaln_bench.datamodel.schema import AccuracyLatency, DeviceTime, Report
from adaln_bench.datamodel.stats import StatVerdict


def _point(centre, rel_sd=0.003, n=200, seed=0, processes=3, method="cuda_graph", fwd_bwd=True, throttled=False,
           warmup_ms=None):
    rng = random.Random(seed)
    fwd = [rng.gauss(centre, centre * rel_sd) for _ in range(n)]
    dt = DeviceTime(method=method, fwd_us=sorted(fwd)[n // 2], fwd_samples=fwd, processes=processes,
                    throttled=throttled, warmup_ms=warmup_ms)
    if fwd_bwd:
        fb = [rng.gauss(3 * centre, 3 * centre * rel_sd) for _ in range(n)]
        dt.fwd_bwd_us, dt.fwd_bwd_samples, dt.fwd_bwd_method = sorted(fb)[n // 2], fb, method
    return AccuracyLatency(fwd_rel_err=1e-3, fwd_us=centre * 1.3, device_time=dt)


def test_same_device_time_is_same_even_when_the_event_medians_moved():
    old, new = _point(145.0, seed=1), _point(145.0, seed=2)
    new.fwd_us = old.fwd_us * 1.87  # the host-inclusive figure jumped, as in the issue
    gate = gate_device_time(old, new, "fwd_us", threshold=0.05)
    assert gate.verdict is StatVerdict.SAME
    assert "device time:" in gate.note and "OLD 3 processes, NEW 3 processes" in gate.note


def test_a_slower_kernel_is_worse_on_both_metrics():
    old, new = _point(145.0, seed=1), _point(145.0 * 1.15, seed=2)
    for metric in ("fwd_us", "fwd_bwd_us"):
        gate = gate_device_time(old, new, metric, threshold=0.10)
        assert gate.verdict is StatVerdict.WORSE, gate.note
        assert abs(gate.change - 0.15) < 0.01


def test_a_side_without_device_time_falls_back_and_says_which():
    old = AccuracyLatency(fwd_rel_err=1e-3, fwd_us=150.0)  # RL-Kernel's report has no device time
    new = _point(140.0)
    assert gate_device_time(old, new, "fwd_us", threshold=0.05) is None
    assert fallback_note(old, new, "fwd_us") == "event medians (host-inclusive): no device time in OLD"
    no_bwd = _point(140.0, fwd_bwd=False)
    assert gate_device_time(new, no_bwd, "fwd_bwd_us", threshold=0.05) is None
    assert gate_device_time(new, no_bwd, "fwd_us", threshold=0.05) is not None


def test_a_method_change_and_throttling_are_named():
    gate = gate_device_time(_point(145.0, seed=1), _point(145.0, seed=2, method="queued", throttled=True),
                            "fwd_us", threshold=0.05)
    assert "method cuda_graph → queued" in gate.note and "NEW 3 processes, throttled" in gate.note


def _beside(point, ref_centre, seed, what="cuBLAS", clock=1.0):
    """`point` with a reference sampled beside it: its own samples over `clock`, at `ref_centre` × clock."""
    from adaln_bench.datamodel.schema import DeviceReference

    rng = random.Random(seed)
    dt = point.device_time
    dt.fwd_samples = [x * clock for x in dt.fwd_samples]
    dt.fwd_us *= clock
    ref = [rng.gauss(ref_centre, ref_centre * 0.003) * clock for _ in dt.fwd_samples]
    dt.reference = DeviceReference(what=what, fwd_us=sorted(ref)[len(ref) // 2], fwd_samples=ref)
    return point


def test_with_a_reference_beside_it_the_verdict_is_on_the_ratio_not_the_clock():
    # The same code on a GPU 8 % slower (a lower clock under its power cap): the times moved, the ratio did not.
    old = _beside(_point(221.0, seed=1, fwd_bwd=False), 226.0, seed=3)
    new = _beside(_point(221.0, seed=2, fwd_bwd=False), 226.0, seed=4, clock=1.08)
    gate = gate_device_time(old, new, "fwd_us", 0.05)
    assert gate.verdict is StatVerdict.SAME and abs(gate.change) < 0.01
    assert "relative to the reference sampled beside it" in gate.note and "absolute +8." in gate.note
    assert gate.new_us == pytest.approx(new.device_time.fwd_us)  # the row still shows the times
    # Judged on the times alone, the same two entries read WORSE: what the reference is for.
    old.device_time.reference = new.device_time.reference = None
    assert gate_device_time(old, new, "fwd_us", 0.05).verdict is StatVerdict.WORSE
    # A real 10 % slowdown beside an unchanged reference is WORSE on the ratio.
    old = _beside(_point(221.0, seed=1, fwd_bwd=False), 226.0, seed=3)
    new = _beside(_point(243.1, seed=2, fwd_bwd=False), 226.0, seed=4)
    gate = gate_device_time(old, new, "fwd_us", 0.05)
    assert gate.verdict is StatVerdict.WORSE and gate.change == pytest.approx(0.10, abs=0.01)


def test_a_reference_on_one_side_only_or_another_reference_falls_back_to_the_times():
    old = _beside(_point(221.0, seed=1, fwd_bwd=False), 226.0, seed=3)
    gate = gate_device_time(old, _point(221.0, seed=2, fwd_bwd=False), "fwd_us", 0.05)
    assert gate.note.startswith("device time:") and "absolute: no reference in NEW" in gate.note
    new = _beside(_point(221.0, seed=2, fwd_bwd=False), 226.0, seed=4, what="another GEMM")
    assert "the references differ" in gate_device_time(old, new, "fwd_us", 0.05).note


def test_a_warm_up_change_is_named_and_equal_ones_are_not():
    # A report from before the warm-up (None: first samples kept) against one with it: a figure that moved
    # because a slow spell is no longer measured says so beside its verdict.
    gate = gate_device_time(_point(134.6, seed=1), _point(117.5, seed=2, warmup_ms=200.0), "fwd_us", 0.05)
    assert "warm-up 0 → 200 ms" in gate.note
    gate = gate_device_time(_point(117.5, seed=1, warmup_ms=200.0), _point(117.5, seed=2, warmup_ms=200.0),
                            "fwd_us", 0.05)
    assert "warm-up" not in gate.note


def test_the_reference_report_still_reads_and_device_time_round_trips(reference_path, tmp_path):
    reference = read_report(reference_path)
    assert all(p.device_time is None for mode in reference.results.values() for entry in mode.values()
               if hasattr(entry, "accuracy_latency") for p in entry.accuracy_latency.values())
    data = json.loads(reference_path.read_text())
    mode = next(iter(data["results"]))
    cand = next(c for c in data["results"][mode] if "accuracy_latency" in data["results"][mode][c])
    data["results"][mode][cand]["accuracy_latency"]["1"]["device_time"] = {
        "method": "cuda_graph", "fwd_us": 145.2, "fwd_samples": [145.0, 145.2, 145.4], "processes": 3,
        "sm_clock_mhz_before": 1980.0, "sm_clock_mhz_after": 1980.0, "throttled": False}
    report = Report.model_validate(data)
    dt = report.results[mode][cand].accuracy_latency["1"].device_time
    assert dt.fwd_us == 145.2 and dt.processes == 3 and dt.fwd_bwd_us is None
    # RL-Kernel's event median is untouched beside it.
    assert report.results[mode][cand].accuracy_latency["1"].fwd_us == data["results"][mode][cand]["accuracy_latency"]["1"]["fwd_us"]
    again = json.loads(report.model_dump_json(exclude_unset=True))
    assert again["results"][mode][cand]["accuracy_latency"]["1"]["device_time"] == \
        data["results"][mode][cand]["accuracy_latency"]["1"]["device_time"]
