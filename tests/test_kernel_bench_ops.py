"""`adaln-bench kernel-bench --op` on the CPU: issue 32's target judgement, the bytes and copies, combining
processes and the Markdown, the bits check on a fake candidate, and the command's refusals."""
from __future__ import annotations

import pytest
import torch

from adaln_bench.harness.assembly.shapes import PRESETS
from adaln_bench.harness.measurement.subject import Subject
from adaln_bench.kernel_bench import checks as op_bits
from adaln_bench.kernel_bench.child import copies, stock_subject
from adaln_bench.kernel_bench import targets
from adaln_bench.kernel_bench.combine import combine, failed_bits, not_invariant
from adaln_bench.kernel_bench.render import document_markdown
from adaln_bench.ops.candidates import Implementation
from adaln_bench.ops.draws import draw_params
from adaln_bench.ops.registry import get_operator
from tests.conftest import run_cli

H3, TINY = PRESETS["h3"], PRESETS["tiny"]
CPU = torch.device("cpu")


@pytest.mark.parametrize("kind, size, ratio, of_copy, passed, why", [
    ("fwd", 4097, 0.99, None, True, ""),
    ("fwd", 4097, 1.01, 2.0, False, "1.010× stock > 1×"),
    ("fwd_bwd", 4097, 0.95, 0.1, True, ""),  # no copy-rate target below S = 32768
    ("fwd", 32768, 0.2, 0.75, True, ""),
    ("fwd", 32768, 0.2, 0.749, False, "74.9% of copy < 75%"),
    ("fwd_bwd", 32768, 0.81, 0.9, False, "0.810× stock > 0.8×"),
    ("fwd_bwd", 131072, 0.13, 0.62, False, "62.0% of copy < 65%"),
    ("fwd_bwd", 131072, 0.13, 0.65, True, ""),
    ("fwd_bwd", 131072, None, None, False, "no paired ratio; no copy rate"),
])
def test_targets_are_issue_32s_table(kind, size, ratio, of_copy, passed, why):
    v = targets.judge(kind, size, ratio, of_copy)
    assert (v.passed, v.why) == (passed, why)


def test_table_gradient_errors_must_be_ten_times_smaller():
    assert targets.error_verdict(0.003, 0.06) is True
    assert targets.error_verdict(0.003, 0.029) is False
    assert targets.error_verdict(None, 0.1) is None


def test_copies_rotate_past_l2():
    assert copies(88e6) == 3  # S = 4097: x and the upstream gradient, 44 MB each
    assert copies(1.4e9) == 1 and copies(1.0) == 16 and copies(0) == 1


def test_bytes_are_the_operators_cost():
    cost = get_operator("norm_modulate").cost(H3, 32768)
    row = 2 * 5376 * 32768
    assert cost.fwd_bytes == 2 * row + 2 * 5376 * 18 and cost.step_bytes == 5 * row + 3 * 2 * 5376 * 18


def _figure(us, ratio, of_copy, host):
    return {"us": us, "vs_stock": ratio, "of_copy": of_copy, "host_us": host}


def _process(scale):
    def sizes(s, fwd_us, fb_us, fb_copy):
        return {"bytes": {"fwd": 704e6, "fwd_bwd": 1.76e9}, "copies": 1,
                "fwd": {"stock": _figure(1000 * scale, 1.0, 0.17, 1010), "bundled": _figure(fwd_us * scale, 0.2, 0.83, 210),
                        "copy": _figure(170 * scale, None, 1.0, None)},
                "fwd_bwd": {"stock": _figure(4900 * scale, 1.0, 0.09, 5000),
                            "bundled": _figure(fb_us * scale, 0.14, fb_copy, 700),
                            "copy": _figure(430 * scale, None, 1.0, None)}}
    return {"ops": {"norm_modulate": {"subjects": {"stock": "the stock path", "bundled": "bundled CUDA kernel"},
                                      "sizes": {"32768": sizes(32768, 200, 684, 0.61 + scale / 100)}}}}


def test_combine_takes_medians_over_processes_and_judges_them():
    runs = [_process(1.0), _process(1.02), _process(0.98)]
    combined = combine(runs, {"norm_modulate": ("sh", "sc")})
    op = combined["ops"]["norm_modulate"]
    fb = op["rows"]["32768"]["fwd_bwd"]["bundled"]
    assert fb["us"] == 684 and fb["per_process_us"] == [684, 697.68, 670.32] and fb["processes"] == 3
    assert fb["of_copy"] == pytest.approx(0.62) and fb["tbps"] == pytest.approx(1.76e9 / 684e-6 / 1e12, abs=1e-3)
    v = op["verdicts"]["bundled"]["32768"]
    assert v["fwd"]["passed"] and not v["fwd_bwd"]["passed"] and v["fwd_bwd"]["why"] == "62.0% of copy < 65%"
    assert "stock" not in op["verdicts"]
    # no targets for an operator without table gradients (the projection: issue 11's, not 32's)
    assert combine(runs, {})["ops"]["norm_modulate"]["verdicts"] == {}


