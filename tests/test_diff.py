"""`adaln-bench diff`: verdicts on crafted report pairs, thresholds, REV:path sources, output formats, exit codes.

Every crafted report is RL-Kernel's B200 reference report with one realistic edit, so the tests exercise
the reader and the engine on the real format.
"""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
from conftest import run_main

from adaln_bench.reports.diff import (
    EXIT_BAD_INPUT,
    EXIT_NOT_COMPARABLE,
    EXIT_OK,
    EXIT_REGRESSION,
    FailOn,
    ProbeCount,
    Verdict,
    compare_error,
    compare_latency,
    diff_reports,
    exit_code,
)
from adaln_bench.datamodel.schema import Distribution, Report
from adaln_bench.reports.thresholds import Thresholds, resolve_thresholds

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "results" / "b200" / "adaln_projection" / "adaln_projection.b200.prior-art.json"
REFERENCE_DATA = json.loads(REFERENCE.read_text(encoding="utf-8"))
# 8 (mode, candidate) pairs × (1 invariance row + 6 T × 6 metrics).
REFERENCE_ROWS = 8 * (1 + 6 * 6)


@pytest.fixture(autouse=True)
def _table_width(monkeypatch):
    """The rendered tables at the width a redirected run gets (160), whatever the terminal or a parallel test
    runner sets COLUMNS to: the tests read cells, which a narrower table wraps mid-word."""
    monkeypatch.delenv("COLUMNS", raising=False)


def edited(edit: Callable[[dict], object] | None = None) -> dict:
    data = copy.deepcopy(REFERENCE_DATA)
    if edit is not None:
        edit(data)
    return data


def report(data: dict) -> Report:
    return Report.model_validate(data)


def diff(new: dict, old: dict | None = None, **kwargs):
    return diff_reports(report(old or REFERENCE_DATA), report(new), **kwargs)


def changed(result) -> list[tuple[str, str, str, int | None, Verdict]]:
    return [(r.mode, r.candidate, r.metric, r.t, r.verdict) for r in result.changes]


def write(tmp_path: Path, name: str, data: dict | str) -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


# --- edits ------------------------------------------------------------------------------------------


def lose_invariance_vllm(data: dict) -> None:
    inv = data["results"]["vllm"]["diffusers[vllm]"]["batch_invariance"]
    inv["all_rows"]["257"]["rowgrad_differ"] = 771
    inv["batch_invariant"] = False


def set_dist(data: dict, mode: str, candidate: str, t: str, metric: str, median: float, spread: float) -> None:
    point = data["results"][mode][candidate]["accuracy_latency"][t]
    point[metric] = median
    point[metric + "_dist"] = {"min": median * (1 - 2 * spread), "q1": median * (1 - spread), "median": median,
                               "q3": median * (1 + spread), "max": median * (1 + 2 * spread), "count": 100}


PLAIN = ("plain", "diffusers[plain]")
FWD_T1 = REFERENCE_DATA["results"]["plain"]["diffusers[plain]"]["accuracy_latency"]["1"]["fwd_us"]


# --- the acceptance cases ---------------------------------------------------------------------------


def test_reference_against_itself_every_row_is_same():
    result = diff(edited())
    assert result.comparable
    assert result.config == ()
    assert len(result.rows) == REFERENCE_ROWS
    assert {r.verdict for r in result.rows} == {Verdict.SAME}
    assert exit_code(result) == EXIT_OK


def test_losing_invariance_is_a_regression_naming_the_probe_and_counts():
    result = diff(edited(lose_invariance_vllm))
    assert changed(result) == [("vllm", "diffusers[vllm]", "batch_invariant", None, Verdict.WORSE)]
    row = result.changes[0]
    assert (row.old, row.new) == (True, False)
    assert row.probes == (ProbeCount("all_rows", "n=257 rowgrad_differ", 0, 771, 771),)
    assert "all_rows n=257 rowgrad_differ 0 → 771 of 771" in row.note
    assert exit_code(result) == EXIT_REGRESSION


def test_parameters_no_longer_repeatable_is_named():
    def edit(data):
        inv = data["results"]["plain"]["rl_kernel"]["batch_invariance"]
        inv["params_repeatable"] = False
        inv["batch_invariant"] = False

    result = diff(edited(edit))
    assert changed(result) == [("plain", "rl_kernel", "batch_invariant", None, Verdict.WORSE)]
    assert result.changes[0].probes == (ProbeCount("params_repeatable", "", True, False),)


