"""Faults a nightly meets: SIGTERM (timeout, CI cancel), a second Ctrl-C during shutdown, a child out of memory."""
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT

TESTS = Path(__file__).resolve().parent
# The cold-start check has its own tests (test_cold_start.py); skipping it here saves a process per pair.
TINY = ("--device", "cpu", "--preset", "tiny", "--quick", "--quiet", "--no-cold-start")


def _start(tmp_path, modes, misbehave_in, *extra):
    """A real run whose `misbehave_in` mode hangs; returns the process and the marker its child writes."""
    marker, scratch = tmp_path / "hanging", tmp_path / "scratch"
    scratch.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]), "TMPDIR": str(scratch),
           "FIXTURE_MISBEHAVE_IN": misbehave_in, "FIXTURE_MARKER": str(marker)}
    argv = [sys.executable, "-m", "adaln_bench", "run", *TINY, "--candidate", "fixture_candidates:hang",
            "--out", str(tmp_path / "r.json"), *extra]
    for m in modes:
        argv += ["--mode", m]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not marker.exists():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    return proc, scratch


@pytest.mark.slow
def test_sigterm_writes_an_incomplete_report_exits_143_and_leaves_no_work_directory(tmp_path):
    proc, scratch = _start(tmp_path, ["plain", "cublaslt_ws1"], "cublaslt_ws1")
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert "stopped by SIGTERM" in stderr and "Traceback" not in stderr
    assert not (tmp_path / "r.json").exists()  # an incomplete report never takes the complete one's name
    report = json.loads((tmp_path / "r.incomplete.json").read_text())
    assert report["incomplete"] is True
    assert report["modes"]["plain"]["status"] == "ok"
    assert report["modes"]["cublaslt_ws1"]["status"] == "interrupted"
    assert list(scratch.iterdir()) == []  # the children's work directory is gone


@pytest.mark.slow
def test_a_second_sigint_during_shutdown_gives_no_traceback_and_every_mode_appears(tmp_path):
    # plain hangs; cublaslt_ws1 and vllm never start.
    proc, scratch = _start(tmp_path, ["plain", "cublaslt_ws1", "vllm"], "plain")
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "Exception in thread" not in stderr
    report = json.loads((tmp_path / "r.incomplete.json").read_text())
    assert report["incomplete"] is True
    assert {name: run["status"] for name, run in report["modes"].items()} == {
        "plain": "interrupted", "cublaslt_ws1": "interrupted", "vllm": "interrupted"}
    assert report["results"]["vllm"]["fixture_candidates:hang"]["status"] == "interrupted"
    assert list(scratch.iterdir()) == []


def _limit_address_space() -> None:
    # 16 GiB of address space: enough for torch, never for the 64 GiB W below, whatever the machine's memory.
    resource.setrlimit(resource.RLIMIT_AS, (16 << 30, 16 << 30))


@pytest.mark.slow
def test_an_allocation_failure_shows_its_cause_in_the_summary(tmp_path):
    out = tmp_path / "r.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    proc = subprocess.run([sys.executable, "-m", "adaln_bench", "run", "--device", "cpu", "--quick", "--yes",
                           "--dim", "65536", "--hidden", "43690", "--modalities", "1", "--mode", "plain",
                           "--candidate", "diffusers", "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=300, preexec_fn=_limit_address_space)
    assert proc.returncode == 4, proc.stderr  # nothing measured: a failed run, its report incomplete
    report = json.loads((tmp_path / "r.incomplete.json").read_text())
    reason = report["modes"]["plain"]["reason"]
    assert reason.startswith("exited with code 1: RuntimeError: ") and "can't allocate memory" in reason
    assert "can't allocate memory" in " ".join(proc.stdout.split())  # the summary says it, wrapped or not
