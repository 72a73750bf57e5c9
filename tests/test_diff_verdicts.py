"""`diff` fails only on a real change: committed pairs of real reports, and mutated copies of them.

The committed reports are found by file name anywhere under results/, so that moving them between folders
(current and history) leaves these tests alone.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from conftest import run_main

from adaln_bench.reports.diff import EXIT_NOT_COMPARABLE, EXIT_OK, EXIT_REGRESSION, diff_reports, exit_code
from adaln_bench.datamodel.schema import Report

ROOT = Path(__file__).resolve().parents[1]


def committed(name: str) -> Path:
    found = sorted((ROOT / "results").rglob(name))
    assert found, f"no committed report named {name} under results/"
    return found[0]


def load(name: str) -> dict:
    return json.loads(committed(name).read_text(encoding="utf-8"))


def verdict(old: dict, new: dict):
    result = diff_reports(Report.model_validate(old), Report.model_validate(new))
    return result, exit_code(result)


@pytest.fixture(autouse=True)
def _table_width(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)


NORM_OLD = "norm_modulate.h200.fd00ad3.h3.plain.json"
NORM_NEW = "norm_modulate.h200.7a100a7.h3.plain.json"


@pytest.mark.parametrize("old, new, code", [
    # Atomics-added parameter gradients move 10-36 % from run to run: not a regression.
    (NORM_OLD, NORM_NEW, EXIT_OK),
    ("final_adaln_out.h200.fd00ad3.h3.plain.json", "final_adaln_out.h200.f6229f3.h3.plain.json", EXIT_OK),
    # A full report against an accuracy-only one with other draws: nothing to compare bit for bit.
    (NORM_NEW, "norm_modulate.h200.fd00ad3.h3.accuracy.draws-b200.plain.json", EXIT_NOT_COMPARABLE),
    # No mode in common.
    ("adaln_projection.h200.fd00ad3.h3.plain.json", "adaln_projection.h200.fd00ad3.h3.vllm+sglang.json",
     EXIT_NOT_COMPARABLE),
])
def test_committed_pairs_give_the_exit_code_of_what_really_changed(old, new, code, capsys):
    got, out, err = run_main(["diff", str(committed(old)), str(committed(new))], capsys)
    assert got == code, out + err
    assert "Traceback" not in err


def test_unrepeatable_parameter_gradients_are_shown_not_counted():
    result, code = verdict(load(NORM_OLD), load(NORM_NEW))
    rows = [r for r in result.rows if r.candidate in ("diffusers", "liger") and r.metric == "grad_rel_err.sc"
            and r.change is not None and abs(r.change) > 0.10]
    assert rows and all(r.informational and not r.regression for r in rows)
    assert all("params_repeatable" in r.note for r in rows)
    # The row-gradient and forward rows of the same candidates keep their verdicts.
    assert any(r.candidate == "liger" and r.metric == "grad_rel_err.x" and not r.informational
               for r in result.rows)


def _candidate_with(data: dict, repeatable: bool, grad: str = "sc") -> tuple[str, str]:
    """A measured candidate whose params_repeatable is `repeatable` and that has a `grad` error."""
    for mode, cands in data["results"].items():
        for name, entry in cands.items():
            inv = entry.get("batch_invariance") if isinstance(entry, dict) else None
            points = (entry.get("accuracy_latency") or {}).values() if isinstance(entry, dict) else ()
            if inv and inv.get("params_repeatable") is repeatable and \
                    any(grad in (p.get("grad_rel_err") or {}) for p in points):
                return mode, name
    raise AssertionError(f"no candidate with params_repeatable {repeatable}")


def _scale_grad(data: dict, mode: str, name: str, key: str, factor: float) -> None:
    for point in data["results"][mode][name]["accuracy_latency"].values():
        errs = point.get("grad_rel_err") or {}
        if errs.get(key):
            errs[key] *= factor


def test_a_repeatable_candidates_parameter_gradient_error_moved_by_30_percent_is_a_regression(tmp_path, capsys):
    old = load(NORM_NEW)
    new = copy.deepcopy(old)
    mode, name = _candidate_with(old, repeatable=True)
    _scale_grad(new, mode, name, "sc", 1.3)
    path = tmp_path / "mutated.json"
    path.write_text(json.dumps(new))
    code, out, err = run_main(["diff", str(committed(NORM_NEW)), str(path)], capsys)
    assert code == EXIT_REGRESSION, out + err
    assert f"{mode} / {name}" in out and "grad_rel_err.sc" in out


@pytest.mark.parametrize("factor, counted", [(1.9, False), (2.5, True), (0.3, True)])
def test_an_unrepeatable_parameter_gradient_counts_once_it_doubles_or_halves(factor, counted):
    old = load(NORM_NEW)
    new = copy.deepcopy(old)
    mode, name = _candidate_with(old, repeatable=False)
    _scale_grad(new, mode, name, "sc", factor)
    result, code = verdict(old, new)
    rows = [r for r in result.rows if (r.mode, r.candidate, r.metric) == (mode, name, "grad_rel_err.sc")
            and r.old != r.new]
    assert rows
    assert all(r.informational is not counted for r in rows)
    assert code == (EXIT_REGRESSION if counted and factor > 1 else EXIT_OK)


def test_different_mode_sets_compare_on_the_common_modes_and_list_the_others():
    plain = load("adaln_projection.h200.fd00ad3.h3.plain.json")
    both = load("adaln_projection.h200.fd00ad3.h3.vllm+sglang.json")
    merged = copy.deepcopy(plain)
    for key in ("results", "modes"):
        merged[key].update(copy.deepcopy(both[key]))
    merged["inputs_differ"] = None
    result, code = verdict(plain, merged)
    assert code == EXIT_OK, [r for r in result.regressions]
    assert {r.mode for r in result.rows} == {"plain"}
    assert any("only in NEW" in n and "vllm" in n and "sglang" in n for n in result.notes)
    result, code = verdict(merged, plain)
    assert code == EXIT_OK and any("only in OLD" in n for n in result.notes)


def test_a_shared_mode_that_stops_measuring_is_a_regression():
    old = load(NORM_NEW)
    new = copy.deepcopy(old)
    new["modes"]["plain"] = {"status": "crashed", "reason": "killed by SIGKILL"}
    new["results"]["plain"] = {name: {"unavailable": "mode plain crashed: killed by SIGKILL", "status": "crashed"}
                               for name in old["results"]["plain"]}
    result, code = verdict(old, new)
    assert code == EXIT_REGRESSION
    assert any(r.metric == "availability" and r.regression for r in result.rows)


def test_an_incomplete_report_is_said_at_the_top_and_what_it_lacks_is_not_a_regression(capsys, tmp_path):
    old = load(NORM_NEW)
    new = copy.deepcopy(old)
    new["incomplete"] = True
    lost = list(old["results"]["plain"])[-3:]
    for name in lost:
        new["results"]["plain"][name] = {"unavailable": "mode plain interrupted: interrupted by SIGTERM",
                                         "status": "interrupted"}
    result, code = verdict(old, new)
    assert code == EXIT_OK, result.regressions
    assert result.notes and "NEW is incomplete" in result.notes[0]
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(new))
    code, out, _ = run_main(["diff", str(committed(NORM_NEW)), str(path)], capsys)
    assert code == EXIT_OK and "NEW is incomplete" in out
    assert out.index("NEW is incomplete") < out.index("Configuration differences")  # said at the top


def test_inputs_with_other_fingerprints_are_not_comparable():
    old = load(NORM_NEW)
    new = copy.deepcopy(old)
    inputs = new["modes"]["plain"]["inputs"]
    key = next(k for k in inputs if k.endswith("_sha256") and k not in ("upstream_sha256", "permutation_sha256"))
    inputs[key] = "0" * 64
    result, code = verdict(old, new)
    assert code == EXIT_NOT_COMPARABLE
    assert any("modes.plain.inputs" in reason or "inputs" in reason for reason in result.not_comparable)


def test_s_sized_operators_rows_say_s(capsys, tmp_path):
    old = load(NORM_NEW)
    new = copy.deepcopy(old)
    mode, name = _candidate_with(old, repeatable=True)
    _scale_grad(new, mode, name, "x", 3.0)
    path = tmp_path / "mutated.json"
    path.write_text(json.dumps(new))
    code, out, _ = run_main(["diff", str(committed(NORM_NEW)), str(path)], capsys)
    assert code == EXIT_REGRESSION
    assert "S=32768" in out and "T=32768" not in out
    code, md, _ = run_main(["diff", "--markdown", str(committed(NORM_NEW)), str(path)], capsys)
    assert "| S |" in md and "| T |" not in md


def test_the_summary_table_keeps_its_headers_at_80_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_main(["diff", str(committed(NORM_OLD)), str(committed(NORM_NEW))], capsys)
    summary = out[out.index("Per candidate"):]
    header = next(line for line in summary.splitlines() if "mode" in line)
    assert "candidate" in header and "…" not in header, header


DRAWS_OLD = "norm_modulate.h200.fd00ad3.h3.accuracy.draws-b200.plain.json"
DRAWS_NEW = "norm_modulate.h200.ca37819.h3.accuracy.draws-b200.plain.json"


def test_an_accuracy_only_runs_own_repeat_lets_atomics_noise_pass():
    """Accuracy-only reports have no probes: their per-size `params_repeatable` (the accuracy's second pass) is
    what tells the stock path's atomics-summed `sh` gradient (4.2e-2 then 5.0e-2 in these two runs) from a change."""
    old, new = load(DRAWS_OLD), load(DRAWS_NEW)
    result, code = verdict(old, new)
    noisy = [r for r in result.regressions if r.metric.startswith("grad_rel_err.")]
    assert code == EXIT_REGRESSION and {(r.candidate, r.metric) for r in noisy} == {("diffusers", "grad_rel_err.sh")}
    for point in new["results"]["plain"]["diffusers"]["accuracy_latency"].values():
        point["params_repeatable"] = False
    result, code = verdict(old, new)
    assert code == EXIT_OK, [r for r in result.regressions]
    row = next(r for r in result.rows if (r.candidate, r.metric) == ("diffusers", "grad_rel_err.sh"))
    assert row.informational and "params_repeatable" in row.note
    # The same gradient moved past twofold still counts.
    _scale_grad(new, "plain", "diffusers", "sh", 3.0)
    assert verdict(old, new)[1] == EXIT_REGRESSION