def test_sub_batch_and_sweep_failures_are_each_named():
    def edit(data):
        inv = data["results"]["sglang"]["diffusers[sglang]"]["batch_invariance"]
        inv["full_vs_sub_batches"]["fwd_differ"] = 3
        inv["batch_size_sweep"]["differ"] = 5
        inv["batch_invariant"] = False

    row = diff(edited(edit)).changes[0]
    assert row.probes == (
        ProbeCount("full_vs_sub_batches", "fwd_differ", 0, 3, 2060),
        ProbeCount("batch_size_sweep", "differ", 0, 5, 2256),
    )


def test_becoming_invariant_is_better_and_not_a_regression():
    def edit(data):
        inv = data["results"]["megatron_te_native"]["diffusers[megatron_te_native]"]["batch_invariance"]
        for count in inv["all_rows"].values():
            count["rowgrad_differ"] = 0
        inv["full_vs_sub_batches"]["rowgrad_differ"] = 0
        inv["batch_size_sweep"]["differ"] = 0
        inv["batch_invariant"] = True

    result = diff(edited(edit))
    assert changed(result) == [
        ("megatron_te_native", "diffusers[megatron_te_native]", "batch_invariant", None, Verdict.BETTER)]
    assert exit_code(result) == EXIT_OK
    assert exit_code(result, FailOn.any_change) == EXIT_REGRESSION


def test_counts_moving_while_still_not_invariant_are_shown_not_failed():
    def edit(data):
        data["results"]["plain"]["diffusers[plain]"]["batch_invariance"]["all_rows"]["257"]["rowgrad_differ"] = 700

    result = diff(edited(edit))
    assert changed(result) == [(*PLAIN, "batch_invariant", None, Verdict.AMBIGUOUS)]
    assert result.changes[0].probes == (ProbeCount("all_rows", "n=257 rowgrad_differ", 771, 700, 771),)
    assert exit_code(result) == EXIT_OK
    assert exit_code(result, FailOn.any_change) == EXIT_REGRESSION


# --- latency ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "factor, new_spread, verdict",
    [
        (1.20, 0.01, Verdict.WORSE),  # 20 % slower, quartiles apart
        (1.20, 0.20, Verdict.AMBIGUOUS),  # 20 % slower, but the new run is noisy: quartiles overlap
        (1.03, 0.01, Verdict.SAME),  # within 5 %
        (0.80, 0.01, Verdict.BETTER),  # 20 % faster, quartiles apart
        (0.80, 0.30, Verdict.AMBIGUOUS),
    ],
)
def test_latency_with_distributions_needs_threshold_and_separated_quartiles(factor, new_spread, verdict):
    old = edited(lambda d: set_dist(d, *PLAIN, "1", "fwd_us", FWD_T1, 0.01))
    new = edited(lambda d: set_dist(d, *PLAIN, "1", "fwd_us", FWD_T1 * factor, new_spread))
    result = diff(new, old)
    expected = [] if verdict is Verdict.SAME else [(*PLAIN, "fwd_us", 1, verdict)]
    assert changed(result) == expected
    row = next(r for r in result.rows if r.metric == "fwd_us" and r.t == 1 and r.mode == "plain"
               and r.candidate == PLAIN[1])
    assert row.change == pytest.approx(factor - 1)
    assert exit_code(result) == (EXIT_REGRESSION if verdict is Verdict.WORSE else EXIT_OK)


def test_latency_without_distributions_compares_medians_alone():
    def slower(data):
        data["results"]["plain"]["diffusers[plain]"]["accuracy_latency"]["2048"]["fwd_bwd_us"] *= 1.10

    result = diff(edited(slower))
    assert changed(result) == [(*PLAIN, "fwd_bwd_us", 2048, Verdict.WORSE)]
    assert "medians only" in result.changes[0].note
    relaxed = diff(edited(slower), thresholds=Thresholds(latency=0.2))
    assert relaxed.changes == []


def test_compare_latency_edge_cases():
    d = Distribution(min=90, q1=95, median=100, q3=105, max=110, count=100)
    assert compare_latency(100.0, 100.0, d, d, Thresholds())[0] is Verdict.SAME
    # exactly at the threshold is not beyond it
    assert compare_latency(100.0, 105.0, None, None, Thresholds(latency=0.05))[0] is Verdict.SAME
    apart = Distribution(min=120, q1=125, median=130, q3=135, max=140, count=100)
    assert compare_latency(100.0, 130.0, d, apart, Thresholds())[0] is Verdict.WORSE
    touching = Distribution(min=100, q1=105, median=130, q3=135, max=140, count=100)
    assert compare_latency(100.0, 130.0, d, touching, Thresholds())[0] is Verdict.AMBIGUOUS


