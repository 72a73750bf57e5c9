"""The probes' runs replayed from CUDA graphs give the eager runs' records, bit for bit, on a real GPU: every
operator's diffusers candidate and bundled kernel, the quick plan at the model's shape."""
import pytest
import torch

from adaln_bench.harness.assembly.shapes import PRESETS
from adaln_bench.harness.measurement.graphed_runs import GraphedWorkload
from adaln_bench.harness.measurement.probes import planned_runs, probe_batch_invariance
from adaln_bench.harness.measurement.subject import Subject
from adaln_bench.harness.measurement.workload import Workload
from adaln_bench.ops import candidates
from adaln_bench.ops.candidates import BuildContext
from adaln_bench.ops.draws import draw_params
from adaln_bench.ops.registry import all_operators, get_operator

pytestmark = pytest.mark.gpu

SHAPE = PRESETS["h3"]
CASES = [(op, name) for op in all_operators() for name in ("diffusers", "bundled") if name in candidates.candidates_of(op)]


def _workload(op_name: str, name: str) -> Workload:
    op, device = get_operator(op_name), torch.device("cuda")
    candidate = candidates.get(name, op_name)
    reason = candidate.availability()
    if reason is not None:
        pytest.skip(f"{op_name}/{name}: {reason}")
    impl = candidate.build(BuildContext(mode="plain", device=device, shape=SHAPE, op=op_name))
    return Workload(Subject.of(op, candidate, impl, SHAPE), draw_params(op, SHAPE, device), SHAPE, device)


@pytest.mark.parametrize("op_name,name", CASES)
def test_replayed_probes_give_the_eager_records(op_name, name):
    plan = get_operator(op_name).family.plan(True)
    eager = probe_batch_invariance(_workload(op_name, name), plan)
    graphed = GraphedWorkload(_workload(op_name, name))
    replayed = probe_batch_invariance(graphed, plan)
    assert replayed.model_dump(exclude={"runs"}) == eager.model_dump(exclude={"runs"})
    counts = graphed.counts()
    assert counts["graphs_off"] is None and counts["eager_sizes"] is None, counts
    assert counts["replayed"] > counts["eager"] and counts["replayed"] + counts["eager"] == planned_runs(plan)


def test_a_replay_equals_the_eager_run_of_the_same_rows():
    work = _workload("timestep_mlp", "diffusers")
    graphed = GraphedWorkload(_workload("timestep_mlp", "diffusers"))
    got = [graphed(3, 64, [i]) for i in range(6)]  # eager, captured, then replays
    assert graphed.counts()["replayed"] == 4
    for i, run in enumerate(got):
        want = work(3, 64, [i])
        assert all(torch.equal(a, b) for a, b in zip(run.outs + run.row_grads, want.outs + want.row_grads))
