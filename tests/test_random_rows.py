"""The seeded random probe: what it draws, and that it catches a fault the three fixed probes cannot see."""
from __future__ import annotations

import torch

import fixture_candidates as fx
from adaln_bench.harness.measurement import plan as P
from adaln_bench.ops.adaln_projection.inputs import make_params
from adaln_bench.harness.measurement.random_rows import draw, probe_random_rows
from adaln_bench.harness.assembly.shapes import PRESETS
from adaln_bench.harness.measurement.workload import Workload
from adaln_bench.ops.candidates import Implementation
from fixture_candidates import projection_subject


def test_one_size_per_octave_in_shuffled_order_and_enough_comparisons():
    plan = P.FULL.random_rows
    draws = draw(plan)
    sizes = [d.size for d in draws]
    octaves = plan.octaves()
    assert octaves[0] == (1, 1) and octaves[-1] == (2049, 4096) and len(octaves) == 13
    for lo, hi in octaves:
        assert sum(lo <= s <= hi for s in sizes) == 1, (lo, hi, sizes)
    assert sizes != sorted(sizes)
    assert sum(len(d.positions) for d in draws) >= 48
    for d in draws:
        assert len(d.batch) == d.size == len(set(d.batch)) and max(d.batch) < plan.pool
        assert all(0 <= p < d.size for p in d.positions) and len(set(d.positions)) == len(d.positions)
    assert [d.batch for d in draw(plan)] == [d.batch for d in draws], "the same seed must replay the same probe"


def test_quick_plan_stays_within_its_pool():
    plan = P.QUICK.random_rows
    assert max(d.size for d in draw(plan)) <= plan.pool == P.QUICK.full_batch


def _fixed_probe_batch_sizes(plan: P.ProbePlan) -> set[int]:
    sizes = set(plan.all_rows_sizes) | {1, plan.full_batch}
    for sb in plan.sub_batch_sizes:
        sizes |= {stop - start for start, stop in P.sub_batch_ranges(sb, plan.full_batch)}
    return sizes | set(P.sweep_batch_sizes(plan.sweep_n))


def _workload(fn) -> Workload:
    shape = PRESETS["tiny"]
    impl = Implementation(source="fixture", has_backward=True, forward=fn)
    return Workload(projection_subject(impl, shape), make_params(shape, torch.device("cpu")).as_inputs(), shape,
                    torch.device("cpu"))


def test_random_probe_catches_rows_that_differ_only_at_unprobed_sizes():
    assert not _fixed_probe_batch_sizes(P.FULL) & set(fx.WRONG_SIZES), "the fixture must hide from the fixed probes"
    plan = P.FULL.random_rows
    draws = draw(plan)
    expected = sum(len(d.positions) for d in draws if d.size in fx.WRONG_SIZES)
    assert expected > 0
    counts = probe_random_rows(_workload(fx.wrong_mid_sizes), plan)
    assert counts.comparisons == sum(len(d.positions) for d in draws)
    assert counts.fwd_differ == expected and counts.rowgrad_differ == expected
    assert counts.first_failures and all(f.size in fx.WRONG_SIZES and f.fwd and f.rowgrad
                                         for f in counts.first_failures)
    assert counts.sizes == [d.size for d in draws] and counts.rng_seed == plan.rng_seed


def test_random_probe_passes_an_invariant_candidate():
    counts = probe_random_rows(_workload(fx._linear), P.QUICK.random_rows)
    assert counts.comparisons > 0 and counts.fwd_differ == 0 and counts.rowgrad_differ == 0
    assert counts.first_failures == []