# --- accuracy ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "factor, verdict", [(1.5, Verdict.WORSE), (1.05, Verdict.SAME), (0.5, Verdict.BETTER), (1.0, Verdict.SAME)])
def test_forward_error_relative_threshold(factor, verdict):
    def edit(data):
        data["results"]["sglang"]["diffusers[sglang]"]["accuracy_latency"]["64"]["fwd_rel_err"] *= factor

    result = diff(edited(edit))
    expected = [] if verdict is Verdict.SAME else [("sglang", "diffusers[sglang]", "fwd_rel_err", 64, verdict)]
    assert changed(result) == expected


def test_gradient_error_worse_is_a_regression():
    def edit(data):
        data["results"]["plain"]["rl_kernel"]["accuracy_latency"]["256"]["grad_rel_err"]["temb"] = 2.2e-3

    result = diff(edited(edit))
    assert changed(result) == [("plain", "rl_kernel", "grad_rel_err.temb", 256, Verdict.WORSE)]
    assert exit_code(result) == EXIT_REGRESSION


@pytest.mark.parametrize("new_value, verdict", [(5e-6, Verdict.SAME), (1e-3, Verdict.WORSE)])
def test_error_near_zero_uses_the_absolute_floor(new_value, verdict):
    # The bias gradient at T = 1 is exactly 0.0 in the reference: a ratio would be infinite.
    def edit(data):
        data["results"]["plain"]["diffusers[plain]"]["accuracy_latency"]["1"]["grad_rel_err"]["b"] = new_value

    result = diff(edited(edit))
    row = next(r for r in result.rows if r.metric == "grad_rel_err.b" and r.t == 1 and r.candidate == PLAIN[1])
    assert (row.old, row.new, row.verdict, row.change) == (0.0, new_value, verdict, None)


def test_compare_error_floor_and_threshold_together():
    t = Thresholds(accuracy=0.10, accuracy_floor=1e-5)
    assert compare_error(1.2e-6, 9e-6, t)[0] is Verdict.SAME  # 7× but 8e-6 absolute: under the floor
    assert compare_error(1.2e-6, 2e-5, t)[0] is Verdict.WORSE
    assert compare_error(3e-3, 3.2e-3, t)[0] is Verdict.SAME  # 6.7 %
    assert compare_error(3e-3, 3.4e-3, t)[0] is Verdict.WORSE  # 13 %


# --- availability -----------------------------------------------------------------------------------


def test_a_mode_on_one_side_only_is_listed_not_compared():
    result = diff(edited(lambda d: d["results"].pop("sglang_ieee")))
    assert changed(result) == []
    assert not any(r.mode == "sglang_ieee" for r in result.rows)
    assert any("only in OLD: sglang_ieee" in note for note in result.notes)
    assert exit_code(result) == EXIT_OK


def test_candidate_now_unavailable_is_missing_with_its_reason():
    def edit(data):
        data["results"]["vllm"]["diffusers[vllm]"] = {
            "unavailable": "ImportError: cannot import name 'enable_batch_invariant_mode'", "status": "unavailable"}

    result = diff(edited(edit))
    assert changed(result) == [("vllm", "diffusers[vllm]", "availability", None, Verdict.MISSING)]
    assert result.changes[0].note == "ImportError: cannot import name 'enable_batch_invariant_mode'"
    assert exit_code(result) == EXIT_REGRESSION


def test_unavailable_on_both_sides_is_same():
    def edit(data):
        data["results"]["vllm"]["diffusers[vllm]"] = {"unavailable": "ImportError: no vllm"}

    result = diff(edited(edit), edited(edit))
    assert result.changes == []
    assert [r.verdict for r in result.rows if r.mode == "vllm"] == [Verdict.SAME]


def test_new_candidate_and_new_mode_are_shown_not_failed():
    def edit(data):
        data["results"]["plain"]["bundled"] = copy.deepcopy(data["results"]["plain"]["rl_kernel"])
        data["results"]["plain"]["bundled"]["source"] = "adaln-bench bundled CUDA kernel"
        data["results"]["liger"] = {"diffusers[liger]": {"unavailable": "ImportError: no liger_kernel"}}

    result = diff(edited(edit))
    assert changed(result) == [("plain", "bundled", "availability", None, Verdict.NEW)]
    assert not any(r.mode == "liger" for r in result.rows)  # a new mode: listed, not compared
    assert any("only in NEW: liger" in note for note in result.notes)
    assert exit_code(result) == EXIT_OK