def test_markdown_shows_times_copy_and_verdicts():
    runs = [_process(1.0), _process(1.0)]
    doc = {"device": {"name": "NVIDIA H200"}, "tool": {"torch": "2.11"}, "processes": 2,
           "combined": combine(runs, {"norm_modulate": ("sh", "sc")})}
    text = document_markdown("kb", doc)
    assert "| 32768 | bundled | 200.0 | 210.0 | 0.200 | 83 % | 684.0 | 700.0 | 0.140 | 62 % |" in text
    assert "| 32768 | copy of the fewest bytes (704 / 1760 MB) | 170.0 (4.14 TB/s) |" in text
    assert "| bundled | 32768 | fwd+bwd | ≤ 0.8× stock, ≥ 65% of copy | 0.140 | 62.0 % | **FAIL** (62.0% of copy < 65%)" \
        " (provisional: 2 process(es)) |" in text
    assert text.rstrip().endswith("Targets: NOT all met.")
    assert "| norm_modulate | bundled | 32768 | 200.0 (0.200×, 83 %) | 684.0 (0.140×, 62 %) | – (–) " \
        "| fwd pass, fwd+bwd FAIL |" in text


def test_bits_and_errors_come_from_the_checking_process_and_times_from_the_timed_ones():
    checked = {"ops": {"norm_modulate": {"subjects": {}, "sizes": {}, "bits": {"seed": 3, "sizes": [64], "subjects": {}},
                                         "accuracy": {"stock": {"32768": {"fwd": 7e-3, "grads": {"sh": 0.2, "sc": 0.1}}},
                                                      "bundled": {"32768": {"fwd": 3e-3, "grads": {"sh": 2e-3, "sc": 0.02}}}}}}}
    combined = combine([_process(1.0), checked], {"norm_modulate": ("sh", "sc")})
    op = combined["ops"]["norm_modulate"]
    assert op["rows"]["32768"]["fwd"]["bundled"]["processes"] == 1 and op["bits"]["seed"] == 3
    assert op["error_verdicts"] == {"bundled": {"32768": {"sh": True, "sc": False}}}
    doc = {"device": {"name": "H200"}, "tool": {"torch": "2.11"}, "processes": 1, "combined": combined}
    text = document_markdown("kb", doc)
    assert "| 32768 | bundled | 3.00e-03 | 2.00e-03 | 2.00e-02 |" in text
    assert "Table gradients 10× closer to FP64 than the stock path's: NOT bundled sc at S = 32768 (2 checked)." in text
    assert "| 684.0 (0.140×, 62 %) | 2.0e-02 (2.0e-01) |" in text


def test_an_invariant_candidate_passes_bits_and_a_batch_dependent_one_is_caught():
    op = get_operator("gate_residual")
    params = draw_params(op, TINY, CPU)
    stock = stock_subject(op, TINY)

    def batch_dependent(res, y, gate, idx):
        out = op.stock(res, y, gate, idx)
        return out * (1.0 + 2.0 ** -6) if res.shape[0] > 16 else out  # a tile switch that changes the bits

    class NoisyGradient(torch.autograd.Function):  # the forward exact, the table gradient never the same twice
        @staticmethod
        def forward(ctx, t):
            return t.view_as(t)

        @staticmethod
        def backward(ctx, g):
            return g + torch.randn_like(g) * 1e-3

    def unrepeatable(res, y, gate, idx):
        return op.stock(res, y, NoisyGradient.apply(gate), idx)

    fake = {name: Subject.for_forward(op, Implementation(source=name, has_backward=True, forward=f), TINY)
            for name, f in (("batch_dependent", batch_dependent), ("unrepeatable", unrepeatable))}
    bits = op_bits.check({"stock": stock, **fake}, params, TINY, CPU, (7, 40))
    good = bits["subjects"]["stock"]
    assert good["invariant"] and good["repeatable"] and good["rows_compared"] == 7 + 3
    bad = bits["subjects"]["batch_dependent"]
    assert not bad["invariant"] and bad["rows_differ"] == 7 + 3 and bad["failures"][0] == "prefix 7: 7 of 7 rows differ"
    assert bits["subjects"]["unrepeatable"]["params_repeatable"] == {"7": False, "40": False}
    assert bits["subjects"]["unrepeatable"]["invariant"] and not bits["subjects"]["unrepeatable"]["repeatable"]
    assert not_invariant(bits) == ["batch_dependent", "unrepeatable"]
    assert failed_bits({"ops": {"gate_residual": {"bits": bits}}}) == ["gate_residual/batch_dependent",
                                                                       "gate_residual/unrepeatable"]


