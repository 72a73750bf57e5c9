"""adaln-bench fidelity: the committed H200 report against RL-Kernel's B200 reports, per operator, and
made-up changes (copies of those reports edited in the test)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_main

from adaln_bench.errors import UserError
from adaln_bench.ops.registry import all_operators, get_operator
from adaln_bench.reports.fidelity import compare_operator, drawn_differently, gpu_sms
from adaln_bench.datamodel.io import parse_report, read_report
from adaln_bench.reports.report_sets import by_operator, load_path, load_sides

REPO = Path(__file__).resolve().parent.parent
B200 = REPO / "results" / "b200" / "adaln_projection" / "adaln_projection.b200.prior-art.json"
H200 = next((REPO / "results").rglob("adaln_projection.h200.853103e.json"))
# The operators of RL-Kernel's B200 reports, committed under results/ (every operator it measured), by name.
OPS = tuple(sorted(p.name.split(".")[0] for p in (REPO / "results").rglob("*.b200.prior-art.json")))


def _reference_dir(tmp_path: Path) -> Path:
    """RL-Kernel's six B200 reports, committed under results/ (found by name, wherever results/ keeps them), copied."""
    ref = tmp_path / "b200"
    ref.mkdir()
    sources = {p.name: p for p in sorted((REPO / "results").rglob("*.b200.prior-art.json"))}
    assert len(OPS) == 6 and set(OPS) <= set(all_operators())  # RL-Kernel's six, each an operator found here
    assert sorted(sources) == [f"{op}.b200.prior-art.json" for op in OPS]
    for name, source in sources.items():
        shutil.copy(source, ref / name)
    return ref


