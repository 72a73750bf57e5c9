"""The cold-start check on the CPU: fixture candidates that pass every warm probe and fail only here."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from adaln_bench.harness.processes.cold_start import ColdStartSpec, check_cold_start
from adaln_bench.harness.processes.protocol import RunConfig
from adaln_bench.datamodel.schema import ColdStart
from adaln_bench.harness.assembly.shapes import PRESETS
from conftest import ROOT


# A CPU child forks its checks from a server that has imported torch (harness/processes/fork_server.py); that needs a
# single-threaded process, which a pytest worker is not, so the fork cases run in a small driver process.
_FORK_DRIVER = """
import json, sys
import torch
from adaln_bench.harness.processes import cold_start
from adaln_bench.harness.processes.fork_server import ForkServer
spec = cold_start.ColdStartSpec.model_validate_json(sys.argv[1])
server = ForkServer.start(cold_start.main, cold_start.in_new_interpreter)
result = cold_start.check_cold_start(spec, float(sys.argv[2]), server.launch)
server.close()
print(json.dumps({"forked": server.forked, "result": result.model_dump(mode="json")}))
"""


def _check(tmp_path, monkeypatch, candidate: str, timeout_s: float = 240, launch: str = "interpreter"):
    tests = ROOT / "tests"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), str(tests)]))
    monkeypatch.chdir(ROOT)
    spec = ColdStartSpec(config=RunConfig(device="cpu", shape=PRESETS["tiny"]), mode="plain", op="adaln_projection",
                         candidate=candidate, result_path=str(tmp_path / "cold.json"))
    if launch == "interpreter":
        result = check_cold_start(spec, timeout_s=timeout_s)
        assert result.process == "interpreter"
        return result
    proc = subprocess.run([sys.executable, "-c", _FORK_DRIVER, spec.model_dump_json(), str(timeout_s)],
                          capture_output=True, text=True, timeout=timeout_s + 120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout.splitlines()[-1])
    # The check ran in a fork of the server, not in a new interpreter, and its result says so.
    assert answer["forked"] == 1 and answer["result"]["process"] == "fork"
    return ColdStart.model_validate(answer["result"])


LAUNCHES = pytest.mark.parametrize("launch", ["interpreter", "fork"])


@pytest.mark.slow
@LAUNCHES
def test_an_honest_candidate_passes_both_steps(tmp_path, monkeypatch, launch):
    result = _check(tmp_path, monkeypatch, "diffusers", launch=launch)
    assert result.status == "ok", result
    assert result.steps_passed == ["first_step", "foreign_thread"] and result.failed_step is None


@pytest.mark.slow
@LAUNCHES
def test_a_backward_that_dies_in_a_fresh_thread_is_a_crash_of_that_step(tmp_path, monkeypatch, launch):
    result = _check(tmp_path, monkeypatch, "fixture_candidates:crash_in_fresh_thread", launch=launch)
    assert result.status == "crashed"
    assert result.steps_passed == ["first_step"] and result.failed_step == "foreign_thread"
    assert "SIGILL" in result.reason


@pytest.mark.slow
@LAUNCHES
def test_a_raising_candidate_is_a_failure_with_its_message(tmp_path, monkeypatch, launch):
    result = _check(tmp_path, monkeypatch, "fixture_candidates:raises", launch=launch)
    assert result.status == "failed" and result.failed_step == "first_step"
    assert "deliberate failure inside the candidate" in result.reason


@pytest.mark.slow
@LAUNCHES
def test_a_hanging_candidate_times_out(tmp_path, monkeypatch, launch):
    monkeypatch.delenv("FIXTURE_MARKER", raising=False)
    result = _check(tmp_path, monkeypatch, "fixture_candidates:hang", timeout_s=20, launch=launch)
    assert result.status == "timeout" and result.failed_step == "first_step"


def _driver(tmp_path, code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "OMP_NUM_THREADS": "1",
                               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_a_process_with_a_second_thread_starts_no_fork_server(tmp_path):
    """Forking a process with other threads is unsafe (an OpenMP pool, a lock held): the checks get interpreters."""
    got = _driver(tmp_path, """
import json, threading, time
import torch
from adaln_bench.harness.processes.fork_server import ForkServer
alone = ForkServer.start(lambda argv: 0, None)
alone.close()
threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
print(json.dumps({"alone": alone is not None, "with_a_thread": ForkServer.start(lambda argv: 0, None) is not None}))
""")
    assert got == {"alone": True, "with_a_thread": False}


def test_when_the_server_is_gone_each_check_gets_an_interpreter(tmp_path):
    got = _driver(tmp_path, """
import json, os, signal
import torch
from adaln_bench.harness.processes.fork_server import ForkServer, Launched
calls = []
def fallback(path, timeout):
    calls.append(path)
    return Launched("", "", 0, False)
server = ForkServer.start(lambda argv: 0, fallback)
os.kill(server.pid, signal.SIGKILL)
os.waitpid(server.pid, 0)
first, second = server.launch("a.spec.json", 5.0), server.launch("b.spec.json", 5.0)
print(json.dumps({"forked": server.forked, "fallback": calls, "process": [first.process, second.process]}))
""")
    assert got == {"forked": 0, "fallback": ["a.spec.json", "b.spec.json"], "process": ["interpreter", "interpreter"]}


@pytest.mark.slow
def test_a_run_keeps_the_results_and_report_and_diff_show_the_cold_start_failure(tmp_path):
    from conftest import run_cli_forked

    out = tmp_path / "run.json"
    tests = str(ROOT / "tests")
    proc = run_cli_forked("run", "--device", "cpu", "--preset", "tiny", "--quick", "--quiet", "--mode", "plain",
                   "--candidate", "fixture_candidates:crash_in_fresh_thread", "--candidate", "diffusers",
                   "--out", str(out), env={"PYTHONPATH": tests})
    assert out.exists(), proc.stderr
    report = json.loads(out.read_text())
    bad = report["results"]["plain"]["fixture_candidates:crash_in_fresh_thread"]
    assert bad["cold_start"]["status"] == "crashed" and bad["cold_start"]["failed_step"] == "foreign_thread"
    assert bad["batch_invariance"]["batch_invariant"] is True  # its warm results are kept beside the failure
    assert bad["batch_invariance"]["random_rows"]["comparisons"] > 0
    assert report["results"]["plain"]["diffusers[plain]"]["cold_start"]["status"] == "ok"
    # A CPU child (one torch thread) forks its checks from a server that imported torch: both kinds of failure
    # and the pass above were seen through it.
    assert {e["cold_start"]["process"] for e in report["results"]["plain"].values() if "cold_start" in e} == {"fork"}

    shown = run_cli_forked("report", str(out), env={"PYTHONPATH": tests, "COLUMNS": "200"})
    assert "cold_start crashed" in shown.stdout

    bad["cold_start"] = {"status": "ok", "steps_passed": ["first_step", "foreign_thread"]}
    healthy = tmp_path / "healthy.json"
    healthy.write_text(json.dumps(report))
    diff = run_cli_forked("diff", str(healthy), str(out), "--json")
    assert diff.returncode == 1, diff.stdout + diff.stderr
    rows = [r for r in json.loads(diff.stdout)["rows"] if r["verdict"] == "WORSE"]
    assert [(r["candidate"], r["metric"], r["old"], r["new"]) for r in rows] == [
        ("fixture_candidates:crash_in_fresh_thread", "cold_start", "ok", "crashed")]
