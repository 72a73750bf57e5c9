"""The measurement sequence of one candidate, in this process on the CPU: each part can be left out, so a
latency-only child makes no run but the timed ones."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from adaln_bench.harness.measurement import plan as P
from adaln_bench.ops.adaln_projection.inputs import make_params
from adaln_bench.harness.measurement.measure import Parts, measure_candidate
from adaln_bench.harness.processes.protocol import ChildSpec, OpWork
from adaln_bench.harness.processes.protocol import RunConfig

from adaln_bench.harness.assembly.shapes import PRESETS
from adaln_bench.ops.adaln_projection import replay
from adaln_bench.ops.candidates import Implementation
from fixture_candidates import projection_subject

CPU = torch.device("cpu")
SHAPE = PRESETS["tiny"]
# Smaller than the quick plan, so that the probes take a second on the CPU.
PLAN = P.ProbePlan(all_rows_sizes=(6,), seeds=(3,), sub_batch_seeds=(3,), full_batch=16, sub_batch_sizes=(1, 7),
                   accuracy_sizes=(1, 3), quick=True,
                   random_rows=P.RandomRowsPlan(rng_seed=1, data_seed=6, pool=16, rows_per_size=2))
QUICK_T = [str(t) for t in PLAN.accuracy_sizes]


class CountingImpl(Implementation):
    """The replay candidate, counting its calls by batch size."""

    def __init__(self):
        self.calls: dict[int, int] = {}

        def forward(temb, w, b):
            self.calls[temb.shape[0]] = self.calls.get(temb.shape[0], 0) + 1
            return replay(temb, w, b)

        super().__init__(source="counting replay", has_backward=True, forward=forward)


def _measure(parts: Parts):
    impl = CountingImpl()
    result = measure_candidate(projection_subject(impl, SHAPE), make_params(SHAPE, CPU).as_inputs(), SHAPE, CPU, PLAN,
                               parts)
    return impl, result


def test_everything_by_default():
    _, result = _measure(Parts())
    assert result.batch_invariance is not None and result.batch_invariance.batch_invariant
    assert result.fingerprint is not None and result.fingerprint.rows == P.FINGERPRINT_ROWS
    assert list(result.accuracy_latency) == QUICK_T
    point = result.accuracy_latency["3"]
    assert point.fwd_rel_err is not None and point.grad_rel_err is not None
    assert point.fwd_us_dist.count == point.fwd_bwd_us_dist.count == 100


def test_latency_only_makes_only_the_timed_calls():
    impl, result = _measure(Parts(probes=False, accuracy=False))
    assert result.batch_invariance is None and result.fingerprint is None
    assert list(result.accuracy_latency) == QUICK_T
    for point in result.accuracy_latency.values():
        assert point.fwd_rel_err is None and point.grad_rel_err is None
        assert point.fwd_us is not None and point.fwd_bwd_us is not None
    # Warm-up and samples of the forward and of the step, at each T: nothing else ran.
    assert impl.calls == {int(t): 2 * (20 + 100) for t in QUICK_T}


def test_accuracy_only_and_probes_only():
    impl, result = _measure(Parts(probes=False, latency=False))
    # twice per size: the errors, then the repeat that says whether the parameter gradients repeat bit for bit
    assert impl.calls == {int(t): 2 for t in QUICK_T}
    assert all(p.fwd_us is None and p.fwd_rel_err is not None and p.params_repeatable is True
               for p in result.accuracy_latency.values())
    _, result = _measure(Parts(accuracy=False, latency=False))
    assert result.batch_invariance is not None and result.accuracy_latency == {}


def test_the_parent_passes_the_parts_and_the_one_shape_to_the_child(tmp_path: Path):
    options = RunConfig(device="cpu", shape=SHAPE, quick=True, timeout_s=None, parts=Parts(probes=False, accuracy=False))
    spec = ChildSpec(config=options, mode="plain", work=[OpWork(op="adaln_projection", candidates=["diffusers"])],
                     result_path=str(tmp_path / "r.json"))
    sent = json.loads(spec.model_dump_json())
    assert sent["config"]["parts"] == {"probes": False, "accuracy": False, "latency": True}
    assert sent["config"]["shape"] == {"dim": SHAPE.dim, "hidden": SHAPE.hidden, "modalities": SHAPE.modalities,
                                       "preset": "tiny", "frequency": 256}
    received = ChildSpec.model_validate_json(spec.model_dump_json())
    assert received.config.shape == SHAPE and received.config.parts == Parts(probes=False, accuracy=False)


def test_the_spec_refuses_unknown_fields():
    valid = {"config": {"device": "cpu", "quick": True, "shape": {"dim": 1, "hidden": 1, "modalities": 1}},
             "mode": "plain", "work": [], "result_path": "x"}
    ChildSpec.model_validate(valid)
    with pytest.raises(ValueError):
        ChildSpec.model_validate({**valid, "bogus": 1})
    with pytest.raises(ValueError):
        ChildSpec.model_validate({**valid, "config": {**valid["config"], "bogus": 1}})