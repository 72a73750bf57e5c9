"""results/ holds one current answer per operator and GPU (adaln_bench/reports/current.py): the rule itself,
and the committed tree against it."""
from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from adaln_bench.reports.current import (
    Facts,
    current_of,
    current_reports,
    facts,
    fidelity_is_current,
    layout_problems,
    read_if_report,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"


def committed(name: str) -> Path:
    return next(RESULTS.rglob(name))


def fact(name: str, modes=("plain",), started="2026-01-01T00:00:00+00:00", complete=True, full=True,
         accuracy_only=False, draws="native", shape="h3", gpu="h200", op="adaln_projection") -> Facts:
    return Facts(path=Path(name), op=op, gpu=gpu, shape=shape, modes=tuple(modes), started_at=started,
                 complete=complete, full=full, accuracy_only=accuracy_only, draws=draws)


def names(chosen):
    return sorted(f.path.name for f in chosen)


def test_the_newest_complete_full_report_of_each_mode_is_current():
    old_all = fact("old.json", modes=("plain", "vllm", "sglang_ieee"), started="2026-01-01T00:00:00+00:00")
    new_plain = fact("new.json", modes=("plain",), started="2026-01-03T00:00:00+00:00")
    new_vllm_broken = fact("broken.json", modes=("vllm",), started="2026-01-04T00:00:00+00:00", complete=False)
    quick = fact("quick.json", modes=("plain", "vllm", "sglang_ieee"), started="2026-01-05T00:00:00+00:00",
                 full=False)
    # vllm: the newer report is incomplete, so the old one still answers; sglang_ieee: only the old one has it.
    assert names(current_of([old_all, new_plain, new_vllm_broken, quick])) == ["new.json", "old.json"]
    assert names(current_of([old_all, replace(new_plain, modes=("plain", "vllm", "sglang_ieee"))])) == ["new.json"]


def test_newest_is_what_the_report_records_and_other_draws_and_shapes_are_answers_of_their_own():
    a = fact("b.json", started="2026-01-02T00:00:00+00:00")
    b = fact("a.json", started="2026-01-01T00:00:00+00:00")  # a later name, an earlier start: not the newest
    draws_old = fact("d1.json", full=False, accuracy_only=True, draws="b200", started="2026-01-01T00:00:00+00:00")
    draws_new = fact("d2.json", full=False, accuracy_only=True, draws="b200", started="2026-01-02T00:00:00+00:00")
    native_accuracy = fact("acc.json", full=False, accuracy_only=True, started="2026-01-09T00:00:00+00:00")
    flux = fact("flux.json", shape="flux", started="2025-01-01T00:00:00+00:00")
    other_gpu = fact("b200.json", gpu="b200", started="")
    got = names(current_of([a, b, draws_old, draws_new, native_accuracy, flux, other_gpu]))
    assert got == ["b.json", "b200.json", "d2.json", "flux.json"]


def test_what_a_committed_report_records_decides_its_kind():
    incomplete = committed("adaln_projection.h200.d46e795.h3.megatron_te_native+megatron_triton+megatron_triton_ieee.json")
    accuracy = committed("adaln_projection.h200.fd00ad3.h3.accuracy.draws-b200.plain.json")
    latency = committed("adaln_projection.h200.bd79cc3.latency.json")
    prior_art = committed("adaln_projection.b200.prior-art.json")
    f = {p.name: facts(p, read_if_report(p)) for p in (incomplete, accuracy, latency, prior_art)}
    assert not f[incomplete.name].complete and f[incomplete.name].full
    assert f[accuracy.name].accuracy_only and f[accuracy.name].draws == "b200" and not f[accuracy.name].full
    assert not f[latency.name].full and f[latency.name].complete
    assert f[prior_art.name].full and f[prior_art.name].gpu == "b200" and f[prior_art.name].shape == "h3"


def test_a_mode_whose_every_candidate_was_unavailable_answers_nothing():
    # 853103e ran every mode, but vLLM, SGLang and Megatron were not installed on that machine.
    path = committed("adaln_projection.h200.853103e.json")
    report = read_if_report(path)
    assert "vllm" in report.results and facts(path, report).modes == ("plain", "cublaslt_ws1")


def test_a_report_named_incomplete_is_never_current(tmp_path):
    src = committed("timestep_sinusoid.h200.f51093c.h3.plain.json")
    shutil.copy(src, tmp_path / src.name)
    assert current_reports(tmp_path) == [tmp_path / src.name]
    (tmp_path / src.name).rename(tmp_path / "timestep_sinusoid.h200.f51093c.h3.plain.incomplete.json")
    assert current_reports(tmp_path) == []


def test_a_fidelity_output_is_current_while_the_report_it_compared_is():
    text = committed("fidelity.norm_modulate.h200.7a100a7.h3.plain.md").read_text(encoding="utf-8")
    assert fidelity_is_current(text, {"norm_modulate.h200.7a100a7.h3.plain.json"})
    assert not fidelity_is_current(text, {"norm_modulate.h200.fd00ad3.h3.plain.json"})
    assert not fidelity_is_current("no subject here", {"norm_modulate.h200.7a100a7.h3.plain.json"})


def test_a_stale_report_or_a_log_in_an_operators_folder_is_found(tmp_path):
    results = tmp_path / "results"
    op = results / "h200" / "timestep_sinusoid"
    op.mkdir(parents=True)
    current = committed("timestep_sinusoid.h200.f51093c.h3.plain.json")
    stale = committed("timestep_sinusoid.h200.fd00ad3.h3.plain.json")
    shutil.copy(current, op / current.name)
    (results / "h200" / "runs").mkdir()
    index = results / "h200" / "runs" / "run.h200.f51093c.h3.plain.json"
    index.write_text(json.dumps({"kind": "adaln_bench_run_index",
                                 "reports": {"timestep_sinusoid": f"../timestep_sinusoid/{current.name}"}}))
    assert layout_problems(results, repo=ROOT) == []  # the run index of a current report stays
    shutil.copy(stale, op / stale.name)
    (op / "run.log").write_text("a log\n")
    old_index = results / "h200" / "runs" / "run.h200.fd00ad3.h3.plain.json"
    old_index.write_text(json.dumps({"kind": "adaln_bench_run_index",
                                     "reports": {"timestep_sinusoid": f"../timestep_sinusoid/{stale.name}"}}))
    shutil.copy(index, op / "run.h200.f51093c.h3.plain.json")
    assert sorted(layout_problems(results, repo=ROOT)) == [
        f"h200/runs/{old_index.name}: a run index of no current report",
        "h200/timestep_sinusoid/run.h200.f51093c.h3.plain.json: a run index belongs in <gpu>/runs/",
        "h200/timestep_sinusoid/run.log: neither a report nor a current fidelity or kernel-bench output",
        f"h200/timestep_sinusoid/{stale.name}: belongs at h200/history/timestep_sinusoid/{stale.name}",
    ]


def test_evidence_reports_are_never_current_nor_history_nor_on_the_dashboard(tmp_path):
    from adaln_bench.reports.site.collect import report_files

    results = tmp_path / "results"
    op = results / "h200" / "timestep_sinusoid"
    op.mkdir(parents=True)
    older = committed("timestep_sinusoid.h200.fd00ad3.h3.plain.json")
    newer = committed("timestep_sinusoid.h200.f51093c.h3.plain.json")
    shutil.copy(older, op / older.name)
    evidence = results / "h200" / "evidence" / "scheduling" / "abc1234"
    evidence.mkdir(parents=True)
    shutil.copy(newer, evidence / newer.name)  # newer, yet no answer: the older report stays current
    (evidence / "README.md").write_text("what was run\n")
    (evidence / "diff.md").write_text("a diff\n")
    assert current_reports(results) == [op / older.name]
    assert layout_problems(results, repo=ROOT) == []
    assert report_files([results]) == [op / older.name]
    (results / "h200" / "timestep_sinusoid" / "evidence").mkdir()
    (results / "h200" / "timestep_sinusoid" / "evidence" / "x.md").write_text("misplaced\n")
    assert layout_problems(results, repo=ROOT) == [
        "h200/timestep_sinusoid/evidence/x.md: evidence belongs in <gpu>/evidence/<topic>/"]


@pytest.mark.skipif(shutil.which("git") is None or subprocess.run(
    ["git", "rev-parse", "--is-inside-work-tree"], cwd=ROOT, capture_output=True).returncode != 0,
    reason="not a git checkout: kernel-bench outputs are dated by their commits in git")
def test_the_committed_results_follow_the_rule():
    assert layout_problems(RESULTS, repo=ROOT) == []


def test_publish_reads_history_too_and_marks_the_current_reports():
    from adaln_bench.reports.site.collect import collect

    folder = RESULTS / "h200" / "timestep_sinusoid"
    history = RESULTS / "h200" / "history" / "timestep_sinusoid"
    collected = collect([folder, history])
    assert {l.path for l in collected.reports} == set(folder.glob("*.json")) | set(history.glob("*.json"))
    assert collected.current == set(folder.glob("*.json"))


def test_a_local_cpu_run_under_results_is_no_part_of_the_answer(tmp_path):
    # The README's quick start writes its CPU reports to results/cpu/ (git-ignored); the test command run after
    # it in the same checkout must still find results/README.md current and the layout clean.
    from adaln_bench.reports.summary import summary_markdown

    results = tmp_path / "results"
    op = results / "h200" / "timestep_sinusoid"
    op.mkdir(parents=True)
    report = committed("timestep_sinusoid.h200.f51093c.h3.plain.json")
    shutil.copy(report, op / report.name)
    before = summary_markdown(results, repo=ROOT)
    local = results / "cpu" / "timestep_sinusoid"
    local.mkdir(parents=True)
    shutil.copy(report, local / "timestep_sinusoid.cpu.0000000.tiny.json")
    (results / "cpu" / "runs").mkdir()
    (results / "cpu" / "runs" / "run.cpu.0000000.tiny.json").write_text("{}\n")
    assert current_reports(results) == [op / report.name]
    assert layout_problems(results, repo=ROOT) == []
    assert summary_markdown(results, repo=ROOT) == before
    # named on its own, the folder is read as any other
    assert current_reports(results / "cpu") == [local / "timestep_sinusoid.cpu.0000000.tiny.json"]
