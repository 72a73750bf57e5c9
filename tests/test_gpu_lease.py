"""The GPU lease and the step clock, with fake steps: latency has the GPU to itself, bits work overlaps, a waiting
latency step is not starved, `--serial` serialises, and the time is accounted per phase."""
import json
import subprocess
import sys
import threading
import time

from adaln_bench.harness.processes.gpu_lease import GpuLease
from adaln_bench.harness.measurement.step_clock import (ACCURACY, LATENCY, PROBES, STEP_TRACE_FIELDS, NoLease,
                                                        StepClock, overlapping_exclusive)

# A process that runs fake steps under the lease of `folder` and traces them: shared steps of 0.15 s, and one
# exclusive (latency) step between them.
_WORKER = """
import sys, time
from adaln_bench.harness.processes.gpu_lease import GpuLease
from adaln_bench.harness.measurement.step_clock import StepClock
folder, trace, serial = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
clock = StepClock(GpuLease(folder, "gpu0"), serial=serial, trace_path=trace)
for phase, exclusive in (("probes", False), ("latency", True), ("accuracy", False), ("cold start", False)):
    with clock.step(phase, exclusive=exclusive):
        time.sleep(0.15)
"""


def _traced(tmp_path, serial: bool, processes: int = 4) -> list[dict]:
    trace = tmp_path / "trace.jsonl"
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(tmp_path), str(trace), "1" if serial else "0"])
             for _ in range(processes)]
    assert [p.wait(timeout=120) for p in procs] == [0] * processes
    steps = [json.loads(line) for line in trace.read_text().splitlines()]
    assert len(steps) == 4 * processes and all(set(s) == set(STEP_TRACE_FIELDS) for s in steps)
    return steps


def _overlaps(a: dict, b: dict) -> bool:
    return a["start"] < b["end"] and b["start"] < a["end"]


def test_latency_steps_of_several_processes_never_overlap_any_other_step(tmp_path):
    steps = _traced(tmp_path, serial=False)
    assert overlapping_exclusive(steps) == []
    latency = [s for s in steps if s["phase"] == "latency"]
    assert len(latency) == 4 and all(s["exclusive"] for s in latency)
    # The checker itself finds an overlap where there is one.
    shifted = dict(latency[0], start=latency[1]["start"], end=latency[1]["end"], pid=-1)
    assert overlapping_exclusive([*steps, shifted])


def test_serial_steps_never_overlap(tmp_path):
    steps = _traced(tmp_path, serial=True)
    assert all(s["exclusive"] for s in steps)
    assert not any(_overlaps(a, b) for i, a in enumerate(steps) for b in steps[i + 1:])


def test_shared_steps_run_side_by_side(tmp_path):
    # Two threads hold the shared lease at once: each waits, inside its step, for the other to be inside too.
    lease = GpuLease(tmp_path, "gpu0")
    inside = threading.Barrier(2, timeout=10)
    passed = []

    def reader() -> None:
        with lease.shared():
            inside.wait()
            passed.append(True)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert passed == [True, True]


