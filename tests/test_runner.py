"""A mode's child that crashes, hangs, fails or is interrupted gets its own status; the other modes still run."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, run_cli_forked

# Each test starts real child processes that measure on the CPU: 60 to 120 s apiece on two cores. The runs' parents
# (but for the interrupted one's, which takes a signal) are forked from a process that has imported torch
# (conftest.run_cli_forked); the mode children they start are new interpreters, as always.
pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parent
# The cold-start check has its own tests (test_cold_start.py); skipping it here saves a process per pair.
TINY = ("--device", "cpu", "--preset", "tiny", "--quick", "--quiet", "--no-cold-start")
ENV = {"PYTHONPATH": str(TESTS)}


def _run(tmp_path, candidate, *extra, env=None, with_baseline=True):
    out = tmp_path / "r.json"
    baseline = ("--candidate", "diffusers") if with_baseline else ()
    proc = run_cli_forked("run", *TINY, "--mode", "plain", "--mode", "cublaslt_ws1", *baseline,
                   "--candidate", f"fixture_candidates:{candidate}", "--out", str(out), *extra,
                   env={**ENV, **(env or {})})
    return proc, json.loads(out.read_text())


def test_crash_keeps_finished_candidates_and_other_modes(tmp_path):
    proc, report = _run(tmp_path, "crash")
    assert proc.returncode == 3, proc.stderr  # a pair crashed, others were measured
    assert "1 of 4 pair(s) crashed, failed or timed out: plain/fixture_candidates:crash" in proc.stderr
    plain = report["modes"]["plain"]
    assert plain["status"] == "crashed" and plain["reason"] == "killed by signal SIGSEGV"
    assert plain["returncode"] == -signal.SIGSEGV
    # The candidate measured before the crash is kept; the crashed one says why.
    assert "batch_invariance" in report["results"]["plain"]["diffusers[plain]"]
    # --no-cold-start: measured, with no cold-start entry (the default run has one: test_first_run.py)
    assert report["results"]["plain"]["diffusers[plain]"].get("cold_start") is None
    crashed = report["results"]["plain"]["fixture_candidates:crash"]
    assert crashed["status"] == "crashed" and "SIGSEGV" in crashed["unavailable"]
    assert report["modes"]["cublaslt_ws1"]["status"] == "ok"
    assert "batch_invariance" in report["results"]["cublaslt_ws1"]["fixture_candidates:crash"]


def test_hang_past_timeout(tmp_path):
    # The limit applies to every mode: generous enough that the healthy mode finishes on a loaded 2-core machine.
    proc, report = _run(tmp_path, "hang", "--timeout", "25", with_baseline=False)
    assert proc.returncode == 3, proc.stderr
    plain = report["modes"]["plain"]
    assert plain["status"] == "timeout" and "--timeout 25" in plain["reason"]
    assert 25 <= plain["wall_s"] < 55
    assert report["results"]["plain"]["fixture_candidates:hang"]["status"] == "timeout"
    assert report["modes"]["cublaslt_ws1"]["status"] == "ok"


def test_failing_candidate_is_failed_not_crashed(tmp_path):
    proc, report = _run(tmp_path, "raises")
    assert proc.returncode == 3, proc.stderr
    assert report["modes"]["plain"]["status"] == "ok"
    entry = report["results"]["plain"]["fixture_candidates:raises"]
    assert entry["status"] == "failed"
    assert "RuntimeError: deliberate failure inside the candidate" in entry["unavailable"]


def test_interrupt_keeps_finished_modes_and_marks_incomplete(tmp_path):
    marker = tmp_path / "hanging"
    out = tmp_path / "r.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
           "FIXTURE_MISBEHAVE_IN": "cublaslt_ws1", "FIXTURE_MARKER": str(marker)}
    proc = subprocess.Popen([sys.executable, "-m", "adaln_bench", "run", *TINY, "--mode", "plain",
                             "--mode", "cublaslt_ws1", "--candidate", "fixture_candidates:hang", "--out", str(out)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not marker.exists():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    report = json.loads((tmp_path / "r.incomplete.json").read_text())
    assert report["incomplete"] is True
    assert report["modes"]["plain"]["status"] == "ok"
    assert "batch_invariance" in report["results"]["plain"]["fixture_candidates:hang"]
    assert report["modes"]["cublaslt_ws1"]["status"] == "interrupted"
    assert report["results"]["cublaslt_ws1"]["fixture_candidates:hang"]["status"] == "interrupted"


def test_one_child_per_gpu_slot_runs_modes_concurrently(tmp_path, monkeypatch):
    from adaln_bench.harness.processes.protocol import OpWork
    from adaln_bench.harness.processes.protocol import RunConfig
    from adaln_bench.harness.processes.runner import ModeJob, ModeRunner
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.modes.registry import all_modes

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), str(TESTS)]))
    monkeypatch.setenv("FIXTURE_BARRIER_DIR", str(tmp_path))
    monkeypatch.setenv("FIXTURE_BARRIER_MODES", "plain,cublaslt_ws1")
    modes = all_modes()
    options = RunConfig(device="cpu", shape=PRESETS["tiny"], quick=True, timeout_s=200)
    outcomes = {}
    with ModeRunner(options, [0, 1], lambda mode, event: None) as runner:
        work = (OpWork(op="adaln_projection", candidates=["fixture_candidates:barrier"]),)
        runner.run_all([ModeJob(modes["plain"], work), ModeJob(modes["cublaslt_ws1"], work)],
                       lambda name, outcome: outcomes.__setitem__(name, outcome))
    assert not runner.workdir.exists()  # the children's scratch files are gone once the runner closes
    assert {n: o.run.status for n, o in outcomes.items()} == {"plain": "ok", "cublaslt_ws1": "ok"}
    # Each child saw only its own GPU.
    assert {o.run.gpu_index for o in outcomes.values()} == {0, 1}
    assert {(tmp_path / m).read_text() for m in ("plain", "cublaslt_ws1")} == {"0", "1"}
    for name, outcome in outcomes.items():
        assert (tmp_path / name).read_text() == str(outcome.run.gpu_index)


def test_children_sharing_a_gpu_lease_keep_latency_alone_and_overlap_the_rest(tmp_path, monkeypatch):
    # Two modes' children at once on one (fake) GPU: the CPU run takes the lease as a CUDA run does.
    from adaln_bench.harness.processes.protocol import RunConfig
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.harness.measurement.step_clock import TRACE_VARIABLE, overlapping_exclusive
    from fake_gpu import two_modes_on_one_fake_gpu

    trace = tmp_path / "steps.jsonl"
    monkeypatch.setenv(TRACE_VARIABLE, str(trace))
    options = RunConfig(device="cpu", shape=PRESETS["tiny"], quick=True, timeout_s=300, lease=True)
    outcomes = two_modes_on_one_fake_gpu(options)
    assert {n: o.run.status for n, o in outcomes.items()} == {"plain": "ok", "cublaslt_ws1": "ok"}
    steps = [json.loads(line) for line in trace.read_text().splitlines()]
    assert {s["lease"] for s in steps} == {"gpu0"}
    assert overlapping_exclusive(steps) == []
    latency = [s for s in steps if s["phase"] == "latency"]
    assert len(latency) == 2 and all(s["exclusive"] for s in latency)
    children = {s["pid"] for s in latency}
    checks = {s["pid"] for s in steps if s["phase"] == "cold start"}
    assert len(children) == 2 and len(checks) == 2 and not children & checks  # a check takes the lease itself
    # The bits work of the two children ran side by side at some point.
    shared = [s for s in steps if not s["exclusive"]]
    assert any(a["pid"] != b["pid"] and a["start"] < b["end"] and b["start"] < a["end"]
               for a in shared for b in shared)
    for outcome in outcomes.values():  # each child accounted its steps
        times = outcome.child.time
        assert {"start-up", "build", "probes", "accuracy", "latency", "cold start"} <= set(times.phases_s)
        assert times.exclusive_s == times.phases_s["latency"]