def test_a_T_no_longer_measured_is_missing():
    result = diff(edited(lambda d: d["results"]["plain"]["rl_kernel"]["accuracy_latency"].pop("2048")))
    assert changed(result) == [("plain", "rl_kernel", "accuracy_latency", 2048, Verdict.MISSING)]


def test_a_metric_that_lost_its_value_is_missing():
    def edit(data):
        data["results"]["plain"]["rl_kernel"]["accuracy_latency"]["4"]["fwd_bwd_us"] = None

    assert changed(diff(edited(edit))) == [("plain", "rl_kernel", "fwd_bwd_us", 4, Verdict.MISSING)]


def test_a_cold_start_check_that_did_not_run_is_missing_against_one_that_passed():
    """`run --no-cold-start` leaves cold_start out: against a report where it passed, that is no pass."""
    def with_cold_start(data):
        data["results"]["plain"]["rl_kernel"]["cold_start"] = {"status": "ok",
                                                              "steps_passed": ["first_step", "foreign_thread"]}

    result = diff(edited(), old=edited(with_cold_start))
    assert changed(result) == [("plain", "rl_kernel", "cold_start", None, Verdict.MISSING)]
    assert exit_code(result) == EXIT_REGRESSION
    assert changed(diff(edited(with_cold_start), old=edited())) == [("plain", "rl_kernel", "cold_start", None,
                                                                     Verdict.NEW)]


# --- configuration ----------------------------------------------------------------------------------


def test_different_gpus_are_not_comparable_unless_allowed():
    def h200(data):
        data["environment"]["gpu"] = "NVIDIA H200"
        data["environment"]["capability"] = [9, 0]

    result = diff(edited(h200))
    assert not result.comparable and result.rows == ()
    assert "different devices" in result.not_comparable[0]
    assert exit_code(result) == EXIT_NOT_COMPARABLE
    assert exit_code(result, FailOn.never) == EXIT_NOT_COMPARABLE

    allowed = diff(edited(h200), allow_different_device=True)
    assert allowed.comparable and exit_code(allowed) == EXIT_OK
    assert [(c.field, c.old, c.new, c.blocks) for c in allowed.config] == [
        ("gpu", "NVIDIA B200", "NVIDIA H200", False), ("capability", "10.0", "9.0", False)]


def test_cpu_report_is_not_comparable_with_a_gpu_report():
    def cpu(data):
        data["environment"]["gpu"] = None
        data["device"] = "cpu"

    result = diff(edited(cpu))
    assert exit_code(result) == EXIT_NOT_COMPARABLE
    assert ("device", "cuda", "cpu", True) in [(c.field, c.old, c.new, c.blocks) for c in result.config]
    # Allowed, invariance and accuracy are compared, but CPU and GPU timings never are (docs/spec.md#6-latency).
    allowed = diff(edited(cpu), allow_different_device=True)
    assert exit_code(allowed) == EXIT_OK
    assert {r.metric for r in allowed.rows} == {"batch_invariant", "fwd_rel_err", "grad_rel_err.temb",
                                                "grad_rel_err.w", "grad_rel_err.b"}
    assert allowed.notes == ("latency not compared: cuda and cpu timings come from different clocks and are "
                             "never compared",)


def test_quick_against_full_is_not_comparable_unless_allowed():
    def quick(data):
        data["quick"] = True
        for candidates in data["results"].values():
            for entry in candidates.values():
                entry["accuracy_latency"] = {t: p for t, p in entry["accuracy_latency"].items() if t in ("1", "3")}
                inv = entry["batch_invariance"]
                inv["all_rows"] = {"17": {"rows": 51, "fwd_differ": 0, "rowgrad_differ": 0},
                                   "64": {"rows": 192, "fwd_differ": 0, "rowgrad_differ": 0}}
                inv["full_vs_sub_batches"].update(fwd_differ=0, rowgrad_differ=0)
                inv["batch_size_sweep"]["differ"] = 0
                inv["batch_invariant"] = True

    result = diff(edited(quick))
    assert exit_code(result) == EXIT_NOT_COMPARABLE
    assert "quick" in result.not_comparable[0]

    allowed = diff(edited(quick), allow_quick_mismatch=True)
    assert allowed.comparable and not allowed.invariance_counts_compared
    # The two not-invariant candidates look invariant under the quick probes: shown, not called better.
    assert changed(allowed) == [
        (*PLAIN, "batch_invariant", None, Verdict.AMBIGUOUS),
        ("megatron_te_native", "diffusers[megatron_te_native]", "batch_invariant", None, Verdict.AMBIGUOUS)]
    # Only T = 1 and 3 are compared; the T the quick run skips are not MISSING.
    assert {r.t for r in allowed.rows if r.t is not None} == {1, 3}
    assert exit_code(allowed) == EXIT_OK


