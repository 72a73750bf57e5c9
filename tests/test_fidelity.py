"""adaln-bench fidelity: the committed H200 report against RL-Kernel's B200 report, and made-up changes."""
from __future__ import annotations

import json
from pathlib import Path

from conftest import run_main

from adaln_bench.reports.fidelity import compare
from adaln_bench.reports.io import parse_report, read_report

REPO = Path(__file__).resolve().parent.parent
B200 = REPO / "results" / "b200" / "adaln_projection.b200.prior-art.json"
H200 = REPO / "results" / "h200" / "adaln_projection.h200.853103e.json"


def test_committed_h200_plain_row_against_the_b200_reference():
    result = compare(read_report(B200), read_report(H200))
    assert [r.mode for r in result.rows][:3] == ["plain", "vllm", "sglang"]  # the reference's order
    plain = result.rows[0]
    assert (plain.reference_invariant, plain.invariant, plain.verdict_same) == (False, False, True)
    # same seeds, same inputs: dW and db errors agree to every digit on the two GPUs
    assert plain.same_grad_errors == {"1": (True, True), "3": (True, True)}
    h200 = read_report(H200).results["plain"]["diffusers[plain]"].accuracy_latency["2048"].fwd_bwd_us
    b200 = read_report(B200).results["plain"]["diffusers[plain]"].accuracy_latency["2048"].fwd_bwd_us
    assert plain.fwd_bwd_ratio["2048"] == h200 / b200
    # vLLM was unavailable on the H200 then: no verdict to compare
    vllm = result.rows[1]
    assert (vllm.reference_invariant, vllm.invariant, vllm.verdict_same) == (True, None, None)
    assert result.verdicts_agree


def _edited(tmp_path: Path, edit) -> Path:
    data = json.loads(H200.read_text())
    edit(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    parse_report(path.read_text(), str(path))  # still a valid report
    return path


def test_a_flipped_verdict_exits_1_and_says_so(tmp_path, capsys):
    def flip(data):
        data["results"]["plain"]["diffusers[plain]"]["batch_invariance"]["batch_invariant"] = True

    code, out, _ = run_main(["fidelity", str(B200), str(_edited(tmp_path, flip))], capsys)
    assert code == 1
    assert "do not all agree" in out
    assert "| plain | no | yes | no |" in out


def test_a_different_w_error_shows_as_unequal(tmp_path, capsys):
    def nudge(data):
        data["results"]["plain"]["diffusers[plain]"]["accuracy_latency"]["3"]["grad_rel_err"]["w"] *= 1.0000001

    code, out, _ = run_main(["fidelity", str(B200), str(_edited(tmp_path, nudge))], capsys)
    assert code == 0  # verdicts still agree
    assert "T=1: W =, b =; T=3: W ≠, b =" in out


def test_fidelity_of_a_file_that_is_not_a_report_is_a_user_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    code, out, err = run_main(["fidelity", str(B200), str(bad)], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1
