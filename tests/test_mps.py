"""`run --mps`: the run's own Multi-Process Service daemon, started, checked, handed to the processes, stopped."""
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from adaln_bench.harness.processes import mps as M


class FakeRun:
    """Stands in for subprocess.run: records each call; `daemon` and `check` are the return codes."""

    def __init__(self, daemon: int = 0, check: int = 0):
        self.daemon, self.check, self.calls = daemon, check, []

    def __call__(self, argv, env=None, input=None, **kw):
        self.calls.append(SimpleNamespace(argv=list(argv), pipe=env.get(M.PIPE_VAR), input=input,
                                          pipe_existed=Path(env[M.PIPE_VAR]).is_dir()))
        if argv[-1] == "-d":
            return SimpleNamespace(returncode=self.daemon, stderr="daemon says no\n" if self.daemon else "")
        if argv[0] == sys.executable:
            return SimpleNamespace(returncode=self.check, stderr="RuntimeError: no CUDA\n" if self.check else "")
        return SimpleNamespace(returncode=0, stderr="")


def _which(name):
    return "/opt/bin/" + name


@pytest.fixture(autouse=True)
def _no_mps_variables(monkeypatch):
    monkeypatch.delenv(M.PIPE_VAR, raising=False)
    monkeypatch.delenv(M.LOG_VAR, raising=False)


def test_not_asked_starts_nothing():
    run = FakeRun()
    with M.multi_process_service(False, which=_which, run=run) as state:
        assert state is None
    assert run.calls == []


def test_a_working_daemon_is_handed_to_the_processes_and_stopped_after():
    run = FakeRun()
    with M.multi_process_service(True, which=_which, run=run) as state:
        assert state.on and state.record == {"on": True, "why": state.why}
        pipe, log = os.environ[M.PIPE_VAR], os.environ[M.LOG_VAR]
        assert Path(pipe).is_dir() and Path(log).is_dir()
        assert [c.argv[-1] for c in run.calls] == ["-d", M._CHECK]  # started, then a CUDA process through it
    assert M.PIPE_VAR not in os.environ and M.LOG_VAR not in os.environ
    stop = run.calls[-1]
    assert stop.argv == ["/opt/bin/" + M.CONTROL] and stop.input == "quit\n" and stop.pipe == pipe
    assert not Path(pipe).parent.exists()  # its folder removed


def test_the_daemon_stops_and_the_variables_go_back_when_the_run_fails(monkeypatch):
    monkeypatch.setenv(M.PIPE_VAR, "/elsewhere")
    run = FakeRun()
    with pytest.raises(KeyboardInterrupt):
        with M.multi_process_service(True, which=_which, run=run):
            assert os.environ[M.PIPE_VAR] != "/elsewhere"
            raise KeyboardInterrupt
    assert os.environ[M.PIPE_VAR] == "/elsewhere" and M.LOG_VAR not in os.environ
    assert run.calls[-1].input == "quit\n"


@pytest.mark.parametrize("daemon, check, why, stopped", [
    (1, 0, "exited 1: daemon says no", False),
    (0, 1, "a CUDA process failed through the daemon: RuntimeError: no CUDA", True),
])
def test_a_daemon_that_does_not_work_leaves_the_run_without_it_and_says_why(daemon, check, why, stopped):
    run = FakeRun(daemon, check)
    with M.multi_process_service(True, which=_which, run=run) as state:
        assert not state.on and why in state.why
        assert M.PIPE_VAR not in os.environ
    assert (run.calls[-1].input == "quit\n") is stopped


def test_no_daemon_on_path():
    with M.multi_process_service(True, which=lambda name: None, run=FakeRun()) as state:
        assert state == M.MpsState(False, f"{M.CONTROL} is not on PATH")
        assert M.PIPE_VAR not in os.environ


def test_with_a_real_process_the_daemon_gets_its_own_folders_and_quit(tmp_path, monkeypatch):
    # A stand-in daemon on PATH that logs how it was called; on this machine (no GPU) the CUDA check fails, so the
    # run is left without the service, the reason given, and the daemon told to quit.
    calls = tmp_path / "calls.txt"
    control = tmp_path / M.CONTROL
    control.write_text(f'#!/bin/sh\necho "$* | ${M.PIPE_VAR} | $(cat)" >> {calls}\n')
    control.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with M.multi_process_service(True) as state:
        if not state.on:
            assert "a CUDA process failed through the daemon" in state.why
    lines = calls.read_text().splitlines()
    assert lines[0].startswith("-d | ") and lines[-1].endswith("| quit")
    assert lines[0].split(" | ")[1] == lines[-1].split(" | ")[1] != ""  # one pipe folder, the run's own


def test_mps_on_the_cpu_is_refused_in_one_line():
    proc = subprocess.run([sys.executable, "-m", "adaln_bench", "run", "--device", "cpu", "--mps", "--op",
                           "timestep_sinusoid", "--out", "unused"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "adaln-bench: --mps shares a GPU; this run is on the cpu"


def test_a_report_says_when_its_processes_measured_through_the_service(monkeypatch):
    """environment.mps: true only for a CUDA process that has the run's daemon (its pipe folder) in its
    environment; absent on the CPU and without the daemon, so earlier reports read the same."""
    import torch

    from adaln_bench.harness.measurement.environment import torch_environment

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i: SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0))
    monkeypatch.delenv(M.PIPE_VAR, raising=False)
    assert "mps" not in torch_environment("cuda").model_dump(exclude_unset=True)
    monkeypatch.setenv(M.PIPE_VAR, "/tmp/adaln-mps-x/pipe")
    assert torch_environment("cuda").mps is True
    assert "mps" not in torch_environment("cpu").model_dump(exclude_unset=True)


def test_diff_lists_the_service_as_a_configuration_difference():
    from adaln_bench.datamodel.schema import Report
    from adaln_bench.reports.diff import diff_reports, exit_code

    root = Path(__file__).resolve().parents[1]
    path = next((root / "results").rglob("norm_modulate.h200.7a100a7.h3.plain.json"))
    old = Report.model_validate_json(path.read_text(encoding="utf-8"))
    new = old.model_copy(deep=True)
    new.environment.mps = True
    result = diff_reports(old, new)
    (row,) = [d for d in result.config if d.field == "mps"]
    assert (row.old, row.new, row.blocks) == (False, True, False) and "Multi-Process Service" in row.note
    assert exit_code(result) == 0
    assert not [d for d in diff_reports(old, old).config if d.field == "mps"]