def test_different_shapes_are_not_comparable():
    old = edited(lambda d: d.update(shape={"dim": 2688, "hidden": 5376, "modalities": 3, "out_features": 96768}))
    new = edited(lambda d: d.update(shape={"dim": 3072, "hidden": 3072, "modalities": 1, "out_features": 18432}))
    result = diff(new, old)
    assert exit_code(result) == EXIT_NOT_COMPARABLE
    assert result.not_comparable[0].startswith("different shapes")


def test_the_reference_is_taken_as_the_h3_shape():
    h3 = edited(lambda d: d.update(shape={"dim": 2688, "hidden": 5376, "modalities": 3, "out_features": 96768,
                                          "preset": "h3"}))
    flux = edited(lambda d: d.update(shape={"dim": 3072, "hidden": 3072, "modalities": 1, "out_features": 18432,
                                            "preset": "flux"}))
    assert diff(h3).config == ()  # same dimensions: nothing to say
    result = diff(flux)
    assert exit_code(result) == EXIT_NOT_COMPARABLE
    assert result.not_comparable == (
        "different shapes: OLD D=2688 H=5376 M=3 N=96768 (H3, implied by kind h3_prior_art), "
        "NEW D=3072 H=3072 M=1 N=18432 (flux)",)


def test_software_differences_are_listed_but_do_not_block():
    def upgrade(data):
        data["environment"]["torch"] = "2.14.0+cu130"
        data["environment"]["libraries"]["vllm"] = "0.33.0"
        data["environment"]["mode_environment"]["vllm"]["CUBLASLT_WORKSPACE_SIZE"] = "0"

    result = diff(edited(upgrade))
    assert [(c.field, c.old, c.new, c.blocks) for c in result.config] == [
        ("torch", "2.13.0+cu130", "2.14.0+cu130", False),
        ("libraries.vllm", "0.30.0", "0.33.0", False),
        ("mode_environment.vllm", "CUBLASLT_WORKSPACE_SIZE=1 CUBLAS_WORKSPACE_CONFIG=:16:8",
         "CUBLASLT_WORKSPACE_SIZE=0 CUBLAS_WORKSPACE_CONFIG=:16:8", False),
    ]
    assert exit_code(result) == EXIT_OK


# --- thresholds -------------------------------------------------------------------------------------


def test_thresholds_precedence_defaults_file_options(tmp_path):
    path = write(tmp_path, "t.toml", "latency_threshold = 0.2\naccuracy_floor = 0.0\n")
    assert resolve_thresholds() == Thresholds(0.05, 0.10, 1e-5)
    assert resolve_thresholds(path) == Thresholds(0.2, 0.10, 0.0)
    assert resolve_thresholds(path, latency=0.01) == Thresholds(0.01, 0.10, 0.0)


# --- the command line, in process -------------------------------------------------------------------


def test_cli_self_diff_exit_0(capsys):
    code, out, err = run_main(["diff", str(REFERENCE), str(REFERENCE)], capsys)
    assert (code, err) == (0, "")
    assert "configuration: identical" in out
    assert f"no change; {REFERENCE_ROWS} compared: {REFERENCE_ROWS} SAME → exit 0" in out


def test_cli_lost_invariance_exit_1_names_mode_and_probe(tmp_path, capsys):
    new = write(tmp_path, "new.json", edited(lose_invariance_vllm))
    code, out, _ = run_main(["diff", str(REFERENCE), new], capsys)
    assert code == EXIT_REGRESSION
    assert "diffusers[vllm]" in out and "all_rows n=257 rowgrad_differ 0 → 771" in " ".join(out.split())
    assert "1 regression;" in out


def test_cli_configuration_is_printed_before_metrics(tmp_path, capsys):
    def edit(data):
        data["environment"]["torch"] = "2.14.0"
        lose_invariance_vllm(data)

    code, out, _ = run_main(["diff", str(REFERENCE), write(tmp_path, "n.json", edited(edit))], capsys)
    assert code == EXIT_REGRESSION
    assert out.index("Configuration differences") < out.index("2.14.0") < out.index("Per candidate") \
        < out.index("Changes")


