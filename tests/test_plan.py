"""The probe plan's derived numbers must be exactly those of docs/spec.md#4-batch-invariance-probes and the reference report's."""
import json

from adaln_bench.harness.measurement import plan as P
from adaln_bench.harness.measurement.probes import planned_runs


def test_sweep_matches_reference_report(reference_path):
    ref = json.loads(reference_path.read_text())
    sweep = ref["results"]["plain"]["diffusers[plain]"]["batch_invariance"]["batch_size_sweep"]
    assert P.sweep_batch_sizes(2048) == sweep["batch_sizes"]
    assert len(P.sweep_batch_sizes(2048)) == 32
    assert P.sweep_probe_rows(2048) == sweep["probe_rows"] == [0, 259, 515, 771, 1027, 1283, 1539, 2047]
    assert P.sweep_comparisons(2048, 3) == sweep["comparisons"] == 2256


def test_sub_batches_count_2060():
    runs = sum(len(P.sub_batch_ranges(sb, 4096)) for sb in P.FULL.sub_batch_sizes)
    assert runs == 512 + 512 + 4 + 2
    assert P.sub_batch_ranges(7, 4096)[:2] == [(0, 7), (8, 15)]
    assert P.sub_batch_ranges(2048, 4096) == [(0, 2048), (2048, 4096)]


def test_positions_and_quick_plan():
    assert P.sweep_positions(1) == [0]
    assert P.sweep_positions(2) == [0, 1]
    assert P.sweep_positions(2048) == [0, 1023, 2047]
    assert P.QUICK.all_rows_sizes == (17, 64) and P.QUICK.full_batch == 256
    assert P.QUICK.sub_batch_sizes == (1, 7, 64) and P.QUICK.accuracy_sizes == (1, 3)
    assert P.sweep_probe_rows(64) == [0, 11, 19, 27, 35, 43, 51, 63]


def test_planned_runs_counts_every_run():
    # all_rows: 3 seeds x (n rows alone + 2 full runs); subs: 2 x (1 full + 1030); sweep: 3 x 8 x (alone + reverse + 93);
    # random rows: a batch per size (13) and each distinct probed row alone (57 positions, one row drawn twice)
    assert planned_runs(P.FULL) == 3 * (66 + 259 + 2050) + 2 * 1031 + 3 * 8 * 95 + 13 + 56
