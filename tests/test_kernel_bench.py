"""`adaln-bench kernel-bench` of the bundled projection libraries on the CPU: its floors, library names, combining
of processes with the floor, the table, the bits check and entry-point calls (with the replay and a fake C
library), and its refusals."""
from __future__ import annotations

import pytest
import torch

from adaln_bench.harness.assembly.shapes import PRESETS
from adaln_bench.harness.measurement.subject import Subject
from adaln_bench.kernel_bench import checks as bits
from adaln_bench.kernel_bench.entry_points import entry_points
from adaln_bench.kernel_bench.floors import floors_for, forward_backward_work, forward_work, rates
from adaln_bench.kernel_bench.subjects import SpecError, parse_library
from adaln_bench.ops.adaln_projection import replay
from adaln_bench.ops.candidates import Implementation
from adaln_bench.ops.draws import draw_params
from adaln_bench.ops.registry import get_operator
from adaln_bench.kernel_bench.combine import combine, failed_bits
from adaln_bench.kernel_bench.render import entries_markdown, summary_markdown
from tests.conftest import run_cli_forked

PROJECTION = get_operator("adaln_projection")

H3 = PRESETS["h3"]
TINY = PRESETS["tiny"]
CPU = torch.device("cpu")


def test_floors_match_the_issue_figures_for_h3():
    fwd1 = forward_work(H3, 1)
    assert fwd1.bound == "bytes" and fwd1.floor_us == pytest.approx(126.0, abs=0.5)  # W once at 4.13 TB/s
    fb1 = forward_backward_work(H3, 1)
    assert fb1.bound == "bytes" and fb1.floor_us == pytest.approx(378.0, abs=1.5)  # 3 x 520 MB
    fb2048 = forward_backward_work(H3, 2048)
    assert fb2048.bound == "flops" and fb2048.floor_us == pytest.approx(4046, abs=5)  # 3 GEMMs at 790 TFLOP/s
    at_floor = rates(fb2048, fb2048.floor_us)
    assert at_floor["of_floor"] == pytest.approx(1.0) and at_floor["tflops"] == pytest.approx(790, rel=1e-6)
    assert rates(fwd1, 2 * fwd1.floor_us)["tbps"] == pytest.approx(4.13 / 2, rel=1e-3)


@pytest.mark.parametrize("text, expect", [
    ("sm90", ("sm90", "sm90", ())),
    ("portable", ("portable", "portable", ())),
    ("v3=sm90:ADALN_FWD_LARGE_TN=256,ADALN_DW_TN=192", ("v3", "sm90", ("ADALN_FWD_LARGE_TN=256", "ADALN_DW_TN=192"))),
    ("old=/tmp/x/libadaln_bundled.so", ("old", "file", ())),
])
def test_library_names(text, expect):
    spec = parse_library(text)
    assert (spec.name, spec.path, spec.defines) == expect


@pytest.mark.parametrize("text", ["sm80", "x=sm90:TN=256", "cublas=sm90", "stock=sm90", "a b=sm90", "v=sm90:ADALN_X="])
def test_bad_library_names_are_refused(text):
    with pytest.raises(SpecError):
        parse_library(text)


def _process(fwd_cublas, fwd_lib, fb_cublas, fb_lib):
    """One process's figures for the stock path (cuBLAS) and one library at T = 1: ratios paired in the process."""
    fig = lambda us, base: {"us": us, "vs_stock": us / base, "of_copy": None, "host_us": None}  # noqa: E731
    row = {"bytes": {"fwd": 5.2e8, "fwd_bwd": 1.56e9}, "copies": 1,
           "fwd": {"stock": fig(fwd_cublas, fwd_cublas), "sm90": fig(fwd_lib, fwd_cublas)},
           "fwd_bwd": {"stock": fig(fb_cublas, fb_cublas), "sm90": fig(fb_lib, fb_cublas)}}
    return {"ops": {"adaln_projection": {"subjects": {"stock": "cuBLAS", "sm90": "bundled library sm90"},
                                         "sizes": {"1": row},
                                         "entries": {"sm90": {"1": {"fwd": 130.0, "d_temb": 140.0, "dW": 150.0,
                                                                     "db": 3.0}}}}}}


def test_combine_takes_the_median_over_processes_and_the_ratio_in_the_same_processes():
    runs = [_process(130, 126, 420, 400), _process(128, 140, 430, 410), _process(135, 129, 500, 390)]
    floors = {"adaln_projection": floors_for("adaln_projection", H3, [1])}
    c = combine(runs, {"adaln_projection": ()}, floors)["ops"]["adaln_projection"]
    fwd = c["rows"]["1"]["fwd"]["sm90"]
    assert fwd["us"] == 129 and fwd["per_process_us"] == [126, 140, 129]
    # the median of the processes' own ratios (each paired in its process), not a ratio of medians
    assert fwd["vs_stock"] == pytest.approx(126 / 130, abs=1e-4)  # of 126/130, 140/128, 129/135
    assert c["rows"]["1"]["fwd_bwd"]["stock"]["vs_stock"] == 1.0
    assert fwd["of_floor"] == pytest.approx(forward_work(H3, 1).floor_us / 129, abs=1e-4)
    assert fwd["tflops"] == pytest.approx(forward_work(H3, 1).flops / 129e-6 / 1e12, abs=1e-3)
    assert c["verdicts"] == {}  # no targets for the projection's libraries
    table = summary_markdown({"ops": {"adaln_projection": c}}, {"adaln_projection": ()})
    assert "| adaln_projection | sm90 | 1 | 129.0 (0.969×, –) |" in table and table.count("\n") == 3
    assert "| sm90 | 1 | 130.0 | 140.0 | 150.0 | 3.0 |" in entries_markdown(c["entries"])


