"""A mode split over several CPU children is switched on once: its later parts wait for the first, and are never
started when the first found the mode unavailable."""
import json
import threading
from dataclasses import dataclass

from conftest import run_cli_forked

from adaln_bench.harness.processes.job_queue import JobQueue


@dataclass(frozen=True)
class _Mode:
    name: str


@dataclass(frozen=True)
class _Job:
    mode: _Mode
    part: int | None

    @property
    def key(self) -> str:
        return self.mode.name if self.part is None else f"{self.mode.name}.{self.part}"


def _jobs(*keys: str) -> list[_Job]:
    out = []
    for key in keys:
        name, _, part = key.partition(".")
        out.append(_Job(_Mode(name), int(part) if part else None))
    return out


def test_a_later_part_waits_for_the_first_and_its_slot_takes_the_next_job_meanwhile():
    queue = JobQueue(_jobs("plain.0", "plain.1", "vllm.0", "vllm.1", "recipe"), threading.Event())
    first, second, third = queue.take(), queue.take(), queue.take()
    assert first.key == "plain.0"
    assert second.key == "vllm.0"  # plain.1 must wait: plain is not switched on yet
    assert third.key == "recipe"
    queue.switched_on("plain")
    later = queue.take()
    assert later.key == "plain.1" and queue.verdict(later) is None
    queue.decide("vllm", "vllm is not installed")
    vllm = queue.take()
    assert vllm.key == "vllm.1" and queue.verdict(vllm) == "vllm is not installed"
    for job in (first, second, third, later, vllm):
        queue.finished(job)
    assert queue.take() is None


def test_a_running_job_may_add_follow_ups_and_a_free_slot_waits_for_them():
    # A mode's next latency repetition is queued when its repetition before ends: a slot that finds nothing to
    # take waits while a job runs, and takes its follow-up; behind jobs not yet started.
    queue = JobQueue(_jobs("plain", "vllm"), threading.Event())
    plain, vllm = queue.take(), queue.take()
    got = []
    waiter = threading.Thread(target=lambda: got.append(queue.take()))
    waiter.start()
    waiter.join(timeout=0.5)
    assert waiter.is_alive()  # nothing to take, but plain and vllm still run
    queue.add(_jobs("plain2"))
    queue.finished(plain)
    waiter.join(timeout=5)
    assert [j.key for j in got] == ["plain2"]
    queue.add(_jobs("vllm2", "recipe"))
    assert [queue.take().key for _ in range(2)] == ["vllm2", "recipe"]
    for job in (vllm, got[0]):
        queue.finished(job)
    queue.finished(None)
    queue.finished(None)
    assert queue.take() is None
    stopping = threading.Event()
    stopped = JobQueue(_jobs("plain"), stopping)
    stopping.set()
    stopped.add(_jobs("plain2"))  # none once the run stops
    assert stopped.drain() == _jobs("plain")


def test_the_first_decision_stands_and_a_first_part_gets_no_verdict():
    queue = JobQueue(_jobs("plain.0", "plain.1"), threading.Event())
    first = queue.take()
    queue.switched_on("plain")
    queue.decide("plain", "crashed later: not a verdict on the mode")
    assert queue.verdict(queue.take()) is None and queue.verdict(first) is None


def test_a_waiting_slot_returns_when_the_run_stops():
    stopping = threading.Event()
    queue = JobQueue(_jobs("plain.0", "plain.1"), stopping)
    queue.take()
    got = []
    waiter = threading.Thread(target=lambda: got.append(queue.take()))
    waiter.start()
    stopping.set()
    waiter.join(timeout=5)
    assert not waiter.is_alive() and got == [None]
    assert [j.key for j in queue.drain()] == ["plain.1"]


def test_an_unavailable_mode_split_over_two_cpu_children_starts_one(tmp_path):
    # vLLM does not import here (as in test_exit_codes.py); its two operators are dealt over two children.
    out = tmp_path / "out"
    proc = run_cli_forked("run", "--device", "cpu", "--preset", "tiny", "--quick", "--no-cold-start", "--mode", "vllm",
                   "--op", "timestep_mlp", "--op", "adaln_projection", "--out", str(out))
    assert proc.returncode == 4, proc.stderr  # nothing measured: every pair unavailable
    started = [ln for ln in proc.stderr.splitlines() if ln.endswith(": started")]
    assert len(started) == 1 and "vllm.0: started" in started[0], proc.stderr
    # The later part takes the first part's finding, and its line says why.
    assert any(ln.endswith("vllm.1: unavailable: ModuleNotFoundError: vllm is not installed (no module named "
                           "'vllm')") for ln in proc.stderr.splitlines()), proc.stderr
    for op in ("timestep_mlp", "adaln_projection"):
        (path,) = (out / op).glob("*.json")
        report = json.loads(path.read_text())
        mode = report["modes"]["vllm"]
        assert mode["status"] == "unavailable" and "vllm" in mode["reason"] and mode["observed"] is not None
        entry = report["results"]["vllm"]["diffusers[vllm]"]
        assert entry["status"] == "unavailable" and entry["unavailable"] == f"mode vllm unavailable: {mode['reason']}"
