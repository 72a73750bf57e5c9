"""Inputs and probe counts are the contract: pinned here, so that a change of a seeded draw or of a probe's
structure fails a test (the projection's hashes are those its reports have carried since before operators
existed: results/h200/*.json and the 2253c35 CPU report)."""
import torch

from adaln_bench.harness import plan as P
from adaln_bench.harness.input_fingerprint import input_fingerprint
from adaln_bench.harness.random_rows import draw
from adaln_bench.harness.shapes import PRESETS
from adaln_bench.ops.draws import draw_params, packed_layout
from adaln_bench.ops.plan import SINUSOID, TIMESTEP, TOKEN
from adaln_bench.ops.registry import all_operators, get_operator
from adaln_bench.reports.diff import diff_reports
from adaln_bench.reports.io import read_report
from conftest import ROOT

CPU = torch.device("cpu")

# The first 16 hex digits of each input's SHA-256 (dtype, shape and bytes), seed 3, 257 rows, tiny preset, CPU.
PINNED = {
    "timestep_sinusoid": {
        "upstream_sha256": "ce0055bb77e85d69",
        "permutation_sha256": "cdee1eacd630bc7c",
        "t_sha256": "3538134ca7661a90",
    },
    "timestep_mlp": {
        "upstream_sha256": "bc11e1735b8a1419",
        "permutation_sha256": "cdee1eacd630bc7c",
        "x_sha256": "b8d6115ff9389d9a",
        "w1_sha256": "eb57b2bf33006d3a",
        "b1_sha256": "ec6d960f5e2bd1fa",
        "w2_sha256": "839114a8ae435f09",
        "b2_sha256": "093f72ecdcda7b8c",
    },
    "adaln_projection": {
        "temb_sha256": "3165acb763ad05c0",
        "weight_sha256": "107ee9eba61d7580",
        "bias_sha256": "7eae4afa4cdf2ecd",
        "upstream_sha256": "5360650c0c02a9c6",
        "permutation_sha256": "cdee1eacd630bc7c",
    },
    "adaln_row_gather": {
        "upstream_sha256": "3c9f6dd3ebda295d",
        "permutation_sha256": "cdee1eacd630bc7c",
        "table_sha256": "6dc4d8728ff6184c",
        "timestep_indices_sha256": "05c7a0ba49d79d6a",
        "token_tags_sha256": "a7d34793a92c6c99",
    },
    "norm_modulate": {
        "upstream_sha256": "bb0b4b3f718ae3e0",
        "permutation_sha256": "cdee1eacd630bc7c",
        "x_sha256": "c2092ae7639e5bb6",
        "w_sha256": "e1a565d03b44c25c",
        "sh_sha256": "0393bbf935677e21",
        "sc_sha256": "6c89aa25d817bb71",
        "idx_sha256": "06b94244907dd59d",
    },
    "gate_residual": {
        "upstream_sha256": "bb0b4b3f718ae3e0",
        "permutation_sha256": "cdee1eacd630bc7c",
        "res_sha256": "89bcae90f1b02df6",
        "y_sha256": "51c6a194d9aafe9b",
        "gate_sha256": "c8432ef226ab6c04",
        "idx_sha256": "06b94244907dd59d",
    },
    "final_adaln_out": {
        "temb_sha256": "e5405fc5ee2623b6",
        "upstream_sha256": "bb0b4b3f718ae3e0",
        "permutation_sha256": "cdee1eacd630bc7c",
        "x_sha256": "62fb27dd8d503605",
        "nw_sha256": "b02ebe92a5ef1ee4",
        "w_sha256": "6a23a7cf9c97cf4a",
        "b_sha256": "577c6dc5a69c3ec8",
        "ti_sha256": "05c7a0ba49d79d6a",
    },
}

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
    assert list(all_operators()) == list(PINNED)
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
        "timestep_sinusoid": "sinusoid", "timestep_mlp": "T", "adaln_projection": "T", "adaln_row_gather": "S",
        "norm_modulate": "S", "gate_residual": "S", "final_adaln_out": "S"}


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