def test_cli_json_is_one_document_with_every_row(tmp_path, capsys):
    new = write(tmp_path, "new.json", edited(lose_invariance_vllm))
    code, out, err = run_main(["diff", str(REFERENCE), new, "--json"], capsys)
    assert (code, err) == (EXIT_REGRESSION, "")
    doc = json.loads(out)
    assert doc["exit_code"] == 1 and doc["regressions"] == 1 and doc["comparable"] is True
    assert len(doc["rows"]) == REFERENCE_ROWS
    worse = [r for r in doc["rows"] if r["verdict"] != "SAME"]
    assert len(worse) == 1 and worse[0]["regression"] is True
    assert worse[0]["probes"] == [
        {"probe": "all_rows", "what": "n=257 rowgrad_differ", "old": 0, "new": 771, "total": 771}]
    assert doc["thresholds"] == {"latency": 0.05, "accuracy": 0.1, "accuracy_floor": 1e-5, "latency_alpha": 0.002}


def test_cli_json_when_not_comparable(tmp_path, capsys):
    new = write(tmp_path, "h200.json", edited(lambda d: d["environment"].update(gpu="NVIDIA H200")))
    code, out, _ = run_main(["diff", str(REFERENCE), new, "--json"], capsys)
    doc = json.loads(out)
    assert code == doc["exit_code"] == EXIT_NOT_COMPARABLE
    assert doc["comparable"] is False and doc["rows"] == []


def test_cli_markdown(tmp_path, capsys):
    new = write(tmp_path, "new.json", edited(lose_invariance_vllm))
    code, out, _ = run_main(["diff", str(REFERENCE), new, "--markdown"], capsys)
    assert code == EXIT_REGRESSION
    assert out.startswith("## adaln-bench diff ❌ 1 regression;")
    assert "| vllm | diffusers[vllm] | batch_invariant |  | invariant | NOT invariant |  | **WORSE** |" in out
    assert "### Configuration differences" in out


def test_cli_thresholds_file_and_option(tmp_path, capsys):
    def slower(data):
        data["results"]["plain"]["diffusers[plain]"]["accuracy_latency"]["2048"]["fwd_us"] *= 1.10

    new = write(tmp_path, "slow.json", edited(slower))
    assert run_main(["diff", str(REFERENCE), new], capsys)[0] == EXIT_REGRESSION
    toml = write(tmp_path, "t.toml", "latency_threshold = 0.15\n")
    assert run_main(["diff", str(REFERENCE), new, "--thresholds", toml], capsys)[0] == EXIT_OK
    assert run_main(["diff", str(REFERENCE), new, "--thresholds", toml, "--latency-threshold", "0.05"],
                   capsys)[0] == EXIT_REGRESSION


@pytest.mark.parametrize(
    "content, message",
    [
        ("speed = 0.1\n", "unknown key 'speed'"),
        ("latency_threshold = -1\n", "must be a finite number ≥ 0"),
        ("latency_threshold = 'fast'\n", "must be a number"),
        ("latency_threshold = \n", "not valid TOML"),
    ],
)
def test_cli_bad_thresholds_file_exit_2(tmp_path, capsys, content, message):
    toml = write(tmp_path, "t.toml", content)
    code, out, err = run_main(["diff", str(REFERENCE), str(REFERENCE), "--thresholds", toml], capsys)
    assert (code, out) == (EXIT_BAD_INPUT, "")
    assert message in err and err.count("\n") == 1


def test_cli_fail_on(tmp_path, capsys):
    new = write(tmp_path, "new.json", edited(lose_invariance_vllm))
    assert run_main(["diff", str(REFERENCE), new, "--fail-on", "never"], capsys)[0] == EXIT_OK
    better = write(tmp_path, "better.json", edited(
        lambda d: d["results"]["sglang"]["diffusers[sglang]"]["accuracy_latency"]["1"].update(fwd_us=FWD_T1)))
    assert run_main(["diff", str(REFERENCE), better], capsys)[0] == EXIT_OK
    assert run_main(["diff", str(REFERENCE), better, "--fail-on", "any-change"], capsys)[0] == EXIT_REGRESSION


def test_cli_not_comparable_exit_3_and_allowed(tmp_path, capsys):
    new = write(tmp_path, "h200.json", edited(lambda d: d["environment"].update(gpu="NVIDIA H200")))
    code, out, _ = run_main(["diff", str(REFERENCE), new], capsys)
    assert code == EXIT_NOT_COMPARABLE and "not comparable: different devices" in out
    assert run_main(["diff", str(REFERENCE), new, "--allow-different-device"], capsys)[0] == EXIT_OK


