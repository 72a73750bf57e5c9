"""The sglang-kernels set (tools/slim/sglang_kernels.py) and the availability of SGLang's two kernel candidates.

Small wheels made here stand in for the registry's; nothing is downloaded. One test reads the real SGLang wheel
when a previous `slim_frameworks.py download` left it under build/frameworks-wheels, and is skipped otherwise.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import types
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

from slim import pins, sglang_kernels  # noqa: E402
from slim.record import wheel_record  # noqa: E402
from slim.slim_wheel import read_manifest  # noqa: E402

from adaln_bench.ops import frameworks  # noqa: E402
from adaln_bench.ops.candidates import candidates_of  # noqa: E402

from test_slim_frameworks import make_wheel  # noqa: E402

JIT_MODULE = "sglang/kernels/ops/diffusion/modulate/timestep_embedding_jit.py"
CUTE_MODULE = "sglang/kernels/ops/diffusion/norm/scale_residual_norm_cutedsl.py"
JIT_SOURCE = "sglang/kernels/jit/csrc/diffusion/timestep_embedding.cuh"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- the committed list ------------------------------------------------------------------------------------

def test_the_committed_list_pins_both_kernels_and_the_jit_sources():
    files = sglang_kernels.read_kernel_files()
    by_op = {op: {f.path for f in files if f.op == op} for op in sglang_kernels.OPERATORS}
    assert JIT_MODULE in by_op["timestep_sinusoid"] and JIT_SOURCE in by_op["timestep_sinusoid"]
    assert CUTE_MODULE in by_op["norm_modulate"]
    headers = {p for p in by_op["timestep_sinusoid"] if p.startswith("sglang/kernels/jit/include/sgl_kernel/")}
    assert {Path(p).name for p in headers} == {"bits.h", "math.cuh", "source_location.h", "tensor.h", "type.cuh",
                                               "utils.cuh", "utils.h", "vec.cuh"}
    assert len(files) == 19


def test_the_kernel_list_adds_to_the_mode_list_and_names_no_file_twice():
    mode = set(read_manifest(pins.SGLANG.manifest))
    kernel = [f.path for f in sglang_kernels.read_kernel_files()]
    assert not mode & set(kernel), "a file both lists name belongs in one"
    assert "sglang/__init__.py" in mode, "SGLang's own __init__ is kept: nothing is shimmed"


@pytest.mark.parametrize("line, message", [
    ("timestep_sinusoid abc sglang/x.py", "not a lowercase hex SHA-256"),
    (f"adaln_projection {'0' * 64} sglang/x.py", "unknown operator"),
    (f"norm_modulate {'0' * 64} vllm/x.py", "not a path inside the sglang package"),
    (f"norm_modulate {'0' * 64} sglang/../x.py", "not a path inside the sglang package"),
    (f"norm_modulate {'0' * 64}", "expected '<operator> <sha256> <path>'"),
    (f"norm_modulate {'A' * 64} sglang/x.py", "not a lowercase hex SHA-256"),
])
def test_a_malformed_line_is_refused_with_its_line_number(tmp_path, line, message):
    listing = tmp_path / "k.files"
    listing.write_text(f"# comment\n\n{line}\n")
    with pytest.raises(ValueError, match=message) as info:
        sglang_kernels.read_kernel_files(listing)
    assert "k.files:3" in str(info.value)


def test_a_file_listed_twice_is_refused(tmp_path):
    listing = tmp_path / "k.files"
    listing.write_text(f"norm_modulate {'0' * 64} sglang/x.py\ntimestep_sinusoid {'1' * 64} sglang/x.py\n")
    with pytest.raises(ValueError, match="listed twice"):
        sglang_kernels.read_kernel_files(listing)


def test_digests_must_match_record():
    files = [sglang_kernels.KernelFile("norm_modulate", sha(b"a"), "sglang/a.py")]
    sglang_kernels.check_against_record(files, {"sglang/a.py": sha(b"a")})
    with pytest.raises(ValueError, match="sglang/a.py .RECORD"):
        sglang_kernels.check_against_record(files, {"sglang/a.py": sha(b"b")})
    with pytest.raises(ValueError, match="not in the wheel: sglang/a.py"):
        sglang_kernels.check_against_record(files, {})


def test_the_committed_digests_are_the_real_wheels_record():
    wheels = REPO / "build" / "frameworks-wheels"
    found = sorted(wheels.glob(f"sglang-{pins.SGLANG.version}-cp312-*.whl")) if wheels.is_dir() else []
    if not found:
        pytest.skip("no SGLang wheel under build/frameworks-wheels (run tools/slim_frameworks.py download)")
    sglang_kernels.check_against_record(sglang_kernels.read_kernel_files(), wheel_record(found[0]))


# --- build and verify, on a stand-in wheel -------------------------------------------------------------------

STAND_IN = {
    "sglang/__init__.py": b'"""SGLang"""\n',
    "sglang/srt/batch_invariant_ops/__init__.py": b"def enable_batch_invariant_mode():\n    pass\n",
    "sglang/kernels/jit/include/sgl_kernel/utils.h": b"#pragma once\n",
    "sglang/kernels/jit/csrc/diffusion/timestep_embedding.cuh": b"// the kernel\n",
    "sglang/kernels/jit/csrc/other.cuh": b"// another kernel\n",
    "sglang/kernels/ops/diffusion/modulate/timestep_embedding_jit.py": b"def timestep_embedding(t, dim):\n    pass\n",
    "sglang/multimodal_gen/big.py": b"# not imported\n",
}


def stand_in_set(tmp_path: Path, tamper: dict[str, bytes] | None = None):
    """A fake 'sglang-0.5.23' wheel, its two lists, and the dependency wheels build copies."""
    full = make_wheel(tmp_path / f"sglang-{pins.SGLANG.version}-cp312-cp312-manylinux_2_34_x86_64.whl",
                      STAND_IN, tamper)
    mode = tmp_path / "mode.files"
    mode.write_text("sglang/__init__.py\nsglang/srt/batch_invariant_ops/__init__.py\n")
    kernel = tmp_path / "kernel.files"
    kernel.write_text("".join(f"timestep_sinusoid {sha(STAND_IN[p])} {p}\n" for p in (
        "sglang/kernels/ops/diffusion/modulate/timestep_embedding_jit.py",
        "sglang/kernels/jit/csrc/diffusion/timestep_embedding.cuh")))
    deps = tmp_path / "deps"
    deps.mkdir()

    def wheel_of(name, version=None):
        if name == pins.SGLANG.name:
            return full
        path = deps / f"{name.replace('-', '_')}-1.0-py3-none-any.whl"
        path.write_bytes(b"PK\x05\x06" + bytes(18))
        return path

    return wheel_of, kernel, mode


def test_build_keeps_both_lists_and_the_jit_folders_and_copies_the_dependencies(tmp_path):
    wheel_of, kernel, mode = stand_in_set(tmp_path)
    out = tmp_path / "carry"
    summary = sglang_kernels.build(out, wheel_of, kernel, mode)
    slim = out / "whl" / f"sglang-{pins.SGLANG.version}-0slimkernels-cp312-cp312-manylinux_2_34_x86_64.whl"
    with zipfile.ZipFile(slim) as archive:
        names = set(archive.namelist())
        assert archive.read("sglang/__init__.py") == STAND_IN["sglang/__init__.py"]
    assert "sglang/multimodal_gen/big.py" not in names
    assert {"sglang/kernels/jit/csrc/other.cuh", "sglang/kernels/jit/include/sgl_kernel/utils.h"} <= names
    assert set(STAND_IN) - {"sglang/multimodal_gen/big.py"} <= names
    copied = {p.name.split("-")[0] for p in (out / "whl").iterdir()} - {"sglang"}
    assert copied == {n.replace("-", "_") for n in (*pins.SGLANG.needs, *pins.EXTRAS)}
    written = json.loads((out / "kernels.json").read_text())
    assert written == summary and [f["path"] for f in written["kernel_files"]][0].endswith("timestep_embedding_jit.py")


def test_build_refuses_a_wheel_whose_kernel_differs_from_the_pinned_digest(tmp_path):
    wheel_of, kernel, mode = stand_in_set(tmp_path)
    kernel.write_text(f"timestep_sinusoid {sha(b'other bytes')} sglang/kernels/jit/csrc/diffusion/timestep_embedding.cuh\n")
    with pytest.raises(ValueError, match="does not match the wheel's RECORD"):
        sglang_kernels.build(tmp_path / "carry", wheel_of, kernel, mode)
    assert not (tmp_path / "carry").exists()


def test_verify_finds_a_missing_and_a_changed_file(tmp_path):
    files = [sglang_kernels.KernelFile("timestep_sinusoid", sha(b"kernel"), "sglang/a.cuh"),
             sglang_kernels.KernelFile("norm_modulate", sha(b"module"), "sglang/b.py")]
    (tmp_path / "sglang").mkdir()
    (tmp_path / "sglang" / "a.cuh").write_bytes(b"kernel")
    assert sglang_kernels.verify(tmp_path, files) == ["missing: sglang/b.py"]
    (tmp_path / "sglang" / "b.py").write_bytes(b"module, edited")
    problems = sglang_kernels.verify(tmp_path, files)
    assert len(problems) == 1 and problems[0].startswith("changed: sglang/b.py")
    (tmp_path / "sglang" / "b.py").write_bytes(b"module")
    assert sglang_kernels.verify(tmp_path, files) == []


# --- availability: the exact reason -------------------------------------------------------------------------

JIT = "sglang.kernels.ops.diffusion.modulate.timestep_embedding_jit"
CUTE = "sglang.kernels.ops.diffusion.norm.scale_residual_norm_cutedsl"


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """A CUDA machine whose installed modules the test chooses; nvcc on PATH unless the test removes it."""
    candidates_of("timestep_sinusoid"), candidates_of("norm_modulate")  # registered before find_spec is replaced
    present: set[str] = set()
    lacking_parent: dict[str, str] = {}

    def find_spec(name, package=None):
        if name in lacking_parent:
            raise ModuleNotFoundError(f"No module named {lacking_parent[name]!r}", name=lacking_parent[name])
        return types.SimpleNamespace(name=name) if name in present else None

    monkeypatch.setattr(frameworks, "_cuda_reason", lambda: None)
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(frameworks.shutil, "which", lambda name: "/opt/cuda/bin/nvcc" if name == "nvcc" else None)
    monkeypatch.setattr(frameworks, "DEFAULT_NVCC", tmp_path / "no-nvcc")
    return types.SimpleNamespace(present=present, lacking_parent=lacking_parent, monkeypatch=monkeypatch)


def jit_reason():
    return candidates_of("timestep_sinusoid")["sglang"].availability()


def cute_reason():
    return candidates_of("norm_modulate")["sglang"].availability()


def test_without_sglang_both_say_sglang_is_not_installed(machine):
    expected = "ModuleNotFoundError: No module named 'sglang' (SGLang is not installed)"
    assert jit_reason() == expected and cute_reason() == expected


def test_the_cute_dsl_kernel_names_the_package_left_out_and_its_sizes(machine):
    machine.present.update({"sglang", "tvm_ffi", "cuda.bindings", CUTE, JIT})
    reason = cute_reason()
    assert reason.startswith("ModuleNotFoundError: No module named 'cutlass' (nvidia-cutlass-dsl 4.8.0[cu13]")
    assert "47.8 MiB" in reason and "64 MiB" in reason and "not installed" in reason
    assert jit_reason() is None  # the JIT kernel does not need the CuTe DSL


def test_the_jit_kernel_needs_tvm_ffi_and_nvcc(machine, tmp_path):
    machine.present.update({"sglang", JIT})
    assert jit_reason() == ("ModuleNotFoundError: No module named 'tvm_ffi' (apache-tvm-ffi 0.1.11, which SGLang's "
                            "JIT kernels load through, is not installed)")
    machine.present.add("tvm_ffi")
    machine.monkeypatch.setattr(frameworks.shutil, "which", lambda name: None)
    assert jit_reason().startswith("nvcc not found (neither CUDA_HOME nor PATH has it")
    machine.monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    assert jit_reason().startswith(f"{tmp_path / 'bin' / 'nvcc'} not found (CUDA_HOME is set")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvcc").write_text("#!/bin/sh\n")
    assert jit_reason() is None


def test_an_sglang_install_without_the_kernel_says_so_not_that_sglang_is_missing(machine):
    machine.present.update({"sglang", "tvm_ffi", "cutlass", "cuda.bindings"})
    machine.lacking_parent[JIT] = "sglang.kernels.ops.diffusion.modulate"
    reason = jit_reason()
    assert reason.startswith("ModuleNotFoundError: No module named 'sglang.kernels.ops.diffusion.modulate' (this "
                             "SGLang install lacks the kernel")
    assert "kernels build" in reason and "is not installed" not in reason
    assert cute_reason().startswith(f"ModuleNotFoundError: No module named {CUTE!r} (this SGLang install lacks")


def test_a_missing_third_party_module_under_the_kernel_is_named_as_such(machine):
    machine.present.update({"sglang", "tvm_ffi"})
    machine.lacking_parent[JIT] = "msgspec"
    assert jit_reason() == f"ModuleNotFoundError: No module named 'msgspec' (a dependency of {JIT})"


def test_the_file_details_name_the_module_and_source_with_their_digests(tmp_path):
    module_file = tmp_path / "site" / "sglang" / "kernels" / "k.py"
    module_file.parent.mkdir(parents=True)
    module_file.write_bytes(b"def k():\n    pass\n")
    source = tmp_path / "site" / "sglang" / "kernels" / "k.cuh"
    source.write_bytes(b"// k\n")
    details = frameworks.sglang_file_details(types.SimpleNamespace(__file__=str(module_file)),
                                             "sglang/kernels/k.cuh", "sglang/kernels/gone.cuh")
    assert details["module_file"] == "sglang/kernels/k.py"
    assert details["module_sha256"] == sha(b"def k():\n    pass\n")
    assert details["source0_file"] == "sglang/kernels/k.cuh" and details["source0_sha256"] == sha(b"// k\n")
    assert details["source1_sha256"] == "missing"
    assert "sglang_version" in details