def _invariant_forward(temb, w, b):
    # Row by row, so no row can see its batch: the reference an invariant kernel must equal.
    return torch.cat([replay(temb[i:i + 1], w, b) for i in range(temb.shape[0])])


def _batch_dependent_forward(temb, w, b):
    y = _invariant_forward(temb, w, b)
    return y * (1.0 + 2.0 ** -6) if temb.shape[0] > 16 else y  # a tile switch that changes the bits


def _subject(forward):
    return Subject.for_forward(PROJECTION, Implementation(source="lib", has_backward=True, forward=forward), TINY)


def test_bits_pass_an_invariant_forward_and_count_a_batch_dependent_one():
    params = draw_params(PROJECTION, TINY, CPU)
    subjects = {"good": _subject(_invariant_forward), "bad": _subject(_batch_dependent_forward)}
    result = bits.check(subjects, params, TINY, CPU, (1, 16, 17, 40))
    good, bad = result["subjects"]["good"], result["subjects"]["bad"]
    # prefixes 1, 16, 17 and three single rows against the whole 40-row batch; dW and db repeat
    assert good["invariant"] and good["repeatable"] and good["rows_compared"] == 1 + 16 + 17 + 3
    # The whole batch (40 > 16) is scaled: every prefix and single row of 16 or fewer differs from it.
    assert not bad["invariant"] and bad["rows_differ"] == 1 + 16 + 3
    assert {f.split(":")[0] for f in bad["failures"]} >= {"prefix 1", "prefix 16", "row 0 alone"}
    assert failed_bits({"ops": {"adaln_projection": {"bits": result}}}) == ["adaln_projection/bad"]


class FakeLibrary:
    gemm_ws_bytes = 64

    def __init__(self):
        self.calls: list[tuple] = []

    def dtemb_scratch_bytes(self, t, d, n):
        return 32 * t

    def forward(self, temb, w, b, act, y, t, d, n, ws, ws_bytes, device, stream):
        self.calls.append(("forward", t, d, n, ws_bytes, stream))

    def backward(self, dy, w, temb, act, dtemb, dw, db, t, d, n, scratch, scratch_bytes, device, stream):
        self.calls.append(("backward", dtemb is not None, dw is not None, db is not None, t, scratch_bytes))


def test_each_entry_point_launches_only_its_part():
    lib = FakeLibrary()
    calls = entry_points(lib, TINY, draw_params(PROJECTION, TINY, CPU), 3, CPU)
    assert list(calls) == ["fwd", "d_temb", "dW", "db"] and lib.calls == [("forward", 3, TINY.dim, TINY.out_features,
                                                                         64, None)]
    for f in calls.values():
        f()
    assert lib.calls[2:] == [("backward", True, False, False, 3, 96), ("backward", False, True, False, 3, 96),
                             ("backward", False, False, True, 3, 96)]


def test_cli_refuses_bad_input_in_one_line():
    r = run_cli_forked("kernel-bench", "--library", "v=sm80")
    assert r.returncode == 2 and "code path must be one of sm90, portable" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = run_cli_forked("kernel-bench", "--sizes", "0,4")
    assert r.returncode == 2 and "positive token counts" in r.stderr
    r = run_cli_forked("kernel-bench", "--library", "old=/nonexistent/libadaln_bundled.so")
    assert r.returncode == 2 and "no such library file: /nonexistent/libadaln_bundled.so" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without a GPU")
