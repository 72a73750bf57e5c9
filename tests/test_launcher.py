"""The one child protocol (harness/processes/launcher.py): a spec written, a fresh interpreter started, its result
read back typed; every end without a result is one line that says why. The children are tests/launcher_child.py."""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from adaln_bench.harness.processes.launcher import ChildFiles, child_main, finish, launch
from adaln_bench.kernel_bench import process as kb_process
from tests.conftest import ROOT
from tests.launcher_child import MODULE, Act, Done

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def _run(tmp_path: Path, what: str, timeout_s: float = 60):
    files = ChildFiles.named(tmp_path, "c")
    return files, finish(launch(MODULE, Act(ops=[what]), files, env=ENV), files, Done, timeout_s)


def _one_line(reason: str) -> bool:
    return bool(reason) and "\n" not in reason


def test_a_child_that_writes_its_result_is_read_back_typed(tmp_path):
    files, ended = _run(tmp_path, "write")
    assert ended.code == 0 and not ended.exit.timed_out and ended.reason() is None
    assert isinstance(ended.result, Done) and ended.result.ops == {"x": {"us": 1.5}}
    assert "acting: write" in ended.tail and "acting: write" in files.log.read_text()
    assert Act.model_validate_json(files.spec.read_text()).result_path == str(files.result)


def test_a_child_that_exits_non_zero_gives_its_exit_and_last_error_line(tmp_path):
    _, ended = _run(tmp_path, "raise")
    assert ended.result is None and ended.code == 1
    assert ended.reason() == "exited with code 1: RuntimeError: deliberate failure"


def test_a_child_past_its_timeout_is_stopped_with_what_it_started(tmp_path):
    files, ended = _run(tmp_path, "hang", timeout_s=8)
    assert ended.exit.timed_out and ended.result is None and ended.reason() == "no result within 8 s"
    grandchild = int(Path(f"{files.result}.grandchild").read_text())
    assert _gone(grandchild), "the child's own process outlived the timeout"


def test_a_malformed_result_says_what_is_wrong_in_one_line(tmp_path):
    _, ended = _run(tmp_path, "malformed")
    assert ended.code == 0 and ended.result is None
    reason = ended.reason()
    assert _one_line(reason) and reason.startswith("exited without a result: malformed result file: ops")


def test_a_child_that_writes_nothing_says_so(tmp_path):
    _, ended = _run(tmp_path, "silent")
    assert ended.reason() == "exited without a result: no result file"


def test_a_stop_signal_stops_the_child_and_is_raised(tmp_path):
    """KeyboardInterrupt in the parent's wait (what a stop signal raises) ends the child and its processes."""
    files = ChildFiles.named(tmp_path, "c")
    child = launch(MODULE, Act(ops=["hang"]), files, env=ENV)
    marker = Path(f"{files.result}.grandchild")
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGUSR1, interrupt)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGUSR1))
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            finish(child, files, Done, 60)
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)
    assert child.proc.returncode == -signal.SIGKILL
    assert _gone(int(marker.read_text()))


def test_the_child_side_refuses_a_bad_spec_in_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"ops": "not a list"}')
    assert child_main([str(bad)], MODULE, Act, lambda spec, publish: None) == 2
    assert child_main([], MODULE, Act, lambda spec, publish: None) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith(f"{MODULE}: cannot read the spec {bad}") and "usage" in err[1]


def test_kernel_bench_keeps_its_logs_and_one_line_per_process_without_a_result(tmp_path, monkeypatch):
    """kernel-bench's loop through the launcher: each process logs to kernel_bench.proc<i>.log in the output
    folder, its result is kept, and a process without one is a line naming the reason and the log."""
    monkeypatch.setattr(kb_process, "CHILD", MODULE)
    monkeypatch.setenv("PYTHONPATH", ENV["PYTHONPATH"])
    acts = ["write", "raise", "malformed", "write"]

    def spec_of(i: int) -> kb_process.ProcessSpec:
        return kb_process.ProcessSpec(shape="tiny", ops=[acts[i]], sizes={})

    runs, errors = kb_process.run_processes(spec_of, len(acts), tmp_path, 60, echo=lambda line: None)
    assert runs == [{"ops": {"x": {"us": 1.5}}, "errors": {}, "wall_s": 0.1}] * 2
    log1, log2 = tmp_path / "kernel_bench.proc1.log", tmp_path / "kernel_bench.proc2.log"
    assert len(errors) == 2 and all(_one_line(e) for e in errors)
    assert errors[0] == f"process 1: exited with code 1: RuntimeError: deliberate failure (log: {log1})"
    assert errors[1].startswith("process 2: exited without a result: malformed result file: ops: ")
    assert errors[1].endswith(f" (log: {log2})") and "RuntimeError" in log1.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"kernel_bench.proc{i}.log" for i in range(4)]


def test_kernel_bench_keeps_the_finished_processes_when_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(kb_process, "CHILD", MODULE)
    monkeypatch.setenv("PYTHONPATH", ENV["PYTHONPATH"])
    acts = ["write", "hang", "write"]
    calls = []

    def spec_of(i: int) -> kb_process.ProcessSpec:
        calls.append(i)
        if i == 1:  # the stop signal comes while the second process runs
            threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGUSR1)).start()
        return kb_process.ProcessSpec(shape="tiny", ops=[acts[i]], sizes={})

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        runs, errors = kb_process.run_processes(spec_of, len(acts), tmp_path, 60, echo=lambda line: None,
                                                stop_cause=lambda: "stopped by SIGTERM")
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert calls == [0, 1] and len(runs) == 1
    assert errors == ["process 1: stopped by SIGTERM; the later processes were not started"]


def _gone(pid: int, wait_s: float = 10) -> bool:
    """True once `pid` has ended (a zombie of init's counts as ended)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.1)
    return False
