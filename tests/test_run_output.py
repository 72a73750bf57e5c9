"""Where a run's reports go: names that tell incomparable reports apart, and a report kept when its target
cannot be written (a full disk must not lose the measurements)."""
import errno
import json
from pathlib import Path

from adaln_bench.datamodel import io as report_io
from adaln_bench.datamodel.io import read_report, write_report_or_keep
from adaln_bench.reports.naming import RunName, index_path, report_path, shape_tag
from adaln_bench.shape import Shape
from conftest import REFERENCE


def test_names_tell_apart_what_makes_two_reports_incomparable():
    base = RunName("h200", "abc1234", "h3")
    names = {base.report_file("norm_modulate"),
             RunName("h200", "abc1234", "flux").report_file("norm_modulate"),
             RunName("h200", "abc1234", "h3", quick=True).report_file("norm_modulate"),
             RunName("h200", "abc1234", "h3", latency_only=True).report_file("norm_modulate"),
             RunName("h200", "abc1234", "h3", accuracy_only=True).report_file("norm_modulate"),
             RunName("h200", "abc1234", "h3", modes=("plain",)).report_file("norm_modulate"),
             RunName("h200", "abc1234", "h3", draws="b200").report_file("norm_modulate"),
             base.report_file("gate_residual")}
    assert len(names) == 8
    assert base.report_file("norm_modulate") == "norm_modulate.h200.abc1234.h3.json"
    assert RunName("cpu", "abc1234", "small", quick=True, modes=("plain", "vllm")).report_file("x") == \
        "x.cpu.abc1234.small.quick.plain+vllm.json"
    assert shape_tag(Shape(128, 32, 3)) == "D128-H32-M3" and shape_tag(Shape(128, 32, 3, "small")) == "small"
    assert report_path(Path("out"), base, "gate_residual") == Path("out/gate_residual/gate_residual.h200.abc1234.h3.json")
    assert index_path(Path("out"), base) == Path("out/runs/run.h200.abc1234.h3.json")


def test_a_report_the_disk_refuses_is_kept_in_the_temporary_directory(tmp_path, monkeypatch):
    report = read_report(REFERENCE)
    target = tmp_path / "full-disk" / "r.json"
    real = report_io.write_text_atomic

    def refuse_the_target(text, path):
        if Path(path) == target:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(text, path)

    monkeypatch.setattr(report_io, "write_text_atomic", refuse_the_target)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    (tmp_path / "tmp").mkdir()
    written = write_report_or_keep(report, target)
    assert not target.exists()
    assert "No space left on device" in written.error and str(target) in written.error
    kept = (tmp_path / "tmp" / "adaln-bench-kept").resolve()
    assert written.path.parent == kept and written.path.name.startswith("r.") and written.path.suffix == ".json"
    assert json.loads(written.path.read_text())["op"] == "adaln_projection"