def test_cli_says_it_needs_a_gpu(tmp_path):
    r = run_cli_forked("kernel-bench", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "no CUDA GPU is visible here" in r.stderr
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_interleaved_sampling_takes_every_callable_in_turn_until_all_are_stable():
    from adaln_bench.harness.measurement.device_time import StopRule, sample_interleaved

    order: list[str] = []

    def taker(name, value, jitter):
        seen = [0]

        def take(k):  # values spread evenly over value ± jitter (a golden-ratio sequence)
            order.extend([name] * k)
            seen[0] += k
            return [value + jitter * (2 * ((i * 0.6180339887) % 1.0) - 1) for i in range(seen[0] - k, seen[0])]
        return take

    rule = StopRule(target=0.005, min_samples=20, max_samples=200, max_seconds=60, batch=10)
    out = sample_interleaved({"a": taker("a", 100.0, 0.0), "b": taker("b", 200.0, 0.0)}, rule)
    # in bursts of `batch`, every callable once per round, in an order that changes between rounds
    rounds = [tuple(order[i:i + 20:10]) for i in range(0, len(order), 20)]
    assert order[:20] in (["a"] * 10 + ["b"] * 10, ["b"] * 10 + ["a"] * 10)
    assert all(sorted(r) == ["a", "b"] for r in rounds)
    order.clear()
    sample_interleaved({name: taker(name, 100.0, 0.0) for name in "abcdef"}, rule)
    rounds = [tuple(order[i:i + 60:10]) for i in range(0, len(order), 60)]
    assert len(rounds) == 2 and all(sorted(r) == list("abcdef") for r in rounds) and rounds[0] != rounds[1]
    assert {k: (len(v.samples_us), v.stop_reason) for k, v in out.items()} == {"a": (20, "stable"), "b": (20, "stable")}
    # One noisy callable keeps the whole set sampling, up to the cap, and each keeps its own noise figure.
    out = sample_interleaved({"a": taker("a", 100.0, 0.0), "noisy": taker("n", 100.0, 30.0)}, rule)
    assert out["a"].stop_reason == "max_samples" and len(out["a"].samples_us) == 200
    assert out["a"].rel_noise == 0.0 and out["noisy"].rel_noise > 0.005


def test_the_committed_h200_run_reads_and_renders_its_committed_figures():
    """The projection's current output (the older layout) through the loader: the committed Markdown's figures."""
    from pathlib import Path

    from adaln_bench.kernel_bench.render import report_markdown
    from adaln_bench.datamodel.load import read_document

    stem = "kernel_bench.ec65536"
    folder = next((Path(__file__).resolve().parents[1] / "results").rglob(f"{stem}.json")).parent
    report = read_document(folder / f"{stem}.json")
    committed = (folder / f"{stem}.md").read_text()
    assert "| 1 | sm90 | 117.1 | 0.943 | 4.45 | 4 | 1.08 | 373.0 | 0.555 | 4.19 | 4 | 1.01 |" in committed
    text = report_markdown(report, stem)
    assert "| adaln_projection | sm90 | 1 | 117.1 (0.943×, –) | 373.0 (0.555×, –) |" in text
    assert "| 1 | fwd | 521 | 0.5 | 126.1 (bytes) | sm90 | 117.1 | 108 % |" in text
    entries = [line for line in committed.splitlines() if line.startswith("| sm90 | 64 |")]
    assert entries and entries[0] in text  # the C entry points' medians, as the committed table has them
    doc = report.document()
    assert failed_bits(doc["combined"]) == []
    bits_of = doc["combined"]["ops"]["adaln_projection"]["bits"]
    broken = {"ops": {"adaln_projection": {"bits": {**bits_of, "subjects": {**bits_of["subjects"],
                                                                              "x": {"invariant": False}}}}}}
    assert failed_bits(broken) == ["adaln_projection/x"]


def _profile_step():
    import importlib.util

    from tests.conftest import ROOT

    spec = importlib.util.spec_from_file_location("profile_step", ROOT / "tools" / "device" / "profile_step.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_step_timeline_takes_each_kernels_median_duration_and_the_gap_before_it():
    per_kernel = _profile_step().per_kernel
    # three replays of two kernels (a, b); the first replay's values are left out
    spans = [("a", 0.0, 10.0), ("b", 11.0, 31.0),
             ("a", 40.0, 52.0), ("b", 53.0, 73.0),
             ("a", 80.0, 92.0), ("b", 95.0, 115.0)]
    rows = per_kernel(list(reversed(spans)), replays=3)  # order of the records does not matter
    assert [r[0] for r in rows] == ["a", "b"]
    assert rows[0][1:] == (12.0, 8.0)  # durations 12, 12; gaps 40 - 31 = 9 and 80 - 73 = 7
    assert rows[1][1:] == (20.0, 2.0)  # durations 20, 20; gaps 1 and 3
    with pytest.raises(ValueError):
        per_kernel(spans[:5], replays=3)


def test_kernel_bench_keeps_the_warm_ups_median_beside_the_kept_one():
    from adaln_bench.harness.measurement.device_time import DeviceTiming
    from adaln_bench.kernel_bench.child import summary

    t = DeviceTiming(method="cuda_graph", median_us=117.5, samples_us=[117.5] * 20, rel_noise=0.001,
                     stop_reason="stable", calls_per_sample=17, sm_clock_mhz_before=1980.0, sm_clock_mhz_after=1980.0,
                     sm_clock_source="nvml", throttled=False, warmup_samples_us=[134.6] * 30 + [117.5] * 70,
                     warmup_ms=200.0)
    s = summary(t)
    assert (s["us"], s["warmup_us"], s["warmup_samples"]) == (117.5, 117.5, 100)
    t.warmup_samples_us[:] = [134.6] * 60 + [117.5] * 40  # a spell longer than half the warm-up shows
    assert summary(t)["warmup_us"] == 134.6