def test_errors_against_fp64_are_measured_per_size():
    op = get_operator("norm_modulate")
    acc = op_bits.accuracy({"stock": stock_subject(op, TINY)}, draw_params(op, TINY, CPU), TINY, CPU, (5,))
    e = acc["stock"]["5"]
    assert set(e["grads"]) == {"x", "w", "sh", "sc"} and 0 < e["fwd"] < 1e-2


def test_cli_refuses_bad_operator_input_in_one_line():
    r = run_cli("kernel-bench", "--op", "nope")
    assert r.returncode == 2 and "unknown operator 'nope'" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run_cli("kernel-bench", "--op", "gate_residual", "--candidate", "nope")
    assert r.returncode == 2 and "gate_residual has no such candidate" in r.stderr
    r = run_cli("kernel-bench", "--candidate", "bundled")
    assert r.returncode == 2 and "--candidate and --budget go with --op" in r.stderr
    r = run_cli("kernel-bench", "--op", "adaln_projection", "--library", "bundled=sm90")
    assert r.returncode == 2 and "--library 'bundled': a candidate has that name" in r.stderr
    r = run_cli("kernel-bench", "--op", "gate_residual", "--library", "sm90")
    assert r.returncode == 2 and "--library names bundled adaln_projection libraries" in r.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without a GPU")
def test_cli_with_an_operator_says_it_needs_a_gpu(tmp_path):
    r = run_cli("kernel-bench", "--op", "all", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "no CUDA GPU is visible here" in r.stderr


def test_a_process_times_every_subject_with_a_copy_and_the_document_renders(monkeypatch):
    """op_child's measurement on the CPU, its device timer replaced by one that calls each callable and returns
    fixed samples: every subject and the copy at every size, paired ratios, and the command's document."""
    from types import SimpleNamespace

    from adaln_bench.kernel_bench import child as op_child

    calls: dict = {}

    def fake_interleaved(fns, device, rule):
        out = {}
        for name, fn in fns.items():
            fn()
            calls[name] = calls.get(name, 0) + 1
            us = {"stock": 100.0, "copy:memcpy": 30.0, "copy:kernel": 20.0}.get(name, 40.0)
            out[name] = SimpleNamespace(median_us=us, rel_noise=0.0, samples_us=[us] * 10, stop_reason="stable",
                                        throttled=False, sm_clock_mhz_before=None, sm_clock_mhz_after=None)
        return out

    monkeypatch.setattr(op_child, "measure_interleaved", fake_interleaved)
    monkeypatch.setattr(op_child.torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(op_child, "candidate_subject", lambda op, name, sizes, device: stock_subject(op, sizes))
    out = {"ops": {}, "errors": {}}
    config = {"candidates": ["bundled"], "sizes": {"gate_residual": [5, 40]}, "timing": True, "bits": True}
    op_child.measure_op(get_operator("gate_residual"), config, TINY, CPU, out)
    result = out["ops"]["gate_residual"]
    assert out["errors"] == {} and set(result["sizes"]) == {"5", "40"}
    fb = result["sizes"]["40"]["fwd_bwd"]["bundled"]
    assert (fb["us"], fb["vs_stock"], fb["of_copy"]) == (40.0, 0.4, 0.5) and fb["host_us"] > 0
    assert result["sizes"]["40"]["bytes"] == {"fwd": get_operator("gate_residual").cost(TINY, 40).fwd_bytes,
                                              "fwd_bwd": get_operator("gate_residual").cost(TINY, 40).step_bytes}
    copy = result["sizes"]["40"]["fwd_bwd"]["copy"]  # the faster way is the rate; both are kept
    assert copy["way"] == "copy:kernel" and copy["us"] == 20.0 and copy["ways_us"] == {"copy:memcpy": 30.0,
                                                                                    "copy:kernel": 20.0}
    assert calls == {"stock": 4, "bundled": 4, "copy:memcpy": 4, "copy:kernel": 4}
    assert result["bits"]["subjects"]["bundled"]["invariant"]
    grads = ("gate",)
    combined = combine([out, out, out], {"gate_residual": grads})
    assert combined["ops"]["gate_residual"]["verdicts"]["bundled"]["40"]["fwd"]["passed"]
    fb_copy = combined["ops"]["gate_residual"]["rows"]["40"]["fwd_bwd"]["copy"]
    assert fb_copy["way"] == ["copy:kernel"] * 3 and fb_copy["ways"]["copy:memcpy"]["us"] == 30.0
    doc = {"device": {"name": "cpu"}, "tool": {"torch": torch.__version__}, "processes": 3, "combined": combined}
    text = document_markdown("kb", doc)
    assert "| 40 | bundled | 40.0 |" in text and "kernel " in text and "; memcpy " in text

