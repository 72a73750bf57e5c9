"""Reports read, validate and write back: the reference unchanged, bad files refused with one clear message."""
import json
import math
import os

import pytest

from adaln_bench.errors import NotAReportError, UserError
from adaln_bench.datamodel.io import read_report, report_to_dict, write_report
from adaln_bench.datamodel.schema import CandidateResult, Report


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


def _versioned(reference_path, tmp_path, version):
    data = json.loads(reference_path.read_text())
    data["schema_version"] = version
    path = tmp_path / "versioned.json"
    path.write_text(json.dumps(data))
    return path


def test_a_newer_schema_version_is_refused_on_every_command(reference_path, tmp_path, capsys):
    from conftest import run_main

    from adaln_bench.datamodel.schema import SCHEMA_VERSION

    newer = _versioned(reference_path, tmp_path, SCHEMA_VERSION + 1)
    expected = (f"adaln-bench: {newer}: schema_version {SCHEMA_VERSION + 1} is newer than this adaln-bench reads "
                f"(up to {SCHEMA_VERSION}); upgrade adaln-bench to read it\n")
    for argv in (["report", str(newer)], ["diff", str(reference_path), str(newer)]):
        code, out, err = run_main(argv, capsys)
        assert (code, out, err) == (2, "", expected)


@pytest.mark.parametrize("version", [0, "1", 1.5, True])
def test_a_malformed_schema_version_is_refused(reference_path, tmp_path, version):
    with pytest.raises(NotAReportError, match="schema_version must be a positive integer"):
        read_report(_versioned(reference_path, tmp_path, version))


def test_known_and_missing_schema_versions_read(reference_path, tmp_path):
    from adaln_bench.datamodel.schema import SCHEMA_VERSION

    assert "schema_version" not in json.loads(reference_path.read_text())  # RL-Kernel's format has none
    assert read_report(reference_path).schema_version is None
    assert read_report(_versioned(reference_path, tmp_path, SCHEMA_VERSION)).schema_version == SCHEMA_VERSION
