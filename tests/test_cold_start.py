"""The cold-start check on the CPU: fixture candidates that pass every warm probe and fail only here."""
from __future__ import annotations

import json
import os

import pytest

from adaln_bench.harness.cold_start import ColdStartSpec, check_cold_start
from adaln_bench.harness.shapes import PRESETS
from conftest import ROOT


def _check(tmp_path, monkeypatch, candidate: str, timeout_s: float = 240):
    tests = ROOT / "tests"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), str(tests)]))
    monkeypatch.chdir(ROOT)
    spec = ColdStartSpec(mode="plain", candidate=candidate, device="cpu", shape=PRESETS["tiny"],
                         result_path=str(tmp_path / "cold.json"))
    return check_cold_start(spec, timeout_s=timeout_s)


@pytest.mark.slow
def test_an_honest_candidate_passes_both_steps(tmp_path, monkeypatch):
    result = _check(tmp_path, monkeypatch, "diffusers")
    assert result.status == "ok", result
    assert result.steps_passed == ["first_step", "foreign_thread"] and result.failed_step is None


@pytest.mark.slow
def test_a_backward_that_dies_in_a_fresh_thread_is_a_crash_of_that_step(tmp_path, monkeypatch):
    result = _check(tmp_path, monkeypatch, "fixture_candidates:crash_in_fresh_thread")
    assert result.status == "crashed"
    assert result.steps_passed == ["first_step"] and result.failed_step == "foreign_thread"
    assert "SIGILL" in result.reason


@pytest.mark.slow
def test_a_raising_candidate_is_a_failure_with_its_message(tmp_path, monkeypatch):
    result = _check(tmp_path, monkeypatch, "fixture_candidates:raises")
    assert result.status == "failed" and result.failed_step == "first_step"
    assert "deliberate failure inside the candidate" in result.reason


@pytest.mark.slow
def test_a_hanging_candidate_times_out(tmp_path, monkeypatch):
    monkeypatch.delenv("FIXTURE_MARKER", raising=False)
    result = _check(tmp_path, monkeypatch, "fixture_candidates:hang", timeout_s=20)
    assert result.status == "timeout" and result.failed_step == "first_step"


@pytest.mark.slow
def test_a_run_keeps_the_results_and_report_and_diff_show_the_cold_start_failure(tmp_path):
    from conftest import run_cli

    out = tmp_path / "run.json"
    tests = str(ROOT / "tests")
    proc = run_cli("run", "--device", "cpu", "--preset", "tiny", "--quick", "--quiet", "--mode", "plain",
                   "--candidate", "fixture_candidates:crash_in_fresh_thread", "--candidate", "diffusers",
                   "--out", str(out), env={"PYTHONPATH": tests})
    assert out.exists(), proc.stderr
    report = json.loads(out.read_text())
    bad = report["results"]["plain"]["fixture_candidates:crash_in_fresh_thread"]
    assert bad["cold_start"]["status"] == "crashed" and bad["cold_start"]["failed_step"] == "foreign_thread"
    assert bad["batch_invariance"]["batch_invariant"] is True  # its warm results are kept beside the failure
    assert bad["batch_invariance"]["random_rows"]["comparisons"] > 0
    assert report["results"]["plain"]["diffusers[plain]"]["cold_start"]["status"] == "ok"

    shown = run_cli("report", str(out), env={"PYTHONPATH": tests, "COLUMNS": "200"})
    assert "cold_start crashed" in shown.stdout

    bad["cold_start"] = {"status": "ok", "steps_passed": ["first_step", "foreign_thread"]}
    healthy = tmp_path / "healthy.json"
    healthy.write_text(json.dumps(report))
    diff = run_cli("diff", str(healthy), str(out), "--json")
    assert diff.returncode == 1, diff.stdout + diff.stderr
    rows = [r for r in json.loads(diff.stdout)["rows"] if r["verdict"] == "WORSE"]
    assert [(r["candidate"], r["metric"], r["old"], r["new"]) for r in rows] == [
        ("fixture_candidates:crash_in_fresh_thread", "cold_start", "ok", "crashed")]
