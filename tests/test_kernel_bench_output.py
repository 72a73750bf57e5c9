"""A kernel-bench output as a report: assembled from processes into the typed output, read back by the one
loader, shown by `report` and compared by `diff` (per-size ratio rows); the committed outputs of both older
layouts read the same way. CPU only: the processes' timings are faked."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from adaln_bench.errors import NotAReportError
from adaln_bench.harness.assembly.shapes import PRESETS
from adaln_bench.kernel_bench import run as kb_run
from adaln_bench.ops.registry import get_operator
from adaln_bench.kernel_bench.show import diff_kernel_bench
from adaln_bench.datamodel.kernel_bench import KernelBenchReport
from adaln_bench.datamodel.load import parse_document, read_document
from tests.conftest import ROOT, run_cli_forked

COMMITTED = {
    "results/h200/kernel_bench/kernel_bench.gathered.682cd0c.json":
        ("operators", "| norm_modulate | bundled | 32768 | 201.8 (0.188×, 83 %) |"),
    "results/h200/timestep_mlp/kernel_bench.timestep_mlp.055aad0.json":
        ("operators", "| timestep_mlp | bundled | 64 | 80.3 (0.481×, 22 %) |"),
    "results/h200/adaln_projection/kernel_bench.ec65536.json":
        ("projection", "| adaln_projection | sm90 | 2048 |"),
}
TINY = PRESETS["tiny"]
CPU = torch.device("cpu")


@pytest.mark.parametrize("path", sorted(COMMITTED))
def test_the_committed_outputs_are_read_shown_and_diffed(path):
    layout, row = COMMITTED[path]
    report = read_document(ROOT / path)
    assert isinstance(report, KernelBenchReport) and report.converted_from == layout
    shown = run_cli_forked("report", path)
    assert shown.returncode == 0, shown.stderr
    assert row in shown.stdout and f"older {layout} layout" in shown.stdout
    same = run_cli_forked("diff", path, path, "--json")
    assert same.returncode == 0, same.stderr
    rows = json.loads(same.stdout)["rows"]
    assert rows and {r["verdict"] for r in rows} == {"SAME"}
    assert {r["kind"] for r in rows} == {"fwd", "fwd_bwd"} and all(r["change"] == 0 for r in rows)


def test_the_gathered_output_keeps_its_figures_and_bits():
    report = read_document(ROOT / "results/h200/kernel_bench/kernel_bench.gathered.682cd0c.json")
    op = report.ops["norm_modulate"]
    assert op.table_grads == ["sh", "sc"]
    fig = op.rows["32768"].fwd["bundled"]
    assert (fig.us, fig.vs_stock, fig.of_copy, fig.processes) == (201.8416, 0.188, 0.8319, 3)
    assert op.bits.subjects["bundled"].invariant and op.bits.subjects["bundled"].repeatable
    assert op.verdicts["bundled"]["131072"]["fwd_bwd"].passed


def _fake_processes(monkeypatch, candidate_us: float) -> list[dict]:
    """Three timed processes and one that checks bits, of gate_residual at S = 5 and 40 on the CPU: the child's
    measurement with its device timer replaced by one that calls each callable and returns fixed samples."""
    from adaln_bench.kernel_bench import child

    def fake_interleaved(fns, device, rule):
        out = {}
        for name, fn in fns.items():
            fn()
            us = {"stock": 100.0, "copy:memcpy": 30.0, "copy:kernel": 20.0}.get(name, candidate_us)
            out[name] = SimpleNamespace(median_us=us, rel_noise=0.0, samples_us=[us] * 10, stop_reason="stable",
                                        throttled=False, sm_clock_mhz_before=None, sm_clock_mhz_after=None,
                                        warmup_samples_us=[us] * 3)
        return out

    monkeypatch.setattr(child, "measure_interleaved", fake_interleaved)
    monkeypatch.setattr(child.torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(child, "candidate_subject", lambda op, name, sizes, device: child.stock_subject(op, sizes))
    p = kb_run.plan(kb_run.Options(ops=["gate_residual"], sizes="5,40", shape="tiny"))
    runs = []
    for spec in (p.timed, p.timed, p.timed, p.check):
        out: dict = {"ops": {}, "errors": {}}
        child.measure_op(get_operator("gate_residual"), spec.model_dump(), TINY, CPU, out)
        runs.append(out)
    return runs


HEAD = {"tool": {"commit": "abc1234", "dirty": False, "torch": "2.x", "cuda": None},
        "device": {"name": "NVIDIA H200", "capability": "9.0"}}


def _assembled(monkeypatch, candidate_us: float) -> KernelBenchReport:
    p = kb_run.plan(kb_run.Options(ops=["gate_residual"], sizes="5,40", shape="tiny"))
    return kb_run.assemble(p, _fake_processes(monkeypatch, candidate_us), [], HEAD)


def test_an_assembled_output_is_a_report_that_reads_back_unchanged(monkeypatch, tmp_path):
    report = _assembled(monkeypatch, 40.0)
    path = tmp_path / "kernel_bench.ops.abc1234.json"
    path.write_text(report.model_dump_json(indent=1))
    again = read_document(path)
    assert again == report and again.converted_from is None and again.kind == "kernel_bench"
    op = again.ops["gate_residual"]
    fb = op.rows["40"].fwd_bwd["bundled"]
    assert (fb.us, fb.vs_stock, fb.of_copy, fb.processes) == (40.0, 0.4, 0.5, 3)
    assert op.table_grads == ["gate"] and op.bits.subjects["bundled"].invariant
    assert op.verdicts["bundled"]["40"]["fwd"].passed and again.processes == 3
    shown = run_cli_forked("report", str(path))
    assert shown.returncode == 0 and "| gate_residual | bundled | 40 | 40.0 (0.400×, 50 %) |" in shown.stdout


def test_diff_of_two_outputs_gives_ratio_rows_per_size(monkeypatch, tmp_path):
    old, new = _assembled(monkeypatch, 40.0), _assembled(monkeypatch, 46.0)
    (tmp_path / "old.json").write_text(old.model_dump_json())
    (tmp_path / "new.json").write_text(new.model_dump_json())
    result = diff_kernel_bench(old, new)
    rows = {(r.size, r.kind): r for r in result.rows}
    assert set(rows) == {(5, "fwd"), (5, "fwd_bwd"), (40, "fwd"), (40, "fwd_bwd")}
    assert rows[(40, "fwd")].old == 0.4 and rows[(40, "fwd")].new == 0.46 and rows[(40, "fwd")].verdict == "WORSE"
    r = run_cli_forked("diff", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--markdown")
    assert r.returncode == 1 and "| gate_residual | bundled | 40 | fwd | 0.400× | 0.460× | +15.0 % | WORSE |" in r.stdout
    r = run_cli_forked("diff", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--latency-threshold", "0.2")
    assert r.returncode == 0  # a 15 % change within a 20 % threshold
    back = run_cli_forked("diff", str(tmp_path / "new.json"), str(tmp_path / "old.json"), "--json")
    assert back.returncode == 0 and {x["verdict"] for x in json.loads(back.stdout)["rows"]} == {"BETTER"}


def test_lost_bits_are_a_regression_whatever_the_times(monkeypatch):
    old = _assembled(monkeypatch, 40.0)
    data = old.model_dump(mode="json")
    data["combined"]["ops"]["gate_residual"]["bits"]["subjects"]["bundled"]["invariant"] = False
    new = KernelBenchReport.model_validate(data)
    bits = [r for r in diff_kernel_bench(old, new).rows if r.kind == "bits"]
    assert len(bits) == 1 and bits[0].verdict == "WORSE" and bits[0].subject == "bundled"


def test_a_kernel_bench_output_and_a_report_are_not_comparable():
    kb = "results/h200/kernel_bench/kernel_bench.gathered.682cd0c.json"
    report = next(str(p.relative_to(ROOT)) for p in sorted((ROOT / "results/h200/timestep_mlp").glob("timestep_mlp.*.json")))
    r = run_cli_forked("diff", kb, report)
    assert r.returncode == 3 and len(r.stderr.strip().splitlines()) == 1 and "not comparable" in r.stderr
    r = run_cli_forked("diff", kb, "results/h200/adaln_projection/kernel_bench.ec65536.json")
    assert r.returncode == 3 and "no operator in common" in r.stdout


@pytest.mark.parametrize("text, says", [
    ('{"kind": "kernel_bench"}', "not a valid kernel-bench output"),
    ('{"kind": "kernel_bench", "schema_version": 9}', "schema_version 9"),
    ('{"combined": {"ops": []}, "per_process": []}', "not a valid kernel-bench output"),
])
def test_a_broken_output_is_one_line(text, says, tmp_path):
    with pytest.raises(NotAReportError, match=says):
        parse_document(text, "kb.json")
    (tmp_path / "kb.json").write_text(text)
    r = run_cli_forked("report", str(tmp_path / "kb.json"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and says in r.stderr


def test_the_projection_form_is_a_plan_of_the_same_pipeline():
    p = kb_run.plan(kb_run.Options(libraries=["sm90", "v2=sm90:ADALN_DW_TN=128"]))
    assert p.timed.ops == ["adaln_projection"] and p.timed.candidates == [] and p.timed.rule == "fine"
    assert p.timed.libraries == ["sm90", "v2=sm90:ADALN_DW_TN=128"] and p.timed.entries
    assert p.timed.sizes == {"adaln_projection": [1, 3, 4, 64, 256, 2048]}
    assert p.check.bits and not p.check.timing and max(p.check.bits_sizes["adaln_projection"]) == 2048
    assert p.check.accuracy_sizes == {"adaln_projection": [64, 2048]} and p.stem_prefix == "kernel_bench"
    ops = kb_run.plan(kb_run.Options(ops=["all"]))
    assert set(ops.timed.ops) >= {"adaln_row_gather", "norm_modulate", "gate_residual", "final_adaln_out"}
    assert ops.timed.sizes["norm_modulate"] == [4097, 32768, 131072] and ops.stem_prefix == "kernel_bench.ops"
