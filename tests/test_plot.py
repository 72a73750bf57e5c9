"""`adaln-bench plot`: a PNG from one or two reports, the numbers it draws, and the line without matplotlib."""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest
from conftest import run_main

from adaln_bench.reports.plot import GREEN, GREY, RED, Cell, invariance_cells, pair_label, pairs, series
from adaln_bench.datamodel.schema import Report

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "results" / "b200" / "adaln_projection" / "adaln_projection.b200.prior-art.json"
REFERENCE_DATA = json.loads(REFERENCE.read_text(encoding="utf-8"))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


# --- what is drawn ----------------------------------------------------------------------------------


def test_invariance_cells_count_the_differing_rows_of_each_probe():
    report = Report.model_validate(REFERENCE_DATA)
    # plain diffusers on the B200: every row differs (192 + 771 + 6144 = 7107), forward and d_temb. The
    # random-rows probe and the cold-start check came after that report: no value, not a pass.
    assert invariance_cells(report, "plain", "diffusers[plain]") == [
        Cell("7107", RED), Cell("7107", RED), Cell("3080", RED), Cell("2232", RED), Cell("—", GREY),
        Cell("yes", GREEN), Cell("—", GREY), Cell("NO", RED)]
    assert invariance_cells(report, "megatron_te_native", "diffusers[megatron_te_native]")[:2] == [
        Cell("0", GREEN), Cell("7107", RED)]
    assert invariance_cells(report, "plain", "rl_kernel")[-1] == Cell("YES", GREEN)


def test_unavailable_and_absent_pairs_get_no_numbers():
    data = copy.deepcopy(REFERENCE_DATA)
    data["results"]["vllm"]["diffusers[vllm]"] = {"unavailable": "ImportError: no vllm"}
    report = Report.model_validate(data)
    assert set(invariance_cells(report, "vllm", "diffusers[vllm]")) == {Cell("n/a", GREY)}
    assert set(invariance_cells(report, "plain", "bundled")) == {Cell("", "white")}
    assert ("vllm", "diffusers[vllm]") not in [s.key for s in series(report, "fwd_us")]


def test_series_are_sorted_by_T_and_leave_out_zero_errors():
    report = Report.model_validate(REFERENCE_DATA)
    (rl,) = [s for s in series(report, "fwd_bwd_us") if s.key == ("plain", "rl_kernel")]
    assert rl.ts == (1, 3, 4, 64, 256, 2048)
    assert rl.values[-1] == pytest.approx(626991.6076660156)
    # The bias gradient error at T = 1 is exactly 0.0: a log axis cannot show it.
    (b,) = [s for s in series(report, "grad_rel_err.b") if s.key == ("plain", "diffusers[plain]")]
    assert b.ts == (3, 4, 64, 256, 2048)


def test_pairs_and_labels():
    report = Report.model_validate(REFERENCE_DATA)
    assert pairs([report])[:3] == [("plain", "diffusers[plain]"), ("plain", "rl_kernel"), ("vllm", "diffusers[vllm]")]
    assert pair_label("vllm", "diffusers[vllm]") == "vllm: diffusers"
    assert pair_label("plain", "rl_kernel") == "plain: rl_kernel"


# --- the command ------------------------------------------------------------------------------------


def test_plot_reference_writes_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "ref.png"
    code, stdout, err = run_main(["plot", str(REFERENCE), "--out", str(out)], capsys)
    assert (code, err) == (0, "")
    assert stdout.strip() == f"wrote {out}"
    assert png_size(out) == (2100, 1200)
    assert out.stat().st_size > 50_000
    assert [p.name for p in tmp_path.iterdir()] == ["ref.png"]  # no temporary file left behind


def test_plot_two_reports_overlay(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    data = copy.deepcopy(REFERENCE_DATA)
    for candidates in data["results"].values():
        for entry in candidates.values():
            for point in entry["accuracy_latency"].values():
                point["fwd_us"] *= 1.3
    data["results"]["sglang"]["diffusers[sglang]"] = {"unavailable": "ImportError: no sglang"}
    other = tmp_path / "nightly.json"
    other.write_text(json.dumps(data))
    out = tmp_path / "both.png"
    code, _, err = run_main(["plot", str(REFERENCE), str(other), "--out", str(out)], capsys)
    assert (code, err) == (0, "")
    assert png_size(out) == (2100, 1200)


def test_plot_default_output_name(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    code, _, _ = run_main(["plot", str(REFERENCE)], capsys)
    assert code == 0
    assert png_size(tmp_path / "adaln_projection.b200.prior-art.png")[0] == 2100


@pytest.mark.parametrize(
    "args, message",
    [
        (["garbage"], "not JSON"),
        (["absent.json"], "no such file"),
        ([str(REFERENCE)] * 5, "at most 4 reports"),
        ([str(REFERENCE), "--out", "x.jpg"], "must name a .png file"),
    ],
)
def test_plot_bad_input_exit_2(tmp_path, monkeypatch, capsys, args, message):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "garbage").write_text("not a report")
    code, out, err = run_main(["plot", *args], capsys)
    assert (code, out) == (2, "")
    assert message in err and err.count("\n") == 1


def test_plot_without_matplotlib_names_the_extra(tmp_path, monkeypatch, capsys):
    # A None entry in sys.modules makes `import matplotlib` raise ImportError, as if it were not installed.
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = tmp_path / "x.png"
    code, stdout, err = run_main(["plot", str(REFERENCE), "--out", str(out)], capsys)
    assert (code, stdout) == (2, "")
    assert err == "adaln-bench: plotting needs matplotlib: pip install 'adaln-bench[plot]'\n"
    assert not out.exists()


def test_latency_series_carry_quartiles_only_when_every_point_has_them():
    data = copy.deepcopy(REFERENCE_DATA)
    points = data["results"]["plain"]["rl_kernel"]["accuracy_latency"]
    for point in points.values():
        m = point["fwd_us"]
        point["fwd_us_dist"] = {"min": m * 0.9, "q1": m * 0.95, "median": m, "q3": m * 1.05, "max": m * 1.1,
                                "count": 100}
    data["results"]["vllm"]["diffusers[vllm]"]["accuracy_latency"]["1"]["fwd_us"] = None
    data["results"]["vllm"]["diffusers[vllm]"]["accuracy_latency"]["3"]["fwd_us_dist"] = {
        "min": 1, "q1": 2, "median": 3, "q3": 4, "max": 5, "count": 100}
    by_key = {s.key: s for s in series(Report.model_validate(data), "fwd_us")}
    rl = by_key[("plain", "rl_kernel")]
    assert rl.q1 == pytest.approx(tuple(v * 0.95 for v in rl.values))
    assert rl.q3 == pytest.approx(tuple(v * 1.05 for v in rl.values))
    # A reference-style candidate (no distributions, or only some) is drawn without a band.
    assert by_key[("plain", "diffusers[plain]")].q1 == ()
    vllm = by_key[("vllm", "diffusers[vllm]")]
    assert vllm.ts == (3, 4, 64, 256, 2048) and vllm.q1 == ()