def _write(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    parse_report(path.read_text(), str(path))  # still a valid report
    return path


def _edited(tmp_path: Path, edit, source: Path = H200, name: str = "edited.json") -> Path:
    data = json.loads(source.read_text())
    edit(data)
    return _write(tmp_path / name, data)


def _on(gpu: str):
    def edit(data):
        data["environment"]["gpu"] = gpu
    return edit


# --- the projection, as before ------------------------------------------------------------------------


def test_committed_h200_rows_against_the_b200_reference():
    result = compare_operator(read_report(B200), read_report(H200))
    # the reference's order; every candidate both reports have, RL-Kernel's op included (not installed here)
    assert [(r.mode, r.candidate) for r in result.rows][:3] == [
        ("plain", "diffusers[plain]"), ("plain", "rl_kernel"), ("vllm", "diffusers[vllm]")]
    assert "bundled" not in {r.candidate for r in result.rows}  # the H200's own candidate: no reference
    plain = result.rows[0]
    assert (plain.reference_invariant, plain.invariant, plain.verdict_same) == (False, False, True)
    # same seeds: dW and db errors agree to every digit at T = 1 and 3; the forward differs, its W drawn
    # differently (96768 × 2688 elements, beyond the H200's stride)
    assert [(plain.error(t, q).equal, plain.error(t, q).reason) for t in ("1", "3") for q in ("fwd", "w", "b")] == [
        (False, "draw"), (True, None), (True, None)] * 2
    assert result.error_sizes == ("1", "3", "4", "64", "256", "2048")
    assert result.quantities == ("fwd", "temb", "w", "b")
    h200 = read_report(H200).results["plain"]["diffusers[plain]"].accuracy_latency["2048"].fwd_bwd_us
    b200 = read_report(B200).results["plain"]["diffusers[plain]"].accuracy_latency["2048"].fwd_bwd_us
    assert plain.fwd_bwd_ratio["2048"] == h200 / b200
    assert list(plain.fwd_bwd_ratio) == ["1", "3", "256", "2048"]
    # vLLM was unavailable on the H200 then: no verdict to compare
    vllm = result.rows[2]
    assert (vllm.reference_invariant, vllm.invariant, vllm.verdict_same) == (True, None, None)
    assert result.compared == [True]


def test_the_projection_markdown(capsys):
    code, out, err = run_main(["fidelity", str(B200), str(H200)], capsys)
    assert code == 0 and err == ""
    assert out.startswith("## adaln_projection\n\nAgainst `adaln_projection.b200.prior-art.json` (NVIDIA B200), "
                          "for `adaln_projection.h200.853103e.json` (NVIDIA H200). Invariance verdicts agree for "
                          "every candidate measured on both.\n")
    assert ("Reasons for ≠, by a simple rule (every error is taken to read every floating input at that size, "
            "and a gradient's error the upstream gradient too): `draw` when one of those is a CUDA randn/rand of "
            "more than 270,336 elements") in out
    assert ("more than 270,336 elements, the smaller of the two strides (SM count × 2048: NVIDIA B200 (148 SMs) "
            "there, NVIDIA H200 (132 SMs) here)") in out
    assert "Tensors drawn differently on the two GPUs: T=1: w; T=3: w, upstream; " in out
    assert "| mode | candidate | invariant there | invariant here | same verdict | time ratio T = 1 / 3 / 256 / " \
           "2048 | errors equal |" in out
    assert "| plain | diffusers[plain] | no | no | yes | 0.99 / 1.12 / 1.25 / 1.86 | 4 of 24 =; 20 ≠ (draw 20) |" in out
    assert "| vllm | diffusers[vllm] | yes | — | — | — / — / — / — | — |" in out
    assert "| mode | candidate | T | forward | dtemb | dw | db |" in out
    assert "| plain | diffusers[plain] | 1 | ≠ draw | ≠ draw | = | = |" in out
    assert "| plain | diffusers[plain] | 2048 | ≠ draw | ≠ draw | ≠ draw | ≠ draw |" in out


def test_a_flipped_verdict_exits_1_and_says_so(tmp_path, capsys):
    def flip(data):
        data["results"]["plain"]["diffusers[plain]"]["batch_invariance"]["batch_invariant"] = True

    code, out, _ = run_main(["fidelity", str(B200), str(_edited(tmp_path, flip))], capsys)
    assert code == 1
    assert "do not all agree" in out
    assert "| plain | diffusers[plain] | no | yes | no |" in out


def test_a_different_w_error_shows_as_unequal(tmp_path, capsys):
    def nudge(data):
        data["results"]["plain"]["diffusers[plain]"]["accuracy_latency"]["3"]["grad_rel_err"]["w"] *= 1.0000001

    code, out, _ = run_main(["fidelity", str(B200), str(_edited(tmp_path, nudge))], capsys)
    assert code == 0  # verdicts still agree
    assert "| plain | diffusers[plain] | 1 | ≠ draw | ≠ draw | = | = |" in out
    # T = 3's upstream, 3 × 96768 elements, is beyond the stride: the W error may differ for the draw
    assert "| plain | diffusers[plain] | 3 | ≠ draw | ≠ draw | ≠ draw | = |" in out


# --- reasons: draw or implementation --------------------------------------------------------------------


def _small(gpu: str, edit=None):
    """The H200 report re-labelled as a small-shape run (D=128 H=32 M=3 N=576) on `gpu`: every tensor is
    small but the (n, 576) upstream from n = 470 (470 × 576 > 270,336)."""
    def apply(data):
        data["environment"]["gpu"] = gpu
        data["shape"] = {"dim": 128, "hidden": 32, "modalities": 3, "out_features": 576, "preset": "small"}
        if edit:
            edit(data)
    return apply


def test_a_planted_difference_is_implementation_at_a_small_size_and_draw_at_a_large_one(tmp_path, capsys):
    def plant(data):
        points = data["results"]["plain"]["diffusers[plain]"]["accuracy_latency"]
        points["1"]["fwd_rel_err"] *= 1.001  # T = 1: every input and the upstream small
        points["2048"]["fwd_rel_err"] *= 1.001  # T = 2048: temb (2048, 128) small, the forward reads no upstream
        points["2048"]["grad_rel_err"]["temb"] *= 1.001  # … but the gradient's upstream (2048, 576) is large

    there = _edited(tmp_path, _small("NVIDIA B200"), name="there.json")
    here = _edited(tmp_path, _small("NVIDIA H200", plant), name="here.json")
    result = compare_operator(read_report(there), read_report(here))
    plain = result.rows[0]
    assert (plain.error("1", "fwd").equal, plain.error("1", "fwd").reason) == (False, "implementation")
    assert (plain.error("2048", "fwd").equal, plain.error("2048", "fwd").reason) == (False, "implementation")
    assert (plain.error("2048", "temb").equal, plain.error("2048", "temb").reason) == (False, "draw")
    assert plain.error("2048", "w").equal is True and plain.error("2048", "w").reason is None
    assert result.drawn.by_size["1"] == () and result.drawn.by_size["2048"] == ("upstream",)
    code, out, _ = run_main(["fidelity", str(there), str(here)], capsys)
    assert code == 0
    assert "| plain | diffusers[plain] | 1 | ≠ implementation | = | = | = |" in out
    assert "| plain | diffusers[plain] | 2048 | ≠ implementation | ≠ draw | = | = |" in out
    assert "| plain | diffusers[plain] | no | no | yes | 1.00 / 1.00 / 1.00 / 1.00 | 21 of 24 =; 3 ≠ " \
           "(draw 1, implementation 2) |" in out


def test_draws_declared_as_on_the_other_gpu_leave_only_implementation(tmp_path, capsys):
    def plant(data):
        data["draw_geometry"] = {"name": "B200", "sms": 148}
        data["results"]["plain"]["diffusers[plain]"]["accuracy_latency"]["1"]["grad_rel_err"]["w"] *= 1.001

    here = _edited(tmp_path, plant)
    result = compare_operator(read_report(B200), read_report(here))
    assert (result.draws.name, result.draws.sms, result.draws.declared) == ("B200", 148, True)
    assert result.rows[0].error("1", "w").reason == "implementation"
    code, out, _ = run_main(["fidelity", str(B200), str(here)], capsys)
    assert "Both sides drew as on GPUs of 148 SMs: the same seeds gave the same inputs" in out
    assert "| plain | diffusers[plain] | 1 | ≠ implementation | ≠ implementation | ≠ implementation | = |" in out


def test_an_unknown_gpu_gives_no_reason(tmp_path, capsys):
    code, out, _ = run_main(["fidelity", str(B200), str(_edited(tmp_path, _on("NVIDIA A100-SXM4-80GB")))], capsys)
    assert code == 0
    assert "Reasons for ≠: unknown GPU (NVIDIA A100-SXM4-80GB), reason not given." in out
    assert "| plain | diffusers[plain] | 1 | ≠ | ≠ | = | = |" in out
    assert "20 ≠ (20 without a reason)" in out


def test_sm_counts_by_gpu_name():
    assert [gpu_sms(n) for n in ("NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA B200", "NVIDIA H20", None)] == [
        132, 132, 148, None, None]


def test_which_tensors_an_h200_and_a_b200_draw_differently(tmp_path):
    """Which inputs the two GPUs draw differently (docs/spec.md#11-seeded-draws-on-another-gpu), from the operators'
    declarations: those beyond 270,336 elements."""
    ref = _reference_dir(tmp_path)
    reference = {op: read_report(ref / f"{op}.b200.prior-art.json") for op in OPS}

    def drawn(op, *sizes):
        report = reference[op].model_copy(update={"environment": reference[op].environment.model_copy(
            update={"gpu": "NVIDIA H200"})})
        result = drawn_differently(get_operator(op), reference[op], report, sizes)
        assert result.limit == 270336
        return result.by_size

    assert drawn("timestep_mlp", "1", "1024", "2048") == {
        "1": ("w1", "w2"), "1024": ("w1", "w2", "upstream"), "2048": ("x", "w1", "w2", "upstream")}
    assert drawn("adaln_projection", "1", "3", "256") == {
        "1": ("w",), "3": ("w", "upstream"), "256": ("temb", "w", "upstream")}
    assert drawn("adaln_row_gather", "4097") == {"4097": ("table", "upstream")}  # (9, 32256) beyond by 19,968
    assert drawn("norm_modulate", "4097") == {"4097": ("x", "upstream")}  # w, sh, sc small
    assert drawn("gate_residual", "32768") == {"32768": ("res", "y", "upstream")}
    assert drawn("final_adaln_out", "4097") == {"4097": ("x", "w", "upstream")}  # temb (3, 2688), b small


# --- sets of reports, paired by operator ---------------------------------------------------------------


def _here_run(tmp_path: Path, ref: Path, edits: dict | None = None) -> Path:
    """An "H200 run" directory: each reference report re-labelled, edited where `edits` says, beside a run
    index and a JSON file that is no report."""
    run = tmp_path / "h200-run"
    for source in sorted(ref.glob("*.json")):
        data = json.loads(source.read_text())
        data["environment"]["gpu"] = "NVIDIA H200"
        (edits or {}).get(data["op"], lambda d: None)(data)
        _write(run / data["op"] / f"{data['op']}.h200.json", data)
    (run / "runs").mkdir()
    (run / "runs" / "run.h200.json").write_text(json.dumps({"kind": "adaln_bench_run_index", "reports": []}))
    (run / "notes.json").write_text(json.dumps({"what": "not a report"}))
    (run / "latin1.json").write_bytes(b"\xff\xfe not UTF-8")
    return run


def test_rl_kernels_six_reports_read_as_one_set(tmp_path):
    ref = _reference_dir(tmp_path)
    reports = by_operator(load_path(ref), "REFERENCE")
    assert sorted(reports) == sorted(OPS)
    assert {r.report.kind for r in reports.values()} == {"h3_prior_art"}


def test_a_run_directory_reads_its_reports_and_passes_over_the_rest(tmp_path):
    run = _here_run(tmp_path, _reference_dir(tmp_path))
    loaded = load_path(run)
    assert [(r.path.relative_to(run).as_posix(), r.op) for r in loaded] == [
        (f"{op}/{op}.h200.json", op) for op in OPS]  # not runs/run.h200.json, notes.json, latin1.json


def test_a_directory_of_several_operators_pairs_by_op(tmp_path, capsys):
    ref = _reference_dir(tmp_path)

    def stock_named_by_mode(data):  # pairs with the reference's `diffusers`
        data["results"]["plain"]["diffusers[plain]"] = data["results"]["plain"].pop("diffusers")
        # as this harness writes it: the sizes the operator reads, no D
        data.update(kind="adaln_bench", shape={"hidden": 5376, "modalities": 3, "preset": "h3"})

    def nudge_gate(data):
        data["results"]["plain"]["rl_kernel"]["accuracy_latency"]["4097"]["grad_rel_err"]["gate"] *= 1.001

    run = _here_run(tmp_path, ref, {"norm_modulate": stock_named_by_mode, "gate_residual": nudge_gate})
    code, out, err = run_main(["fidelity", str(ref), str(run)], capsys)
    assert code == 0 and err == ""
    # one section per operator, in the reference's (file name) order; nothing left unpaired
    assert [line[3:] for line in out.splitlines() if line.startswith("## ")] == list(OPS)
    assert "Not compared" not in out
    sections = dict(zip(OPS, out.split("## ")[1:]))
    # each operator's own candidates only
    assert [row.split(" | ")[1] for row in sections["gate_residual"].splitlines()
            if row.startswith("| plain |") and "invariant" not in row][:2] == ["diffusers", "rl_kernel"]
    assert "| plain | diffusers (diffusers[plain] here) | no | no | yes | 1.00 / 1.00 | 10 of 10 = |" in \
        sections["norm_modulate"]
    assert "| plain | sglang | yes | yes | yes | — / — | 2 of 2 = |" in sections["norm_modulate"]
    assert "Tensors drawn differently on the two GPUs: S=4097: x, upstream; S=32768: x, upstream." in \
        sections["norm_modulate"]
    assert "time ratio S = 4097 / 32768" in sections["gate_residual"]
    assert "| plain | rl_kernel | 4097 | = | = | = | ≠ draw |" in sections["gate_residual"]
    assert "| plain | rl_kernel | 32768 | = | = | = | = |" in sections["gate_residual"]
    assert "time ratio T = 1 / 3 / 256 / 2048" in sections["timestep_mlp"]
    assert "| mode | candidate | T | forward | dx | dw1 | db1 | dw2 | db2 |" in sections["timestep_mlp"]


def test_a_flipped_verdict_in_one_operator_of_a_set_exits_1(tmp_path, capsys):
    ref = _reference_dir(tmp_path)

    def flip(data):
        data["results"]["plain"]["liger"]["batch_invariance"]["batch_invariant"] = True

    run = _here_run(tmp_path, ref, {"norm_modulate": flip})
    code, out, _ = run_main(["fidelity", str(ref), str(run)], capsys)
    assert code == 1
    assert out.count("Invariance verdicts agree for every candidate measured on both.") == 5
    assert "| plain | liger | no | yes | no |" in out


def test_an_operator_on_one_side_only_is_named_not_compared(tmp_path, capsys):
    ref = _reference_dir(tmp_path)
    here = _edited(tmp_path, _on("NVIDIA H200"), source=ref / "gate_residual.b200.prior-art.json")
    code, out, _ = run_main(["fidelity", str(ref), str(here)], capsys)
    assert code == 0
    assert [line for line in out.splitlines() if line.startswith("## ")] == ["## gate_residual"]
    assert out.endswith("Not compared, no report here: adaln_projection, adaln_row_gather, final_adaln_out, "
                        "norm_modulate, timestep_mlp.\n")


def test_more_than_two_paths_are_told_apart_by_gpu(tmp_path, capsys):
    ref = _reference_dir(tmp_path)
    gate = ref / "gate_residual.b200.prior-art.json"
    norm = ref / "norm_modulate.b200.prior-art.json"
    here_gate = _edited(tmp_path, _on("NVIDIA H200"), source=gate, name="g.json")
    here_norm = _edited(tmp_path, _on("NVIDIA H200"), source=norm, name="n.json")
    code, out, _ = run_main(["fidelity", str(gate), str(norm), str(here_gate), str(here_norm)], capsys)
    assert code == 0
    assert [line for line in out.splitlines() if line.startswith("## ")] == ["## gate_residual", "## norm_modulate"]
    with pytest.raises(UserError, match="every path holds reports of NVIDIA B200"):
        load_sides([gate, norm, ref / "timestep_mlp.b200.prior-art.json"])


def test_out_writes_the_same_markdown(tmp_path, capsys):
    target = tmp_path / "fidelity.md"
    code, out, _ = run_main(["fidelity", str(B200), str(H200), "--out", str(target)], capsys)
    assert code == 0 and target.read_text() == out


# --- refused: not comparable (3) and bad input (2) -------------------------------------------------------


@pytest.mark.parametrize("edit, reason", [
    (lambda d: (d.update(device="cpu"), d["environment"].update(gpu=None, device="cpu")),
     "REPORT of adaln_projection ran on the CPU: fidelity compares two GPU runs"),
    (lambda d: d.update(quick=True),
     "REPORT of adaln_projection is a quick report: its probes use other sizes than a full run's"),
    (lambda d: d["shape"].update(hidden=3072, out_features=55296),
     "different shapes for adaln_projection: REFERENCE D=2688 H=5376 M=3 F=256 N=96768, REPORT D=2688 H=3072 "
     "M=3 N=55296"),
])
def test_not_comparable_exits_3_with_one_line(tmp_path, capsys, edit, reason):
    code, out, err = run_main(["fidelity", str(B200), str(_edited(tmp_path, edit))], capsys)
    assert code == 3 and out == ""
    assert err == f"adaln-bench: not comparable: {reason}\n"


def test_no_operator_on_both_sides_is_not_comparable(tmp_path, capsys):
    ref = _reference_dir(tmp_path)
    here = _edited(tmp_path, _on("NVIDIA H200"), source=ref / "gate_residual.b200.prior-art.json")
    code, out, err = run_main(["fidelity", str(B200), str(here)], capsys)
    assert code == 3 and out == ""
    assert err == ("adaln-bench: not comparable: no operator on both sides: REFERENCE has adaln_projection, "
                   "REPORT has gate_residual\n")


def test_fidelity_of_a_file_that_is_not_a_report_is_a_user_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    index = tmp_path / "run.json"
    index.write_text(json.dumps({"kind": "adaln_bench_run_index"}))
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.json").write_text("[]")
    for path, message in [(bad, "not an adaln-bench report"), (tmp_path / "missing.json", "no such file"),
                          (index, "a run index, not a report"), (empty, "no reports in this directory")]:
        code, out, err = run_main(["fidelity", str(B200), str(path)], capsys)
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and message in err, err
