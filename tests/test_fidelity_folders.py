"""`adaln-bench fidelity results/b200/ results/h200/`: each folder gives each operator's current report."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.conftest import run_main

RESULTS = Path(__file__).resolve().parents[1] / "results"


def test_folders_pick_each_operators_current_plain_report(tmp_path, capsys):
    # The H200 side: norm_modulate's current plain report, an older one kept as history, its vLLM + SGLang
    # report and its accuracy report with B200 draws; only the first is the folder's answer for the operator.
    h200 = tmp_path / "h200"
    for name in ("norm_modulate.h200.7a100a7.h3.plain.json", "norm_modulate.h200.fd00ad3.h3.plain.json",
                 "norm_modulate.h200.fd00ad3.h3.vllm+sglang.json",
                 "norm_modulate.h200.fd00ad3.h3.accuracy.draws-b200.plain.json"):
        src = next(RESULTS.rglob(name))
        dest = h200 / src.relative_to(RESULTS / "h200")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dest)
    code, out, err = run_main(["fidelity", str(RESULTS / "b200"), str(h200)], capsys)
    assert code == 0, err
    assert re.findall(r"for `([^`]+)`", out) == ["norm_modulate.h200.7a100a7.h3.plain.json"]
    assert "Against `norm_modulate.b200.prior-art.json`" in out


def test_a_named_file_is_compared_as_given(capsys):
    accuracy = next(RESULTS.rglob("norm_modulate.h200.fd00ad3.h3.accuracy.draws-b200.plain.json"))
    code, out, err = run_main(["fidelity", str(RESULTS / "b200" / "norm_modulate"), str(accuracy)], capsys)
    assert code == 1, err  # compared, but an accuracy-only report has no verdict to agree with the reference's
    assert re.findall(r"for `([^`]+)`", out) == [accuracy.name]
