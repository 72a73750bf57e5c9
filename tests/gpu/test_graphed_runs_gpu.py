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


def test_the_captures_of_a_candidate_hold_about_one_graphs_memory():
    # adaln_projection's graphs each hold a weight gradient of about 170 MB: a pool per capture, kept until the
    # cache was emptied, once filled an 80 GB GPU within one candidate's probes (cuda_capture.py).
    plan = get_operator("adaln_projection").family.plan(True)
    work = _workload("adaln_projection", "diffusers")
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    probe_batch_invariance(work, plan)
    eager_peak = torch.cuda.max_memory_reserved()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    graphed = GraphedWorkload(work)
    probe_batch_invariance(graphed, plan)
    counts = graphed.counts()
    assert counts["graphs_off"] is None and counts["graphs"] > 20, counts
    assert torch.cuda.max_memory_reserved() <= 2 * eager_peak, (torch.cuda.max_memory_reserved(), eager_peak)


class _ReadsTheHost:
    """A workload whose runs read a value back to the host: not allowed while its stream is captured."""

    def __init__(self, work: Workload):
        self.work, self.device = work, work.device

    def __call__(self, seed, n, rows):
        return self.work(seed, n, rows)

    def run_indexed(self, seed, n, index):
        out = self.work.run_indexed(seed, n, index)
        float(out.outs[0].sum())
        return out


def test_a_broken_capture_leaves_the_allocator_able_to_empty_its_cache_and_capture_again():
    work = _workload("timestep_mlp", "diffusers")
    broken = GraphedWorkload(_ReadsTheHost(work))
    for i in range(3):
        broken(3, 64, [i])
    assert "capture of a 1-row run failed" in (broken.counts()["graphs_off"] or "")
    torch.cuda.empty_cache()
    before = torch.cuda.memory_reserved()
    block = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    del block
    assert torch.cuda.memory_reserved() >= before + (1 << 30)  # cached, not given back yet
    torch.cuda.empty_cache()  # a capture left "under way" made this free nothing for the life of the process
    assert torch.cuda.memory_reserved() < before + (1 << 30)
    again = GraphedWorkload(work)
    got = [again(3, 64, [i]) for i in range(4)]
    assert again.counts()["replayed"] == 2 and again.counts()["graphs_off"] is None
    assert all(torch.equal(a, b) for a, b in zip(got[3].outs, work(3, 64, [3]).outs))