def test_a_waiting_latency_step_goes_before_later_bits_work(tmp_path):
    # A reader holds the lease; a writer asks; a second reader that asks after the writer waits for it (the
    # turnstile), so a stream of readers cannot starve latency.
    lease = GpuLease(tmp_path, "gpu0")
    events: list[str] = []
    first_in, writer_asking = threading.Event(), threading.Event()

    def first_reader() -> None:
        with lease.shared():
            first_in.set()
            writer_asking.wait(10)
            time.sleep(0.5)  # the writer is blocked in flock by now; the second reader arrives meanwhile
            events.append("first reader out")

    def writer() -> None:
        first_in.wait(10)
        writer_asking.set()
        with lease.exclusive():
            events.append("writer in")
            time.sleep(0.1)
            events.append("writer out")

    def second_reader() -> None:
        writer_asking.wait(10)
        time.sleep(0.25)
        with lease.shared():
            events.append("second reader in")

    threads = [threading.Thread(target=f) for f in (first_reader, writer, second_reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert events == ["first reader out", "writer in", "writer out", "second reader in"]


def test_a_long_shared_step_breathes_so_a_writer_gets_in_before_it_ends(tmp_path):
    lease = GpuLease(tmp_path, "gpu0")
    clock = StepClock(lease)
    events: list[str] = []
    reading = threading.Event()

    def long_probes() -> None:
        with clock.step(PROBES) as step:
            reading.set()
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline and "writer in" not in events:
                time.sleep(0.05)
                step.breathe()  # between two probe runs
            events.append("probes end")

    def latency() -> None:
        reading.wait(10)
        with lease.exclusive():
            events.append("writer in")

    threads = [threading.Thread(target=f) for f in (long_probes, latency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert events == ["writer in", "probes end"]


class _FakeTime:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class _TickingLease:
    """A lease whose acquisition takes `wait` seconds of fake time."""

    def __init__(self, now: _FakeTime, wait: float):
        self.now, self.wait, self.taken = now, wait, []

    def _take(self, how):
        import contextlib

        @contextlib.contextmanager
        def held():
            self.now.t += self.wait
            self.taken.append(how)
            yield

        return held()

    def shared(self):
        return self._take("shared")

    def exclusive(self):
        return self._take("exclusive")


def test_the_clock_accounts_held_waited_and_exclusive_seconds_per_phase():
    now = _FakeTime()
    lease = _TickingLease(now, wait=0.5)
    syncs = []
    clock = StepClock(lease, now=now, sync=lambda: syncs.append(now.t))
    for phase, exclusive, seconds in ((PROBES, False, 2.0), (ACCURACY, False, 1.0), (LATENCY, True, 3.0),
                                      (PROBES, False, 1.5)):
        with clock.step(phase, exclusive=exclusive):
            now.t += seconds
    times = clock.snapshot()
    assert times.phases_s == {PROBES: 3.5, ACCURACY: 1.0, LATENCY: 3.0}
    assert times.waited_s == 2.0 and times.exclusive_s == 3.0
    assert lease.taken == ["shared", "shared", "exclusive", "shared"]
    assert len(syncs) == 4  # the device synchronized before each release


def test_a_serial_clock_takes_every_step_exclusive():
    now = _FakeTime()
    lease = _TickingLease(now, wait=0.0)
    clock = StepClock(lease, serial=True, now=now)
    for phase in (PROBES, ACCURACY, LATENCY):
        with clock.step(phase):
            now.t += 1.0
    assert lease.taken == ["exclusive"] * 3 and clock.snapshot().exclusive_s == 3.0


def test_without_a_lease_steps_never_wait_and_are_still_counted():
    now = _FakeTime()
    clock = StepClock(NoLease(), now=now)
    with clock.step(LATENCY, exclusive=True):  # a CPU run: nothing to wait for, even nested
        with clock.step(PROBES):
            now.t += 1.0
        now.t += 1.0
    times = clock.snapshot()
    assert times.phases_s == {PROBES: 1.0, LATENCY: 2.0} and times.waited_s == 0.0


def test_each_gpu_has_its_own_lease(tmp_path):
    # --gpus 0,1: latency on one GPU does not wait for work on the other.
    gpu0, gpu1 = GpuLease(tmp_path, "gpu0"), GpuLease(tmp_path, "gpu1")
    inside = threading.Barrier(2, timeout=10)
    passed = []

    def hold(lease, exclusive: bool) -> None:
        with (lease.exclusive() if exclusive else lease.shared()):
            inside.wait()
            passed.append(lease.key)

    threads = [threading.Thread(target=hold, args=(gpu0, True)), threading.Thread(target=hold, args=(gpu1, True))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert sorted(passed) == ["gpu0", "gpu1"]


def test_a_child_gets_the_lease_of_its_gpu_on_cuda_only(tmp_path):
    from adaln_bench.harness.processes.protocol import ChildSpec, RunConfig
    from adaln_bench.harness.processes.runner import lease_of
    from adaln_bench.harness.assembly.shapes import PRESETS

    cuda = RunConfig(device="cuda", shape=PRESETS["tiny"], quick=True, timeout_s=None)
    assert lease_of(cuda, tmp_path, 1) == (str(tmp_path), "gpu1")
    assert lease_of(cuda, tmp_path, None) == (str(tmp_path), "gpu0")  # the one visible GPU
    cpu = RunConfig(device="cpu", shape=PRESETS["tiny"], quick=True, timeout_s=None)
    assert lease_of(cpu, tmp_path, None) == (None, None)
    assert lease_of(cpu.model_copy(update={"lease": True}), tmp_path, None) == (str(tmp_path), "gpu0")
    lease_dir, lease_key = lease_of(cuda, tmp_path, 1)
    spec = ChildSpec(config=cuda, mode="plain", work=[], result_path=str(tmp_path / "r.json"), lease_dir=lease_dir,
                     lease_key=lease_key)
    assert (spec.lease_dir, spec.lease_key, spec.config.serial, spec.config.cold_start_pool) == (
        str(tmp_path), "gpu1", False, 1)


def test_a_step_that_fails_hands_the_lease_back(tmp_path):
    lease = GpuLease(tmp_path, "gpu0")
    clock = StepClock(lease)
    try:
        with clock.step(LATENCY, exclusive=True):
            raise RuntimeError("a candidate failed while timed")
    except RuntimeError:
        pass
    taken = threading.Event()

    def other() -> None:
        with lease.exclusive():
            taken.set()

    thread = threading.Thread(target=other, daemon=True)
    thread.start()
    assert taken.wait(10)
    assert LATENCY in clock.snapshot().phases_s
