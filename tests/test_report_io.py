"""Reports read, validate and write back: the reference unchanged, bad files refused with one clear message."""
import json
import math
import os

import pytest

from adaln_bench.errors import NotAReportError, UserError
from adaln_bench.reports.io import read_report, report_to_dict, write_report
from adaln_bench.reports.schema import CandidateResult, Report


def test_reference_report_round_trips(reference_path, tmp_path):
    original = json.loads(reference_path.read_text())
    report = read_report(reference_path)
    assert report_to_dict(report) == original
    out = write_report(report, tmp_path / "copy.json")
    assert json.loads(out.read_text()) == original
    assert list(tmp_path.iterdir()) == [out]  # no temporary file left behind


def test_reference_results_are_typed(reference_path):
    report = read_report(reference_path)
    assert list(report.results) == ["plain", "vllm", "sglang", "sglang_ieee", "megatron_te_native",
                                    "megatron_triton", "megatron_triton_ieee"]
    rl = report.results["plain"]["rl_kernel"]
    assert isinstance(rl, CandidateResult) and rl.batch_invariance.batch_invariant
    assert rl.accuracy_latency["2048"].fwd_bwd_us == pytest.approx(626991.6, rel=1e-6)


@pytest.mark.parametrize("content, message", [
    ("{not json", "not JSON"),
    ("[1, 2]", "not an adaln-bench report"),
    ('{"results": {}, "environment": {}}', "not a valid report"),
])
def test_bad_files_are_refused_with_one_line(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(NotAReportError, match=message) as info:
        read_report(path)
    assert "\n" not in str(info.value)


def test_missing_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        read_report(tmp_path / "absent.json")


def test_nan_is_refused(reference_path):
    data = json.loads(reference_path.read_text())
    data["results"]["plain"]["rl_kernel"]["accuracy_latency"]["1"]["fwd_us"] = math.nan
    with pytest.raises(Exception):
        Report.model_validate(data)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_target_is_a_user_error(reference_path, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    with pytest.raises(UserError):
        write_report(read_report(reference_path), locked / "r.json")
