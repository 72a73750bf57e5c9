"""Inputs and probe counts are the contract: pinned here, so that a change of a seeded draw or of a probe's
structure fails a test (the projection's hashes are those its reports have carried since before operators
existed: results/h200/*.json and the 2253c35 CPU report)."""
import importlib

import torch

from adaln_bench.harness.measurement import plan as P
from adaln_bench.harness.measurement.input_fingerprint import input_fingerprint
from adaln_bench.harness.measurement.random_rows import draw
from adaln_bench.harness.assembly.shapes import PRESETS
from adaln_bench.ops.draws import draw_params, packed_layout
from adaln_bench.ops.plan import SINUSOID, TIMESTEP, TOKEN
from adaln_bench.ops.registry import all_operators, get_operator, operator_package
from adaln_bench.reports.diff import diff_reports
from adaln_bench.datamodel.io import read_report
from conftest import ROOT

CPU = torch.device("cpu")

# The model's pipeline, as users see it and the built-in operators' reports list it; any operator added later
# takes its own place among them (its declared pipeline_position).
PIPELINE = ("timestep_sinusoid", "timestep_mlp", "adaln_projection", "adaln_row_gather", "norm_modulate",
            "gate_residual", "final_adaln_out")


def pins(name):
    """The operator's pins, kept in its folder (ops/<op>/pins.py)."""
    package = operator_package(name)
    try:
        return importlib.import_module(f"{package}.pins")
    except ModuleNotFoundError as exc:
        if exc.name != f"{package}.pins":
            raise
        raise AssertionError(f"operator {name} has no pins: {package}/pins.py (docs/adding-an-operator.md#pins)")


# Every operator found: the first 16 hex digits of each input's SHA-256 (dtype, shape and bytes), seed 3,
# 257 rows, tiny preset, CPU.
PINNED = {name: pins(name).INPUT_SHA256 for name in all_operators()}

# The projection at the small preset, as the CPU report of 2253c35 (before the operator registry) recorded them.
PROJECTION_SMALL = {
    "temb_sha256": "4348bd996c131bc5f6701f5526d96584adf24a132178e823678eac8db6ff0d54",
    "weight_sha256": "bc5e487b7b72083b4b2123c70410a98b1ec8d64127bce5c4a8df8cce543c4e55",
    "bias_sha256": "a92579db8f5619624b00911839fbf117b103d42daa36c55f8dfd5fd3ee8dee28",
    "upstream_sha256": "9b347b303ec18fa2161e04bb16f359eea297ee5eab3366503fc04c63c81736ac",
    "permutation_sha256": "cdee1eacd630bc7c2a308f3e02f8f1a0b3c5dc62d6b80ebff8397981f40a2212",
}


def _hashes(name, preset):
    op, shape = get_operator(name), PRESETS[preset]
    fp = input_fingerprint(op, shape, draw_params(op, shape, CPU), CPU)
    return {k: v for k, v in fp.model_dump(exclude_none=True).items() if k.endswith("_sha256")}


def test_every_operators_seeded_inputs_are_pinned():
    assert [name for name in all_operators() if name in PIPELINE] == list(PIPELINE)
    for name, pinned in PINNED.items():
        got = {k: v[:16] for k, v in _hashes(name, "tiny").items()}
        assert got == pinned, name


def test_the_projections_inputs_are_those_of_its_reports_before_the_registry():
    assert _hashes("adaln_projection", "small") == PROJECTION_SMALL


def test_the_packed_layout_is_the_mersenne_twister_one_of_ops_md():
    layout = packed_layout(3, 64, 3, CPU)
    assert layout["timestep_indices"][:16].tolist() == [0, 1, 2, 2, 1, 1, 0, 2, 2, 1, 2, 2, 2, 1, 1, 2]
    assert layout["token_tags"][:16].tolist() == [0, 1, 2, 0, 1, 0, 0, 2, 1, 1, 1, 0, 2, 2, 0, 1]
    assert torch.equal(layout["packed_index"], layout["timestep_indices"] * 3 + layout["token_tags"])


def _sub_batches(plan):
    return len(plan.sub_batch_seeds) * sum(len(P.sub_batch_ranges(sb, plan.full_batch)) for sb in plan.sub_batch_sizes)


def test_probe_counts_of_each_family_are_those_of_ops_md():
    for family, subs in ((TIMESTEP, 2060), (TOKEN, 2124), (SINUSOID, 2060)):
        plan = family.full
        assert [len(plan.seeds) * n for n in plan.all_rows_sizes] == [192, 771, 6144]
        assert _sub_batches(plan) == subs, family.name
        assert P.sweep_comparisons(plan.sweep_n, len(plan.seeds)) == 2256
    # The random-rows probe: the projection's 57 comparisons (13 octaves to 4096); the token family's pool is
    # its full batch, 131072 (18 octaves).
    assert sum(len(d.positions) for d in draw(TIMESTEP.full.random_rows)) == 57
    assert len(TOKEN.full.random_rows.octaves()) == 18
    assert {op.name: op.family.name for op in all_operators().values()} == {
        name: pins(name).FAMILY for name in all_operators()}


# (mode, candidate, metric, T, verdict) of each report diffed with itself, and its `report` text (markdown and
# the 200-column terminal summary): SHA-256 prefixes computed with the code of 2253c35, before the registry.
BEFORE = {
    # Its text differs from 2253c35's in one line, on purpose (issue 30): the stderr note quotes the warning
    # ("UserWarning: Attempting to run cuBLAS, but there was no current CUDA context!…"), not the code line under it.
    "results/h200/history/adaln_projection/adaln_projection.h200.bd79cc3.json": (100, "7ca0bc76f239d366", "dc241dc1c207"),
    "results/b200/adaln_projection/adaln_projection.b200.prior-art.json": (296, "d8201e47e19099c9", "6277200aceed"),
}


def test_committed_reports_diff_and_render_as_before_the_registry():
    import hashlib
    import io
    import json

    from rich.console import Console

    from adaln_bench.reports.render import markdown, print_summary

    for path, (count, rows_sha, text_sha) in BEFORE.items():
        report = read_report(ROOT / path)
        rows = [[r.mode, r.candidate, r.metric, r.t, r.verdict.value] for r in diff_reports(report, report).rows]
        assert len(rows) == count and hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16] == rows_sha, path
        buf = io.StringIO()
        print_summary(report, Console(file=buf, width=200))
        assert hashlib.sha256((markdown(report) + buf.getvalue()).encode()).hexdigest()[:12] == text_sha, path
