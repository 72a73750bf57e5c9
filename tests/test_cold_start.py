"""The cold-start check on the CPU: fixture candidates that pass every warm probe and fail only here."""
from __future__ import annotations

import os

import pytest

from adaln_bench.harness.cold_start import ColdStartSpec, check_cold_start
from adaln_bench.harness.shapes import PRESETS
from adaln_bench.reports.schema import Shape
from conftest import ROOT

TINY = PRESETS["tiny"]


def _check(tmp_path, monkeypatch, candidate: str, timeout_s: float = 240):
    tests = ROOT / "tests"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), str(tests)]))
    monkeypatch.chdir(ROOT)
    spec = ColdStartSpec(mode="plain", candidate=candidate, device="cpu",
                         shape=Shape(dim=TINY.dim, hidden=TINY.hidden, modalities=TINY.modalities,
                                     out_features=TINY.out_features, preset="tiny"),
                         result_path=str(tmp_path / "cold.json"))
    return check_cold_start(spec, tmp_path, timeout_s=timeout_s)


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
