"""The parts of a mode split over several CPU children share its operators at run time: each operator is measured
by exactly one part, the one that claimed it, and a part that dies leaves the rest to the others."""
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT

from adaln_bench.harness.processes.claims import answering, claim, claimed_by
from adaln_bench.harness.processes.protocol import OpWork

TESTS = Path(__file__).resolve().parent


def test_an_operator_is_claimed_once_and_the_file_names_the_part(tmp_path):
    assert claim(str(tmp_path), "gate_residual", "plain.1")
    assert not claim(str(tmp_path), "gate_residual", "plain.0")
    assert claim(str(tmp_path), "timestep_mlp", "plain.0")
    assert claimed_by(tmp_path, "plain.1") == {"gate_residual"}
    assert claimed_by(tmp_path, "plain.0") == {"timestep_mlp"}


@dataclass
class _Outcome:
    name: str
    ops: frozenset | None


@dataclass(frozen=True)
class _Job:
    key: str
    work: tuple


def test_the_claimant_answers_then_a_part_that_answers_for_its_whole_list_then_not_reached():
    work = (OpWork(op="a", candidates=["x"]), OpWork(op="b", candidates=["x"]), OpWork(op="c", candidates=["x"]))
    jobs = [_Job("plain.0", work), _Job("plain.1", work)]

    def not_reached(job, op, outcome):
        return ("not reached", job.key, op)

    outcomes = {"plain.0": _Outcome("0", frozenset({"a"})), "plain.1": _Outcome("1", frozenset({"b"}))}
    assert answering("a", jobs, outcomes, not_reached).name == "0"
    assert answering("b", jobs, outcomes, not_reached).name == "1"
    assert answering("c", jobs, outcomes, not_reached) == ("not reached", "plain.0", "c")
    assert answering("d", jobs, outcomes, not_reached) is None  # no job of the mode has it
    # A part that stopped before the claims (unavailable, crashed before its switch) answers for all it had.
    outcomes["plain.1"] = _Outcome("1", None)
    assert answering("c", jobs, outcomes, not_reached).name == "1"
    assert answering("a", jobs, outcomes, not_reached).name == "0"  # the claimant first


@pytest.mark.slow
def test_a_part_that_crashes_leaves_the_other_operators_to_the_other_part(tmp_path, monkeypatch):
    from adaln_bench.harness.processes.protocol import RunConfig
    from adaln_bench.harness.processes.runner import ModeJob, ModeRunner
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.modes.registry import all_modes

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), str(TESTS)]))
    plain = all_modes()["plain"]
    work = (OpWork(op="adaln_projection", candidates=["fixture_candidates:crash"]),  # SIGSEGV in plain
            OpWork(op="gate_residual", candidates=["diffusers"]),
            OpWork(op="timestep_sinusoid", candidates=["diffusers"]))
    jobs = [ModeJob(plain, work, part=i, shared=True) for i in (0, 1)]
    options = RunConfig(device="cpu", shape=PRESETS["tiny"], quick=True, timeout_s=200, cold_start=False)
    outcomes = {}
    with ModeRunner(options, [None, None], lambda key, event: None) as runner:
        runner.run_all(jobs, lambda key, outcome: outcomes.__setitem__(key, outcome))
    by_status = {o.run.status: o for o in outcomes.values()}
    assert set(by_status) == {"crashed", "ok"}, {k: (o.run.status, o.run.reason) for k, o in outcomes.items()}
    crashed, ok = by_status["crashed"], by_status["ok"]
    assert crashed.ops == {"adaln_projection"} and ok.ops == {"gate_residual", "timestep_sinusoid"}
    assert crashed.results["adaln_projection"]["fixture_candidates:crash"].status == "crashed"
    assert set(crashed.results) == {"adaln_projection"}  # nothing said about the operators it never claimed
    for op in ("gate_residual", "timestep_sinusoid"):
        assert ok.results[op]["diffusers"].batch_invariance is not None
    for op in ("adaln_projection", "gate_residual", "timestep_sinusoid"):
        assert answering(op, jobs, outcomes, runner.not_reached) is (crashed if op == "adaln_projection" else ok)


@pytest.mark.slow
def test_a_later_part_whose_operators_are_all_claimed_starts_no_child():
    # One slot: the first part claims and measures both operators; the second part's turn comes after, with
    # nothing left. It answers for no operator and spends nothing (no child: no imports, no CUDA context).
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.harness.assembly.time_accounting import run_time
    from adaln_bench.harness.processes.protocol import RunConfig
    from adaln_bench.harness.processes.runner import ModeJob, ModeRunner
    from adaln_bench.modes.registry import all_modes

    plain = all_modes()["plain"]
    work = (OpWork(op="gate_residual", candidates=["diffusers"]),
            OpWork(op="timestep_sinusoid", candidates=["diffusers"]))
    jobs = [ModeJob(plain, work, part=i, shared=True) for i in (0, 1)]
    options = RunConfig(device="cpu", shape=PRESETS["tiny"], quick=True, timeout_s=200, cold_start=False)
    outcomes, started = {}, []
    with ModeRunner(options, [None], lambda key, event: started.append(key)) as runner:
        runner.run_all(jobs, lambda key, outcome: outcomes.__setitem__(key, outcome))
    first, second = outcomes["plain.0"], outcomes["plain.1"]
    assert first.run.status == "ok" and first.ops == {"gate_residual", "timestep_sinusoid"}
    assert second.run.status == "ok" and second.ops == frozenset() and second.results == {}
    assert second.child is None and second.run.wall_s is None and "claimed every operator" in second.run.reason
    assert "plain.1" not in started  # no child's progress
    for op in ("gate_residual", "timestep_sinusoid"):
        assert answering(op, jobs, outcomes, runner.not_reached) is first
    assert run_time(jobs, outcomes, [], None)["modes"]["plain"]["children"] == 1


def test_on_two_cpu_slots_each_mode_gets_two_parts_with_one_list_heaviest_first():
    from adaln_bench.harness.assembly.selection import jobs, select
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.modes.registry import all_modes
    from adaln_bench.ops.registry import all_operators

    modes = all_modes()
    ops = list(all_operators().values())
    chosen = [modes["plain"], modes["vllm"]]
    got = jobs(select(ops, chosen, []), chosen, {}, parts=2, shape=PRESETS["tiny"])
    assert [(j.key, j.shared) for j in got] == [("plain.0", True), ("plain.1", True), ("vllm.0", True),
                                               ("vllm.1", True)]
    assert got[0].work == got[1].work and len(got[0].work) == 7
    # The projection's bf16 GEMM rows first; the cheapest elementwise operators last.
    assert [w.op for w in got[0].work][:2] == ["adaln_projection", "timestep_mlp"]
    assert [w.op for w in got[2].work] == ["adaln_projection", "timestep_mlp", "norm_modulate", "final_adaln_out"]
    single = jobs(select(ops, chosen, []), chosen, {}, parts=1, shape=PRESETS["tiny"])
    assert [(j.key, j.shared, len(j.work)) for j in single] == [("plain", False, 7), ("vllm", False, 4)]
