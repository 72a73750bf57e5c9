"""tools/slim_frameworks.py: slimmed wheels, vLLM's library in two parts, and report hashes against RECORD.

Small wheels made here stand in for the registry's; nothing is downloaded.
"""
from __future__ import annotations

import base64
import hashlib
import json
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

from slim.library_parts import join_library, split_library, stage_part  # noqa: E402
from slim.record import hex_to_record_digest, parse_record, record_digest_to_hex  # noqa: E402
from slim.report_check import check_report  # noqa: E402
from slim.slim_wheel import write_slim_wheel  # noqa: E402
import slim_frameworks  # noqa: E402

SWITCH = b'"""the switch"""\ndef enable_batch_invariant_mode():\n    pass\n'


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")
    return f"{name},sha256={digest},{len(data)}"


def make_wheel(path: Path, members: dict[str, bytes], tamper: dict[str, bytes] | None = None) -> Path:
    """A wheel whose RECORD names `members`; `tamper` replaces some contents after RECORD was written."""
    info = "demo-1.0.dist-info"
    members = {**members, f"{info}/METADATA": b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"}
    record = "\n".join([record_line(n, d) for n, d in members.items()] + [f"{info}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in {**members, **(tamper or {})}.items():
            archive.writestr(name, data)
        archive.writestr(f"{info}/RECORD", record)
    return path


MEMBERS = {
    "demo/__init__.py": b"",
    "demo/ops/switch.py": SWITCH,
    "demo/unused.py": b"import something_heavy\n",
    "demo/jit/include/a.h": b"#pragma once\n",
    "demo/jit/csrc/b.cu": b"// kernel\n",
    "demo/_C.so": b"\x7fELF" + bytes(range(256)) * 64,
}


def test_record_digests_convert_to_the_hex_sha256sum_prints():
    data = b"batch invariant"
    entry = record_line("x", data).split(",")[1]
    assert record_digest_to_hex(entry) == hashlib.sha256(data).hexdigest()
    assert hex_to_record_digest(hashlib.sha256(data).hexdigest()) == entry
    with pytest.raises(ValueError):
        record_digest_to_hex("md5=abc")


def test_slim_wheel_keeps_listed_files_folders_and_dist_info_unchanged(tmp_path):
    full = make_wheel(tmp_path / "demo-1.0-py3-none-any.whl", MEMBERS)
    out = tmp_path / "out" / "demo-1.0-0slim-py3-none-any.whl"
    kept, _ = write_slim_wheel(full, out, ["demo/__init__.py", "demo/ops/switch.py"], ["demo/jit/"], ["demo/_C.so"])
    with zipfile.ZipFile(out) as archive:
        names = sorted(archive.namelist())
        assert archive.read("demo/ops/switch.py") == SWITCH
        record = parse_record(archive.read("demo-1.0.dist-info/RECORD").decode())
    assert names == sorted(["demo/__init__.py", "demo/ops/switch.py", "demo/jit/include/a.h", "demo/jit/csrc/b.cu",
                            "demo-1.0.dist-info/METADATA", "demo-1.0.dist-info/RECORD"])
    assert kept == len(names)
    # RECORD is the registry's, so it still names the files left out
    assert "demo/unused.py" in record and "demo/_C.so" in record


def test_slim_wheel_refuses_a_member_that_does_not_match_record(tmp_path):
    full = make_wheel(tmp_path / "demo-1.0-py3-none-any.whl", MEMBERS, tamper={"demo/ops/switch.py": b"stub\n"})
    with pytest.raises(ValueError, match="demo/ops/switch.py does not match its RECORD hash"):
        write_slim_wheel(full, tmp_path / "slim.whl", ["demo/ops/switch.py"], [])


def test_slim_wheel_refuses_a_listed_file_the_wheel_lacks(tmp_path):
    full = make_wheel(tmp_path / "demo-1.0-py3-none-any.whl", MEMBERS)
    with pytest.raises(ValueError, match="not in the wheel"):
        write_slim_wheel(full, tmp_path / "slim.whl", ["demo/gone.py"], [])


def test_two_builds_give_the_same_bytes(tmp_path):
    full = make_wheel(tmp_path / "demo-1.0-py3-none-any.whl", MEMBERS)
    one, two = tmp_path / "1" / "d.whl", tmp_path / "2" / "d.whl"
    for out in (one, two):
        write_slim_wheel(full, out, ["demo/ops/switch.py"], ["demo/jit/"])
    assert one.read_bytes() == two.read_bytes()


def split_demo(tmp_path: Path):
    data = MEMBERS["demo/_C.so"]
    stage1, stage2 = tmp_path / "stage1", tmp_path / "stage2"
    parts = split_library(data, "demo/_C.so", "demo.whl", "demo-1.0.dist-info", hashlib.sha256(data).hexdigest(),
                          (stage1, stage2))
    return data, stage1, stage2, parts


def test_library_in_two_parts_joins_back_to_the_recorded_bytes(tmp_path):
    data, stage1, stage2, parts = split_demo(tmp_path)
    assert [p.name for p in parts.parts] == ["_C.so.xz.part1", "_C.so.xz.part2"]
    assert (stage1 / "_C.so.xz.part1").is_file() and not (stage1 / "_C.so.xz.part2").exists()
    staged = stage_part(stage1, tmp_path / "home" / "stage")
    site = tmp_path / "site"
    (site / "demo").mkdir(parents=True)
    target = join_library((staged.parent, stage2), site)
    assert target == site / "demo" / "_C.so" and target.read_bytes() == data


def test_join_refuses_a_damaged_part(tmp_path):
    _, stage1, stage2, _ = split_demo(tmp_path)
    part2 = stage2 / "_C.so.xz.part2"
    part2.write_bytes(part2.read_bytes()[:-1] + b"\0")
    with pytest.raises(ValueError, match="part2"):
        join_library((stage1, stage2), tmp_path / "site")
    assert not (tmp_path / "site" / "demo" / "_C.so").exists()


def test_join_without_the_staged_part_says_to_stage_it(tmp_path):
    _, stage1, stage2, _ = split_demo(tmp_path)
    (stage1 / "_C.so.xz.part1").unlink()
    with pytest.raises(FileNotFoundError, match="first call"):
        join_library((stage1, stage2), tmp_path / "site")


def test_split_refuses_a_library_that_is_not_the_recorded_one(tmp_path):
    with pytest.raises(ValueError, match="RECORD"):
        split_library(b"other", "demo/_C.so", "demo.whl", "demo-1.0.dist-info", "0" * 64,
                      (tmp_path / "a", tmp_path / "b"))


def write_report(path: Path, module_file: str, sha: str, status: str = "ok") -> Path:
    observed = {"library": "demo", "library_version": "1.0", "module_file": module_file, "module_sha256": sha}
    report = {"modes": {"plain": {"status": "ok", "observed": {"library": None}},
                        "demo": {"status": status, "observed": observed}}}
    path.write_text(json.dumps(report))
    return path


def test_check_report_matches_the_real_file_and_not_a_stand_in(tmp_path, capsys):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels / "demo-1.0-0slim-py3-none-any.whl", MEMBERS)
    real = write_report(tmp_path / "real.json", "/tmp/site/demo/ops/switch.py", hashlib.sha256(SWITCH).hexdigest())
    [check] = check_report(real, wheels)
    assert (check.mode, check.member, check.verdict) == ("demo", "demo/ops/switch.py", "matches")
    assert slim_frameworks.main(["check-report", str(real), "--wheels", str(wheels)]) == 0

    standin = write_report(tmp_path / "standin.json", "/repo/tests/standins/demo/ops/switch.py",
                           hashlib.sha256(b"a stand-in").hexdigest())
    assert check_report(standin, wheels)[0].verdict == "differs"
    assert slim_frameworks.main(["check-report", str(standin), "--wheels", str(wheels)]) == 1
    assert "demo 1.0: differs" in capsys.readouterr().out


def test_check_report_without_hash_or_wheel_fails(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    no_wheel = write_report(tmp_path / "r.json", "/tmp/site/demo/ops/switch.py", "ab" * 32)
    assert check_report(no_wheel, wheels)[0].verdict == "no wheel"
    make_wheel(wheels / "demo-1.0-py3-none-any.whl", MEMBERS)
    no_hash = write_report(tmp_path / "n.json", "/tmp/site/demo/ops/switch.py", "")
    assert check_report(no_hash, wheels)[0].verdict == "no hash"
    assert slim_frameworks.main(["check-report", str(no_hash), "--wheels", str(wheels)]) == 1


def test_check_report_of_a_missing_file_is_a_user_error(tmp_path, capsys):
    assert slim_frameworks.main(["check-report", str(tmp_path / "nope.json"), "--wheels", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_the_committed_file_lists_name_the_switch_modules():
    from slim import pins
    from slim.slim_wheel import read_manifest

    vllm = read_manifest(pins.VLLM.manifest)
    sglang = read_manifest(pins.SGLANG.manifest)
    assert "vllm/model_executor/determinism/batch_invariant.py" in vllm
    assert "vllm/platforms/cuda.py" in vllm and "vllm/_custom_ops.py" in vllm  # the CUDA path, traced
    assert "sglang/srt/batch_invariant_ops/batch_invariant_ops.py" in sglang
    assert "sglang/version.py" in sglang
    assert not any(f.endswith(".so") for f in vllm + sglang)  # the compiled library travels in parts