@pytest.mark.parametrize(
    "content, message",
    [
        ("this is not json", "not JSON"),
        ('{"hello": 1}', "not an adaln-bench report"),
        ('{"results": {}, "environment": {}}', "not a valid report"),
        (None, "no such file"),
    ],
)
def test_cli_garbage_input_exit_2_one_line(tmp_path, capsys, content, message):
    path = write(tmp_path, "bad.json", content) if content is not None else str(tmp_path / "absent.json")
    code, out, err = run_main(["diff", str(REFERENCE), path], capsys)
    assert (code, out) == (EXIT_BAD_INPUT, "")
    assert err.startswith("adaln-bench: ") and message in err and err.count("\n") == 1


def test_cli_markdown_and_json_together_is_a_usage_error(capsys):
    code, _, err = run_main(["diff", str(REFERENCE), str(REFERENCE), "--json", "--markdown"], capsys)
    assert code == EXIT_BAD_INPUT and "exclusive" in err


def test_cli_help_names_the_exit_codes(capsys):
    code, out, _ = run_main(["diff", "--help"], capsys)
    text = " ".join(out.replace("│", " ").split())
    assert code == 0
    for phrase in ("0 no regression", "1 regression", "2 bad input", "3 not comparable", "REV:path"):
        assert phrase in text


# --- REV:path from git ------------------------------------------------------------------------------


@pytest.fixture
def git_repo(tmp_path, monkeypatch):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "test@example.com")
    git("config", "user.name", "test")
    git("config", "commit.gpgsign", "false")
    (tmp_path / "results").mkdir()
    write(tmp_path / "results", "r.json", REFERENCE_DATA)
    git("add", "results/r.json")
    git("commit", "-q", "-m", "baseline")
    write(tmp_path / "results", "r.json", edited(lose_invariance_vllm))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_rev_path_against_the_working_file(git_repo, capsys):
    code, out, _ = run_main(["diff", "HEAD:results/r.json", "results/r.json", "--json"], capsys)
    doc = json.loads(out)
    assert code == EXIT_REGRESSION and doc["old"]["source"] == "HEAD:results/r.json"
    assert [(r["mode"], r["verdict"]) for r in doc["rows"] if r["verdict"] != "SAME"] == [("vllm", "WORSE")]
    assert run_main(["diff", "main:results/r.json", "HEAD:./results/r.json"], capsys)[0] == EXIT_OK


@pytest.mark.parametrize("arg", ["nosuchrev:results/r.json", "HEAD:results/absent.json", "HEAD~5:results/r.json"])
def test_bad_rev_or_path_exit_2_one_line(git_repo, capsys, arg):
    code, out, err = run_main(["diff", arg, "results/r.json"], capsys)
    assert (code, out) == (EXIT_BAD_INPUT, "")
    assert err.startswith(f"adaln-bench: {arg}: ") and err.count("\n") == 1


def test_rev_path_to_a_folder_or_a_huge_blob_exit_2_before_reading(git_repo, capsys, monkeypatch):
    from adaln_bench.reports import git_source

    code, out, err = run_main(["diff", "HEAD:results", "results/r.json"], capsys)
    assert (code, out) == (EXIT_BAD_INPUT, "") and "a tree in git, not a report file" in err
    monkeypatch.setattr(git_source, "MAX_REPORT_BYTES", 1000)  # the committed report is larger than this
    code, out, err = run_main(["diff", "HEAD:results/r.json", "results/r.json"], capsys)
    assert (code, out) == (EXIT_BAD_INPUT, "") and "more than a report may be" in err and err.count("\n") == 1


def test_rev_path_outside_a_repository_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    code, _, err = run_main(["diff", "HEAD:r.json", str(REFERENCE)], capsys)
    assert code == EXIT_BAD_INPUT and "not a git repository" in err


# --- end to end, in a fresh process -----------------------------------------------------------------


