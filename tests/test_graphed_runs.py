"""The probes' replayed runs (harness/measurement/graphed_runs.py), on the CPU with a stand-in for CUDA graphs: a
"graph" whose replay re-runs the captured run into the same output tensors, as a CUDA graph's replay does. The
probe records must be those of the eager runs whatever the graphs do: match, differ, or fail to capture."""
from __future__ import annotations

import pytest
import torch

from adaln_bench.harness.assembly.shapes import PRESETS
from adaln_bench.harness.measurement import plan as P
from adaln_bench.harness.measurement.graphed_runs import Graphed, GraphedWorkload
from adaln_bench.harness.measurement.probes import planned_runs, probe_batch_invariance
from adaln_bench.harness.measurement.workload import Workload
from adaln_bench.ops.adaln_projection import replay
from adaln_bench.ops.adaln_projection.inputs import make_params
from adaln_bench.ops.candidates import Implementation
from fixture_candidates import projection_subject

CPU = torch.device("cpu")
SHAPE = PRESETS["tiny"]
PLAN = P.ProbePlan(all_rows_sizes=(6, 9), seeds=(3, 4), sub_batch_seeds=(3,), full_batch=16,
                   sub_batch_sizes=(1, 7), accuracy_sizes=(1, 3), quick=True,
                   random_rows=P.RandomRowsPlan(rng_seed=1, data_seed=6, pool=16, rows_per_size=2))


def batch_variant(temb, w, b):
    """Rows change in batches of 4 to 8 rows: the probes find something to count."""
    out = replay(temb, w, b)
    return out * (1 + 2 ** -6) if 4 <= temb.shape[0] <= 8 else out


def workload() -> Workload:
    impl = Implementation(source="batch-variant replay", has_backward=True, forward=batch_variant)
    return Workload(projection_subject(impl, SHAPE), make_params(SHAPE, CPU).as_inputs(), SHAPE, CPU)


def rerun_capture(log: list, differ: bool = False):
    """A capture whose "graph" re-runs the rows in its index buffer into the captured run's tensors; it checks that
    the batch it reads is still the workload's (a real graph would read freed memory otherwise)."""

    def capture(work: Workload, seed: int, n: int, index: torch.Tensor):
        eager = work.run_indexed(seed, n, index)
        static = work.run_indexed(seed, n, index)
        log.append((seed, n, len(index)))

        def again() -> None:
            assert list(work._batch) == [(seed, n)], "a graph replayed after its batch was replaced"
            fresh = work.run_indexed(seed, n, index)
            for mine, new in zip(static.outs + static.row_grads, fresh.outs + fresh.row_grads):
                mine.copy_(new)
            if differ:
                static.outs[0].add_(1.0)

        again()
        return eager, Graphed(again, index, static)

    return capture


def records(result):
    return result.model_dump(exclude={"runs"})


def test_replayed_runs_give_the_eager_probe_records():
    eager = probe_batch_invariance(workload(), PLAN)
    log: list = []
    graphed = GraphedWorkload(workload(), capture=rerun_capture(log))
    replayed = probe_batch_invariance(graphed, PLAN)
    assert not eager.batch_invariant and eager.full_vs_sub_batches.fwd_differ > 0  # something was counted
    assert records(replayed) == records(eager)
    counts = graphed.counts()
    assert counts["replayed"] > counts["eager"] > 0 and counts["graphs"] == len(log) > 0
    assert counts["replayed"] + counts["eager"] == planned_runs(PLAN)  # every run counted once
    assert counts["graphs_off"] is None and counts["eager_sizes"] is None


def test_a_size_whose_replay_differs_runs_eager_and_the_records_stay():
    eager = probe_batch_invariance(workload(), PLAN)
    graphed = GraphedWorkload(workload(), capture=rerun_capture([], differ=True))
    assert records(probe_batch_invariance(graphed, PLAN)) == records(eager)
    counts = graphed.counts()
    assert counts["replayed"] == 0 and counts["eager_sizes"] and 1 in counts["eager_sizes"]


def test_a_failed_capture_turns_the_graphs_off_and_the_records_stay():
    def broken(*_):
        raise RuntimeError("operation not permitted when stream is capturing")

    eager = probe_batch_invariance(workload(), PLAN)
    graphed = GraphedWorkload(workload(), capture=broken)
    assert records(probe_batch_invariance(graphed, PLAN)) == records(eager)
    counts = graphed.counts()
    assert counts["replayed"] == 0 and counts["graphs"] == 0
    assert "capture of a 1-row run failed: RuntimeError: operation not permitted" in counts["graphs_off"]
    assert counts["eager"] == planned_runs(PLAN)


def test_whole_batches_large_runs_and_first_runs_of_a_size_stay_eager():
    log: list = []
    graphed = GraphedWorkload(workload(), capture=rerun_capture(log), max_rows=4)
    graphed(3, 16, range(16))
    graphed(3, 16, range(16))  # the whole batch, twice: never captured
    graphed(3, 16, list(range(5)))
    graphed(3, 16, list(range(5, 10)))  # 5 rows, over max_rows
    graphed(3, 16, [2])  # a size seen once
    assert log == [] and graphed.counts()["eager"] == 5
    graphed(3, 16, [7])  # its second run: captured (and answered by the eager warm-up)
    graphed(3, 16, [8])
    assert log == [(3, 16, 1)] and graphed.counts()["replayed"] == 1
    graphed(4, 16, [8])  # another batch: the graph is dropped, the size counted afresh
    graphed(4, 16, [9])
    assert log == [(3, 16, 1), (4, 16, 1)]


def test_a_replayed_run_is_a_copy_that_the_next_replay_leaves_alone():
    graphed = GraphedWorkload(workload(), capture=rerun_capture([]))
    first = [graphed(3, 16, [i]) for i in range(4)]  # eager, captured, then two replays
    again = workload()
    for i, got in enumerate(first):
        want = again(3, 16, [i])
        assert torch.equal(got.outs[0], want.outs[0]) and torch.equal(got.row_grads[0], want.row_grads[0])
    assert first[3].param_grads is None  # a replay keeps no parameter gradients: the probes read none


@pytest.mark.parametrize("graphs", [True, False])
def test_measure_candidate_records_how_the_runs_were_made_only_on_cuda(graphs):
    # On the CPU every run is eager, asked for graphs or not: no `runs` record.
    from adaln_bench.harness.measurement.measure import Parts, measure_candidate

    impl = Implementation(source="replay", has_backward=True, forward=replay)
    result = measure_candidate(projection_subject(impl, SHAPE), make_params(SHAPE, CPU).as_inputs(), SHAPE, CPU,
                               PLAN, Parts(accuracy=False, latency=False), probe_graphs=graphs)
    assert result.batch_invariance is not None and result.batch_invariance.runs is None  # the CPU: all eager


def test_the_run_command_leaves_the_probes_eager_unless_asked(tmp_path):
    from adaln_bench.harness.processes.protocol import RunConfig

    assert RunConfig(device="cuda", shape=SHAPE).probe_graphs is False
    from conftest import run_cli

    shown = run_cli("run", "--help").stdout
    assert "--probe-graphs" in shown and "--eager-probes" in shown
