"""`run --repeat K`: the interleaved order, latency-only children, and every process's samples pooled."""
import contextlib

import pytest

from adaln_bench.harness.assembly.repeat import (
    RepeatedRun,
    interleaved_order,
    latency_only,
    merge_candidate,
    merge_device_times,
)
from adaln_bench.harness.processes.protocol import OpWork
from adaln_bench.harness.processes.protocol import RunConfig
from adaln_bench.harness.processes.runner import ModeJob, ModeOutcome, ModeRunner
from adaln_bench.modes.registry import all_modes
from adaln_bench.shape import Shape
from adaln_bench.datamodel.schema import (
    AccuracyLatency,
    CandidateResult,
    CandidateUnavailable,
    DeviceTime,
    ModeRun,
)

OPTIONS = RunConfig(device="cpu", shape=Shape(dim=64, hidden=32, modalities=1, preset="tiny"),
                       quick=True, timeout_s=120, cold_start=False)  # the cold-start check has its own tests


def _dt(fwd, fwd_bwd=None, *, before=1980.0, after=1980.0, throttled=False, method="cuda_graph"):
    entry = DeviceTime(method=method, fwd_us=sorted(fwd)[len(fwd) // 2], fwd_samples=list(fwd), processes=1,
                       sm_clock_mhz_before=before, sm_clock_mhz_after=after, throttled=throttled)
    if fwd_bwd is not None:
        entry.fwd_bwd_us = sorted(fwd_bwd)[len(fwd_bwd) // 2]
        entry.fwd_bwd_samples = list(fwd_bwd)
        entry.fwd_bwd_method = method
    return entry


def _result(points: dict[str, DeviceTime], fwd_us=200.0, invariance=None, fwd_rel_err=1e-3):
    return CandidateResult(source="test", has_backward=True, batch_invariance=invariance, accuracy_latency={
        t: AccuracyLatency(fwd_rel_err=fwd_rel_err, fwd_us=fwd_us, device_time=dt) for t, dt in points.items()})


# --- pure parts -----------------------------------------------------------------------------------


def test_the_order_is_every_mode_once_per_repetition():
    assert interleaved_order(["plain", "cublaslt_ws1"], 3) == [
        (1, "plain"), (1, "cublaslt_ws1"), (2, "plain"), (2, "cublaslt_ws1"), (3, "plain"), (3, "cublaslt_ws1")]
    with pytest.raises(ValueError):
        interleaved_order(["plain"], 0)


def test_latency_only_children_skip_probes_and_accuracy():
    opts = latency_only(OPTIONS)
    assert (opts.parts.probes, opts.parts.accuracy, opts.parts.latency) == (False, False, True)
    assert (OPTIONS.parts.probes, OPTIONS.parts.accuracy, OPTIONS.parts.latency) == (True, True, True)
    assert opts.shape == OPTIONS.shape and opts.device == "cpu"


def test_merging_pools_samples_and_takes_the_median_of_the_pool():
    a = _dt([10.0, 11.0, 12.0], [30.0, 31.0, 32.0], before=1980.0, after=1965.0)
    b = _dt([20.0, 21.0, 22.0, 23.0], [40.0, 41.0, 42.0, 43.0], before=1950.0, after=1700.0, throttled=True)
    merged = merge_device_times([a, b])
    assert merged.fwd_samples == [10.0, 11.0, 12.0, 20.0, 21.0, 22.0, 23.0]
    assert merged.fwd_us == 20.0  # the pool's median, not the median of the two medians (16.5)
    assert merged.fwd_process_medians == [11.0, 22.0]
    assert merged.fwd_bwd_us == 40.0 and merged.fwd_bwd_process_medians == [31.0, 42.0]
    assert merged.processes == 2
    assert merged.sm_clock_mhz_before == 1950.0 and merged.sm_clock_mhz_after == 1700.0
    assert merged.throttled is True
    assert merged.fwd_rel_noise is not None and merged.fwd_rel_noise > 0
    assert merged.warmup_ms is None  # neither part had a warm-up
    a.warmup_ms = b.warmup_ms = 200.0
    assert merge_device_times([a, b]).warmup_ms == 200.0


def test_merging_pools_the_reference_in_the_same_order_so_that_its_samples_still_pair():
    from adaln_bench.datamodel.schema import DeviceReference

    a = _dt([9.0, 18.0], [30.0, 60.0])
    b = _dt([27.0, 9.0, 9.0], [90.0, 30.0, 30.0])
    a.reference = DeviceReference(what="cuBLAS", fwd_us=15.0, fwd_samples=[10.0, 20.0],
                                  fwd_bwd_samples=[40.0, 80.0], fwd_bwd_us=60.0)
    b.reference = DeviceReference(what="cuBLAS", fwd_us=10.0, fwd_samples=[30.0, 10.0, 10.0],
                                  fwd_bwd_samples=[120.0, 40.0, 40.0], fwd_bwd_us=40.0)
    merged = merge_device_times([a, b])
    ref = merged.reference
    assert ref.fwd_samples == [10.0, 20.0, 30.0, 10.0, 10.0] and ref.fwd_us == 10.0
    assert ref.fwd_ratio == 0.9 and ref.fwd_bwd_ratio == 0.75  # every pair 0.9 and 0.75
    b.reference.what = "something else"  # references that differ do not pool
    assert merge_device_times([a, b]).reference is None
    b.reference = None  # nor does a pool where one process has none
    b.reference_error = "RuntimeError: capture refused"
    merged = merge_device_times([a, b])
    assert merged.reference is None and merged.reference_error == "RuntimeError: capture refused"


def test_merging_merged_entries_counts_every_process():
    two = merge_device_times([_dt([1.0] * 5), _dt([2.0] * 5)])
    three = merge_device_times([two, _dt([3.0] * 5)])
    assert three.processes == 3 and three.fwd_process_medians == [1.0, 2.0, 3.0]
    assert len(three.fwd_samples) == 15


def test_forward_backward_is_dropped_when_a_process_lacks_it_and_method_changes_are_noted():
    merged = merge_device_times([_dt([1.0] * 5, [2.0] * 5), _dt([1.0] * 5, None, method="queued")])
    assert merged.fwd_bwd_us is None and merged.fwd_bwd_samples is None
    assert "methods differ between processes: cuda_graph, queued" in merged.capture_error


def test_merge_candidate_keeps_repetition_ones_figures_and_says_which_repetitions_are_missing():
    first = _result({"1": _dt([10.0] * 5), "3": _dt([12.0] * 5)}, fwd_us=250.0)
    second = _result({"1": _dt([11.0] * 5), "3": _dt([13.0] * 5)}, fwd_us=999.0, fwd_rel_err=None)
    third = CandidateUnavailable(unavailable="mode plain crashed: killed by signal SIGSEGV", status="crashed")
    merged = merge_candidate(first, [second, third])
    point = merged.accuracy_latency["1"]
    assert point.fwd_us == 250.0 and point.fwd_rel_err == 1e-3  # event figure and accuracy from repetition 1
    assert point.device_time.processes == 2
    assert point.device_time.fwd_samples == [10.0] * 5 + [11.0] * 5
    assert merged.details["latency_repeats"] == (
        "2 of 3 processes gave device time; repetition 3: crashed: mode plain crashed: killed by signal SIGSEGV")
    assert first.accuracy_latency["1"].device_time.processes == 1  # the input is not changed


def test_merge_candidate_leaves_entries_without_device_time_alone():
    cpu = _result({"1": None})
    assert merge_candidate(cpu, [_result({"1": None})]).accuracy_latency["1"].device_time is None
    gone = CandidateUnavailable(unavailable="no module named x", status="unavailable")
    assert merge_candidate(gone, []) is gone


# --- the orchestration, with a fake runner --------------------------------------------------------


class FakeRunner:
    """Stands in for ModeRunner: one slot, its jobs in order, follow-ups (`add_jobs`) behind them; records what it
    was asked to run; each child gives one fresh sample set."""

    def __init__(self, log, options, unavailable=(), interrupt_after=None, stopped_child=None):
        self.log, self.options = log, options
        self.unavailable, self.interrupt_after, self.stopped_child = unavailable, interrupt_after, stopped_child
        self.queue = []

    def add_jobs(self, jobs):
        self.queue.extend(jobs)

    def run_all(self, jobs, on_done):
        self.log.append(("start", 1))
        self.queue = list(jobs)
        while self.queue:
            job = self.queue.pop(0)
            rep, name, parts = job.repetition, job.mode.name, (job.config or self.options).parts
            self.log.append((rep, name, tuple(c for w in job.work for c in w.candidates), parts.probes,
                             parts.accuracy))
            if name in self.unavailable:
                on_done(job.key, ModeOutcome(ModeRun(status="unavailable", reason="x"), None, {OP: {
                    f"diffusers[{name}]": CandidateUnavailable(unavailable="x", status="unavailable")}}))
                continue
            if self.stopped_child == (rep, name):  # a child the runner stopped (SIGTERM), without raising
                on_done(job.key, ModeOutcome(ModeRun(status="interrupted", reason="stopped by SIGTERM"), None, {}))
                continue
            base = 100.0 * rep
            on_done(job.key, ModeOutcome(ModeRun(status="ok"), None, {OP: {
                f"diffusers[{name}]": _result({"1": _dt([base, base + 1, base + 2, base + 3, base + 4])})}}))
            if self.interrupt_after == (rep, name):
                raise KeyboardInterrupt


def _runner_factory(log, **kwargs):
    def make(options):
        return contextlib.nullcontext(FakeRunner(log, options, **kwargs))
    return make


OP = "adaln_projection"


def _work(*candidates):
    return (OpWork(op=OP, candidates=list(candidates)),)


def _jobs(*names):
    modes = all_modes()
    return [ModeJob(modes[n], _work("diffusers")) for n in names]


def test_repeated_run_interleaves_modes_and_pools_three_processes():
    log, finished = [], []
    run = RepeatedRun(OPTIONS, 3, _runner_factory(log))
    outcomes = run.run(_jobs("plain", "cublaslt_ws1"), lambda name, outcome: finished.append(name))
    children = [entry for entry in log if entry[0] != "start"]
    assert [(rep, name) for rep, name, *_ in children] == interleaved_order(["plain", "cublaslt_ws1"], 3)
    # Repetition 1 runs everything; the others are latency-only.
    assert [(probes, acc) for *_, probes, acc in children] == [(True, True)] * 2 + [(False, False)] * 4
    assert finished == ["plain", "cublaslt_ws1"]  # the progress display hears of repetition 1 as before
    dt = outcomes["plain"].results[OP]["diffusers[plain]"].accuracy_latency["1"].device_time
    assert dt.processes == 3
    assert dt.fwd_process_medians == [102.0, 202.0, 302.0]
    assert dt.fwd_us == 202.0


def test_an_unavailable_mode_is_not_repeated():
    log = []
    run = RepeatedRun(OPTIONS, 2, _runner_factory(log, unavailable=("cublaslt_ws1",)))
    outcomes = run.run(_jobs("plain", "cublaslt_ws1"), lambda *a: None)
    children = [entry for entry in log if entry[0] != "start"]
    assert [(rep, name) for rep, name, *_ in children] == [(1, "plain"), (1, "cublaslt_ws1"), (2, "plain")]
    assert outcomes["cublaslt_ws1"].run.status == "unavailable"


def test_an_interrupt_during_the_repeats_keeps_what_finished():
    log = []
    run = RepeatedRun(OPTIONS, 3, _runner_factory(log, interrupt_after=(2, "plain")))
    with pytest.raises(KeyboardInterrupt):
        run.run(_jobs("plain", "cublaslt_ws1"), lambda *a: None)
    outcomes = run.outcomes
    plain = outcomes["plain"].results[OP]["diffusers[plain]"]
    other = outcomes["cublaslt_ws1"].results[OP]["diffusers[cublaslt_ws1]"]
    assert plain.accuracy_latency["1"].device_time.processes == 2
    assert other.accuracy_latency["1"].device_time.processes == 1
    assert "repetition 2: no entry" in other.details["latency_repeats"]
    # Neither mode got its 3 processes: both are interrupted, so their reports are written as incomplete.
    assert {n: o.run.status for n, o in outcomes.items()} == {"plain": "interrupted", "cublaslt_ws1": "interrupted"}
    assert outcomes["plain"].run.reason.endswith("2 of 3 processes pooled")
    assert outcomes["cublaslt_ws1"].run.reason.endswith("1 of 3 processes pooled")


def test_a_repetition_stopped_by_the_runner_leaves_its_mode_interrupted():
    # A SIGTERM that the runner turns into interrupted children (no exception): the modes whose repetitions it
    # stopped are interrupted; one whose repetitions were all done stays ok.
    log = []
    run = RepeatedRun(OPTIONS, 3, _runner_factory(log, stopped_child=(3, "cublaslt_ws1")))
    outcomes = run.run(_jobs("plain", "cublaslt_ws1"), lambda *a: None)
    assert outcomes["plain"].run.status == "ok"
    assert outcomes["cublaslt_ws1"].run.status == "interrupted"
    assert outcomes["cublaslt_ws1"].run.reason.endswith("2 of 3 processes pooled")


def test_a_stop_during_repetition_one_leaves_the_finished_modes_interrupted():
    log = []
    run = RepeatedRun(OPTIONS, 2, _runner_factory(log, interrupt_after=(1, "plain")))
    with pytest.raises(KeyboardInterrupt):
        run.run(_jobs("plain", "cublaslt_ws1"), lambda *a: None)
    assert {n: o.run.status for n, o in run.outcomes.items()} == {"plain": "interrupted"}
    # Without --repeat nothing is owed: a mode that finished is complete.
    single = RepeatedRun(OPTIONS, 1, _runner_factory([], interrupt_after=(1, "plain")))
    with pytest.raises(KeyboardInterrupt):
        single.run(_jobs("plain", "cublaslt_ws1"), lambda *a: None)
    assert single.outcomes["plain"].run.status == "ok"


# --- one real latency-only child on the CPU -------------------------------------------------------


@pytest.mark.slow
def test_a_real_repeat_starts_a_latency_only_child(tmp_path):
    repeats = []
    run = RepeatedRun(OPTIONS, 2, lambda opts: ModeRunner(opts, [None], lambda *a: None),
                      on_repeat=lambda rep, name, outcome: repeats.append((rep, name, outcome)))
    outcomes = run.run(_jobs("plain"), lambda *a: None)
    first = outcomes["plain"].results[OP]["diffusers[plain]"]
    assert first.batch_invariance is not None and first.accuracy_latency["1"].fwd_rel_err is not None
    [(rep, name, outcome)] = repeats
    assert (rep, name, outcome.run.status) == (2, "plain", "ok")
    again = outcome.results[OP]["diffusers[plain]"]
    assert again.batch_invariance is None
    assert again.accuracy_latency["1"].fwd_rel_err is None and again.accuracy_latency["1"].fwd_us > 0


def test_a_repetition_keeps_the_modes_interpreter_and_drops_candidates_without_a_result():
    from adaln_bench.harness.assembly.repeat import repeat_jobs

    modes = all_modes()
    jobs = [ModeJob(modes["vllm"], _work("diffusers", "bundled"), "/envs/vllm/bin/python"),
            ModeJob(modes["plain"], _work("diffusers"))]
    first = {
        "vllm": ModeOutcome(run=ModeRun(status="ok"), child=None, results={OP: {
            "diffusers[vllm]": CandidateResult(source="x", has_backward=True),
            "bundled": CandidateUnavailable(unavailable="no CUDA device", status="unavailable")}}),
        "plain": ModeOutcome(run=ModeRun(status="crashed"), child=None, results={}),
    }
    assert repeat_jobs(jobs, first) == [ModeJob(modes["vllm"], _work("diffusers"), "/envs/vllm/bin/python")]


def test_a_repetition_measures_its_parts_own_operators_without_claiming_them_again():
    # A shared mode's part claimed its operators in repetition 1; its repetitions run in the same runner (one lease,
    # one ledger), whose claims folder still holds those claims: they must not claim again, only re-time.
    modes = all_modes()
    part = ModeJob(modes["plain"], _work("diffusers"), part=1, shared=True)
    seen = []

    class Recording(FakeRunner):
        def run_all(self, jobs, on_done):
            self.queue = list(jobs)
            while self.queue:
                job = self.queue.pop(0)
                seen.append(job)
                on_done(job.key, ModeOutcome(ModeRun(status="ok"), None, {OP: {
                    "diffusers[plain]": _result({"1": _dt([100.0, 101.0, 102.0])})}}))

    run = RepeatedRun(OPTIONS, 3, lambda opts: contextlib.nullcontext(Recording([], opts)))
    run.run([part], lambda *a: None)
    assert [(j.key, j.repetition, j.shared) for j in seen] == [("plain.1", 1, True), ("plain.1.rep2", 2, False),
                                                                ("plain.1.rep3", 3, False)]
    assert all(j.config.parts.probes is False and j.config.parts.latency for j in seen[1:])
    assert run.outcomes["plain.1"].results[OP]["diffusers[plain]"].accuracy_latency["1"].device_time.processes == 3