def _subprocess(args: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "adaln_bench", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_end_to_end_exit_codes(tmp_path):
    lost = write(tmp_path, "lost.json", edited(lose_invariance_vllm))
    h200 = write(tmp_path, "h200.json", edited(lambda d: d["environment"].update(gpu="NVIDIA H200")))
    garbage = write(tmp_path, "garbage.json", "\x00\x01 not a report")
    same = _subprocess(["diff", str(REFERENCE), str(REFERENCE)])
    assert same.returncode == 0, same.stderr
    regression = _subprocess(["diff", str(REFERENCE), lost])
    assert regression.returncode == 1 and "vllm" in regression.stdout and "all_rows" in regression.stdout
    assert _subprocess(["diff", str(REFERENCE), h200]).returncode == 3
    bad = _subprocess(["diff", str(REFERENCE), garbage])
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1


def test_candidate_gone_from_a_mode_and_a_crash_are_missing_with_their_status():
    def edit(data):
        del data["results"]["plain"]["rl_kernel"]
        data["results"]["vllm"]["diffusers[vllm]"] = {"unavailable": "child exited with signal 11", "status": "crashed"}
        data["incomplete"] = True

    result = diff(edited(edit))
    assert [(r.mode, r.candidate, r.verdict, r.new, r.note) for r in result.changes] == [
        ("plain", "rl_kernel", Verdict.MISSING, "absent", "no longer in the report"),
        ("vllm", "diffusers[vllm]", Verdict.MISSING, "unavailable", "crashed: child exited with signal 11"),
    ]
    assert [(c.field, c.old, c.new) for c in result.config] == [("incomplete", False, True)]


def test_cli_all_lists_same_rows_too(tmp_path, capsys):
    code, out, _ = run_main(["diff", str(REFERENCE), str(REFERENCE), "--all", "--markdown"], capsys)
    assert code == EXIT_OK
    rows_section = out.split("### All rows")[1].split("<details>")[0]
    assert rows_section.count("| SAME |") == REFERENCE_ROWS
    code, out, _ = run_main(["diff", str(REFERENCE), str(REFERENCE), "--markdown"], capsys)
    changes_section = out.split("### Changes")[1].split("<details>")[0]
    assert changes_section.strip() == "Every row is SAME."


# --- latency on device time (docs/diff.md#latency-on-device-time-the-statistics-and-their-defaults) -------


def _with_device_time(data: dict, scale: float = 1.0, event_scale: float = 1.0) -> Report:
    """The reference report with device time added to every measured point (tight samples around the
    point's event medians times `scale`), and its event medians times `event_scale`."""
    data = copy.deepcopy(data)
    for results in data["results"].values():
        for entry in results.values():
            for point in entry.get("accuracy_latency", {}).values():
                fwd, step = point["fwd_us"] * scale, point["fwd_bwd_us"] * scale
                point["device_time"] = {
                    "method": "cuda_graph", "processes": 3,
                    "fwd_us": fwd, "fwd_samples": [fwd * (1 + 0.001 * (i % 7 - 3)) for i in range(60)],
                    "fwd_bwd_us": step, "fwd_bwd_samples": [step * (1 + 0.001 * (i % 5 - 2)) for i in range(60)]}
                for key in ("fwd_us", "fwd_bwd_us"):
                    point[key] *= event_scale
                    dist = point.get(f"{key}_dist")
                    if dist:
                        for q in ("min", "q1", "median", "q3", "max"):
                            dist[q] *= event_scale
    return Report.model_validate(data)


def test_a_report_without_device_time_diffs_on_the_event_medians_and_says_so():
    result = diff_reports(Report.model_validate(REFERENCE_DATA), _with_device_time(REFERENCE_DATA))
    assert exit_code(result) == EXIT_OK
    assert not [r for r in result.rows if r.metric.startswith("device_time")]
    assert not any(r.informational for r in result.rows)
    assert any("no device time in OLD" in note for note in result.notes)


def test_device_time_decides_and_the_event_medians_are_only_shown():
    base = _with_device_time(REFERENCE_DATA)
    noisy_host = _with_device_time(REFERENCE_DATA, event_scale=1.5)  # host time moved, the GPU did not
    result = diff_reports(base, noisy_host)
    assert exit_code(result) == EXIT_OK
    events = [r for r in result.rows if r.metric in ("fwd_us", "fwd_bwd_us")]
    assert events and all(r.informational and r.verdict is Verdict.WORSE for r in events)
    assert {r.verdict for r in result.rows if r.metric.startswith("device_time")} == {Verdict.SAME}

    slower = _with_device_time(REFERENCE_DATA, scale=1.15)  # the GPU 15 % slower, host time the same
    result = diff_reports(base, slower)
    assert exit_code(result) == EXIT_REGRESSION
    device = [r for r in result.rows if r.metric.startswith("device_time")]
    assert device and all(r.verdict is Verdict.WORSE and "U test" in r.note for r in device)
    # --latency-basis events: the event medians gate again, and device time is only shown.
    result = diff_reports(base, slower, latency_basis="events")
    device = [r for r in result.rows if r.metric.startswith("device_time")]
    assert exit_code(result) == EXIT_OK
    assert device and all(r.informational and r.verdict is Verdict.WORSE for r in device)
