"""The run index's account of the time: per phase and per mode, the repeats apart, the GPU-exclusive seconds."""
from types import SimpleNamespace

from adaln_bench.harness.processes.protocol import ChildResult
from adaln_bench.harness.measurement.step_clock import StepTimes
from adaln_bench.harness.assembly.time_accounting import run_time


def _job(key: str, mode: str):
    return SimpleNamespace(key=key, mode=SimpleNamespace(name=mode))


def _outcome(wall, phases=None, exclusive=0.0, waited=0.0, peak=None, by_op=None, left=None):
    child = None
    if phases is not None:
        child = ChildResult(mode="x", status="ok", time=StepTimes(phases_s=phases, exclusive_s=exclusive,
                                                                  waited_s=waited, peak_memory_bytes=peak,
                                                                  peak_memory_by_op=by_op or {},
                                                                  residual_memory_by_op=left or {}))
    return SimpleNamespace(run=SimpleNamespace(wall_s=wall), child=child)


def test_phases_add_up_over_the_parts_of_a_mode_and_the_repeats_count_apart():
    jobs = [_job("plain.0", "plain"), _job("plain.1", "plain"), _job("recipe", "recipe")]
    first = {
        "plain.0": _outcome(50.0, {"start-up": 5.0, "probes": 30.0, "latency": 10.0}, exclusive=10.0, waited=2.0,
                            peak=3 << 30, by_op={"a": 3 << 30, "b": 1 << 30}, left={"a": 1 << 20}),
        "plain.1": _outcome(40.0, {"start-up": 4.0, "probes": 20.0, "cold start": 12.0, "latency": 6.0},
                            exclusive=6.0, peak=5 << 30, by_op={"c": 5 << 30}, left={"c": 2 << 30}),
        "recipe": _outcome(30.0, {"latency": 7.0, "accuracy": 3.0}, exclusive=7.0),
    }
    repeats = [{"plain.0": _outcome(20.0, {"start-up": 4.0, "latency": 12.0}, exclusive=12.0,
                                    by_op={"a": 2 << 30, "b": 2 << 30}),
                "recipe": _outcome(15.0, {"latency": 8.0}, exclusive=8.0)}]
    schedule = {"serial": False, "children_per_gpu": 2}
    got = run_time(jobs, first, repeats, schedule)
    assert got["schedule"] == schedule
    assert got["phases_s"] == {"start-up": 9.0, "probes": 50.0, "accuracy": 3.0, "latency": 23.0,
                               "cold start": 12.0, "repeats": 35.0}
    assert list(got["phases_s"]) == ["start-up", "probes", "accuracy", "latency", "cold start", "repeats"]
    assert got["gpu_exclusive_s"] == 10 + 6 + 7 + 12 + 8 and got["waited_s"] == 2.0
    plain = got["modes"]["plain"]
    assert plain["children"] == 3 and plain["child_s"] == 110.0
    assert plain["phases_s"] == {"start-up": 9.0, "probes": 50.0, "latency": 16.0, "cold start": 12.0,
                                 "repeats": 20.0}
    assert plain["gpu_exclusive_s"] == 28.0 and plain["peak_memory_bytes"] == 5 << 30
    # Per operator, the most any child of the mode reserved while measuring it (a repeat's too).
    assert plain["peak_memory_by_op"] == {"a": 3 << 30, "b": 2 << 30, "c": 5 << 30}
    # And what a child still reserved after each, its cache emptied (memory the ledger counts as free again).
    assert plain["residual_memory_by_op"] == {"a": 1 << 20, "c": 2 << 30}
    assert got["modes"]["recipe"]["phases_s"] == {"accuracy": 3.0, "latency": 7.0, "repeats": 15.0}


def test_a_mode_that_never_started_spent_nothing():
    got = run_time([_job("plain", "plain")], {"plain": _outcome(None)}, [], None)
    assert got["modes"]["plain"]["children"] == 0 and got["phases_s"] == {} and got["gpu_exclusive_s"] == 0.0


def test_a_process_keeps_the_most_memory_per_operator():
    # A child measures an operator once, but a repetition or a second part may meet it again: the most counts.
    from adaln_bench.harness.measurement.step_clock import StepClock

    clock = StepClock()
    for op, peak, left in (("a", 5 << 30, 1 << 20), ("a", 3 << 30, 2 << 20), ("b", 1 << 30, 0)):
        clock.peak(op, peak)
        clock.residual(op, left)
    times = clock.snapshot()
    assert times.peak_memory_by_op == {"a": 5 << 30, "b": 1 << 30}
    assert times.residual_memory_by_op == {"a": 2 << 20, "b": 0}
