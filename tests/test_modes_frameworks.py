"""The framework modes against stand-in packages that have the real module paths and signatures.

Each case runs in its own Python process (tests/standins/support/drive_mode.py), as the harness runs each mode:
aten overrides and torch flags last for the whole process, so they must not leak between tests. That process is
a fork of one that has imported torch (tests/forked.py), so the cases do not each pay for the import.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import forked
import pytest

from adaln_bench.modes.registry import all_modes

REPO = Path(__file__).resolve().parent.parent
STANDINS = REPO / "tests" / "standins"
# Not in tests/standins itself: a script's folder comes first on sys.path, and tests/standins/sglang
# would then import as an empty namespace package called sglang.
DRIVER = STANDINS / "support" / "drive_mode.py"

# Variables a stand-in reacts to, or that the observation reports: the test decides them, not the shell.
_CONTROLLED = ("CUBLAS_WORKSPACE_CONFIG", "CUBLASLT_WORKSPACE_SIZE", "TRITON_F32_DEFAULT",
               "SGLANG_BATCH_INVARIANT_OPS_ENABLE_MM_DEEPGEMM", "ADALN_BENCH_STAGING_MANIFEST")

VLLM_NEW = "vllm.model_executor.determinism.batch_invariant"
VLLM_OLD = "vllm.model_executor.layers.batch_invariant"
SGLANG = "sglang.srt.batch_invariant_ops"
MEGATRON = "megatron.core.transformer.custom_layers.batch_invariant_kernels"


def child_env(mode: str, standins: list[str], extra: Optional[dict[str, str]] = None) -> dict[str, str]:
    """The environment the harness parent gives a mode's child: its own plus the mode's variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADALN_STANDIN_") and k not in _CONTROLLED}
    paths = [str(STANDINS / name) for name in standins] + [str(STANDINS / "support"), str(REPO)]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(all_modes()[mode].env)
    env.update(extra or {})
    return env


def drive(mode: str, standins: list[str], tmp_path: Path, extra: Optional[dict[str, str]] = None,
          megatron_src: Optional[Path] = None) -> dict:
    log = tmp_path / "calls.jsonl"
    env = child_env(mode, standins, {"ADALN_STANDIN_LOG": str(log), **(extra or {})})
    argv = [mode] + ([str(megatron_src)] if megatron_src else [])
    # `python DRIVER MODE ...` in a process of its own, forked from one that has imported torch (tests/forked.py):
    # the driver's first import, here done once instead of once a case.
    proc = forked.run("script", str(DRIVER), argv, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["calls"] = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return result


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- vLLM -------------------------------------------------------------------------------------------


def test_vllm_recent_release_uses_determinism_module(tmp_path):
    r = drive("vllm", ["vllm_new"], tmp_path)
    assert r["path"] == f"{VLLM_NEW}.enable_batch_invariant_mode()"
    assert (r["library"], r["library_version"]) == ("vllm", "0.33.0")
    assert r["calls"] == [{"library": "vllm", "call": "enable_batch_invariant_mode", "args": {"module": VLLM_NEW}}]
    assert not r["has_off"] and not r["has_on"]
    obs = r["observed"]
    assert obs["reference_mode_off"] is False  # vLLM has no switch-off: the reference runs with the mode on
    assert obs["switch_path"] == r["path"]
    assert obs["aten_overrides"] == ["aten::_log_softmax", "aten::mean.dim"]
    assert obs["env_seen"] == {"CUBLAS_WORKSPACE_CONFIG": ":16:8", "CUBLASLT_WORKSPACE_SIZE": "1",
                               "TRITON_F32_DEFAULT": None}
    assert obs["bf16_reduced_precision_reduction"] is False
    assert obs["fp16_reduced_precision_reduction"] is False
    switch_file = STANDINS / "vllm_new" / "vllm" / "model_executor" / "determinism" / "batch_invariant.py"
    assert obs["module_file"] == str(switch_file)
    assert obs["module_sha256"] == sha256_of(switch_file)
    assert obs["matmul_path"] is None  # vLLM's module says nothing about it


def test_vllm_older_release_uses_layers_module(tmp_path):
    r = drive("vllm", ["vllm_old"], tmp_path)
    assert r["path"] == f"{VLLM_OLD}.enable_batch_invariant_mode()"
    assert r["library_version"] == "0.28.0"
    assert [c["args"]["module"] for c in r["calls"]] == [VLLM_OLD]
    # these releases assign torch.bmm as well as overriding aten::bmm
    assert r["observed"]["aten_overrides"] == ["aten::bmm", "aten::_log_softmax", "aten::mean.dim", "torch.bmm"]


def test_vllm_without_batch_invariant_module_names_both_paths(tmp_path):
    r = drive("vllm", ["vllm_011"], tmp_path)
    assert r["error"] == "ModuleNotFoundError"
    assert "vllm 0.11.0" in r["message"]
    assert f"tried {VLLM_NEW} nor {VLLM_OLD}" in r["message"]


# --- SGLang -----------------------------------------------------------------------------------------

SGLANG_OVERRIDES = ["aten::mm", "aten::addmm", "aten::bmm", "aten::_log_softmax", "aten::mean.dim", "torch.bmm"]


def test_sglang_switches_on_off_and_on_again(tmp_path):
    r = drive("sglang", ["sglang"], tmp_path)
    assert r["path"] == f"{SGLANG}.enable_batch_invariant_mode()"
    assert (r["library"], r["library_version"]) == ("sglang", "0.5.23")
    assert r["notes"]["bf16_mm_deepgemm"] == "false"
    assert r["observed"]["aten_overrides"] == SGLANG_OVERRIDES
    assert r["observed"]["reference_mode_off"] is True
    assert r["overrides_after_off"] == []
    assert r["overrides_after_on"] == SGLANG_OVERRIDES
    assert [c["call"] for c in r["calls"]] == [
        "enable_batch_invariant_mode", "disable_batch_invariant_mode", "enable_batch_invariant_mode"]
    # the file that defines the switch, not the package's __init__.py that re-exports it
    switch_file = STANDINS / "sglang" / "sglang" / "srt" / "batch_invariant_ops" / "batch_invariant_ops.py"
    assert r["observed"]["module_file"] == str(switch_file)
    assert r["observed"]["module_sha256"] == sha256_of(switch_file)
    assert r["observed"]["matmul_path"] == "triton_persistent"


@pytest.mark.parametrize("extra, expected", [
    ({"ADALN_STANDIN_DEEPGEMM": "1"}, "deepgemm"),
    ({"ADALN_STANDIN_DEEPGEMM": "1", "SGLANG_BATCH_INVARIANT_OPS_ENABLE_MM_DEEPGEMM": "0"}, "triton_persistent"),
])
def test_sglang_matmul_path_is_read_from_its_module_state(tmp_path, extra, expected):
    r = drive("sglang", ["sglang"], tmp_path, extra)
    assert r["observed"]["matmul_path"] == expected
    assert r["notes"]["bf16_mm_deepgemm"] == str(expected == "deepgemm").lower()


def test_sglang_ieee_sets_triton_f32_default(tmp_path):
    r = drive("sglang_ieee", ["sglang"], tmp_path)
    assert r["observed"]["env_seen"]["TRITON_F32_DEFAULT"] == "ieee"
    assert r["observed"]["aten_overrides"] == SGLANG_OVERRIDES


def test_sglang_plain_mode_leaves_triton_f32_default_unset(tmp_path):
    r = drive("sglang", ["sglang"], tmp_path)
    assert r["observed"]["env_seen"]["TRITON_F32_DEFAULT"] is None


def test_a_missing_dependency_inside_the_module_is_not_taken_for_a_missing_module(tmp_path):
    r = drive("sglang", ["sglang"], tmp_path, {"ADALN_STANDIN_BROKEN_IMPORT": "sglang"})
    assert r["error"] == "ModuleNotFoundError"
    assert r["exc_name"] == "deep_gemm_not_installed"
    assert "deep_gemm_not_installed" in r["message"]


# --- Megatron ---------------------------------------------------------------------------------------

MEGATRON_TRITON_OVERRIDES = ["aten::mm", "aten::addmm", "aten::_log_softmax", "aten::mean.dim"]


@pytest.mark.parametrize("mode", ["megatron_triton", "megatron_triton_ieee"])
def test_megatron_main_triton_passes_the_backend(tmp_path, mode):
    r = drive(mode, ["megatron_main"], tmp_path)
    assert r["path"] == f"{MEGATRON}.enable_batch_invariant_mode(backend='triton')"
    assert (r["library"], r["library_version"]) == ("megatron-core", "0.18.0rc0")
    assert r["observed"]["aten_overrides"] == MEGATRON_TRITON_OVERRIDES
    assert r["overrides_after_off"] == [] and r["overrides_after_on"] == MEGATRON_TRITON_OVERRIDES
    switch_file = STANDINS / "megatron_main" / "megatron" / "core" / "transformer" / "custom_layers" / (
        "batch_invariant_kernels.py")
    assert r["observed"]["module_sha256"] == sha256_of(switch_file)
    assert [(c["call"], c["args"].get("backend")) for c in r["calls"]] == [
        ("enable_batch_invariant_mode", "triton"), ("disable_batch_invariant_mode", None),
        ("enable_batch_invariant_mode", "triton")]
    expected_ieee = "ieee" if mode == "megatron_triton_ieee" else None
    assert r["observed"]["env_seen"]["TRITON_F32_DEFAULT"] == expected_ieee


def test_megatron_main_te_native(tmp_path):
    r = drive("megatron_te_native", ["megatron_main"], tmp_path)
    assert r["path"] == f"{MEGATRON}.enable_batch_invariant_mode(backend='te_native')"
    assert r["notes"]["backend"] == "te_native"
    assert r["observed"]["env_seen"]["CUBLASLT_WORKSPACE_SIZE"] == "0"
    assert r["observed"]["aten_overrides"] == []  # te_native overrides no aten op
    assert r["has_off"] and r["observed"]["reference_mode_off"] is True
    assert r["calls"][0]["args"] == {"backend": "te_native", "collective": "ordered"}


def test_megatron_revision_without_te_native_refuses_it_itself(tmp_path):
    r = drive("megatron_te_native", ["megatron_main"], tmp_path, {"ADALN_STANDIN_MEGATRON_BACKENDS": "deepgemm,triton"})
    assert r["error"] == "ValueError"
    assert "'te_native'" in r["message"]


def test_megatron_016_triton_calls_without_argument(tmp_path):
    r = drive("megatron_triton", ["megatron_016"], tmp_path)
    assert r["path"] == f"{MEGATRON}.enable_batch_invariant_mode()"
    assert r["library_version"] == "0.16.1"
    assert r["observed"]["aten_overrides"] == MEGATRON_TRITON_OVERRIDES
    assert r["overrides_after_off"] == []


def test_megatron_016_te_native_is_unavailable_with_the_reason(tmp_path):
    r = drive("megatron_te_native", ["megatron_016"], tmp_path)
    assert r["error"] == "BackendUnsupported"
    assert "megatron-core 0.16.1" in r["message"]
    assert "takes no backend argument (Triton only)" in r["message"]
    assert "'te_native' needs Megatron main" in r["message"]
    assert r["calls"] == []  # refused before anything was switched


def _git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    argv = ["git", "-c", "commit.gpgsign=false", *args]
    return subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_megatron_source_checkout_wins_over_installed_and_records_its_commit(tmp_path):
    src = tmp_path / "Megatron-LM"
    shutil.copytree(STANDINS / "megatron_main", src)
    _git("init", "-q", cwd=src)
    _git("add", ".", cwd=src)
    _git("commit", "-q", "-m", "stand-in", cwd=src)
    commit = _git("rev-parse", "--short", "HEAD", cwd=src)
    # megatron-core 0.16 "installed" (on PYTHONPATH); the checkout must be the one imported
    r = drive("megatron_te_native", ["megatron_016"], tmp_path, megatron_src=src)
    assert r["path"] == f"{MEGATRON}.enable_batch_invariant_mode(backend='te_native')"
    assert r["library_version"] == "0.18.0rc0"
    assert r["notes"]["megatron_source_commit"] == commit
    assert r["notes"]["megatron_source"] == str(src.resolve())
    assert r["notes"]["module_file"].startswith(str(src.resolve()))


def test_megatron_source_that_is_not_a_git_checkout_has_no_commit(tmp_path):
    src = tmp_path / "megatron-copy"
    shutil.copytree(STANDINS / "megatron_main", src)
    r = drive("megatron_triton", [], tmp_path, megatron_src=src)
    assert r["library_version"] == "0.18.0rc0"
    assert "megatron_source_commit" in r["notes"] and r["notes"]["megatron_source_commit"] is None


def test_megatron_source_without_megatron_is_refused(tmp_path):
    empty = tmp_path / "not-megatron"
    empty.mkdir()
    r = drive("megatron_triton", ["megatron_016"], tmp_path, megatron_src=empty)
    assert r["error"] == "ModuleNotFoundError"
    assert f"--megatron-src {empty.resolve()} has no {MEGATRON}" in r["message"]


def test_megatron_source_that_does_not_exist(tmp_path):
    r = drive("megatron_triton", [], tmp_path, megatron_src=tmp_path / "nowhere")
    assert r["error"] == "FileNotFoundError"


STAGED_COMMIT = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"
KERNELS = "megatron/core/transformer/custom_layers/batch_invariant_kernels.py"


def make_staging(root: Path, tamper: bool = False) -> Path:
    """A staging laid out as tools/stage_megatron.py install leaves it: stand-ins as the staged trees."""
    shutil.copytree(STANDINS / "megatron_main", root / "megatron-lm")
    shutil.copytree(STANDINS / "megatron_016", root / "mcore")
    files = {f"{tree}/{KERNELS}": {"sha256": sha256_of(root / tree / KERNELS), "origin": origin}
             for tree, origin in (("megatron-lm", f"NVIDIA/Megatron-LM {STAGED_COMMIT}:megatron"),
                                  ("mcore", "megatron_core-0.19.2-cp312-cp312-manylinux_2_28_x86_64.whl"))}
    if tamper:
        files[f"megatron-lm/{KERNELS}"]["sha256"] = "0" * 64
    provenance = {"packages": {"megatron-core": "0.19.2", "transformer-engine": "2.20.2"},
                  "core_libraries": {"transformer_engine/wheel_lib/libtransformer_engine.so": {
                      "record_sha256": "bb1a41de" + "0" * 56, "reduced_sha256": "982208c4" + "0" * 56,
                      "method": "payloads of other architectures zeroed"}},
                  "megatron_lm": {"repo": "NVIDIA/Megatron-LM", "commit": STAGED_COMMIT}}
    manifest = {"format": 1, "files": files, "provenance": provenance,
                "megatron_lm": {"commit": STAGED_COMMIT, "path": "megatron-lm"}}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root / "manifest.json"


def test_a_staged_megatron_lm_tree_records_the_manifest_commit_and_provenance(tmp_path):
    manifest = make_staging(tmp_path / "stage")
    r = drive("megatron_te_native", [], tmp_path, {"ADALN_BENCH_STAGING_MANIFEST": str(manifest)},
              megatron_src=tmp_path / "stage" / "megatron-lm")
    assert r["path"] == f"{MEGATRON}.enable_batch_invariant_mode(backend='te_native')"
    notes = r["notes"]
    assert notes["megatron_source_commit"] == STAGED_COMMIT  # the tree has no .git: the manifest says which
    assert notes["staging_manifest"] == str(manifest.resolve())
    assert json.loads(notes["staging"])["core_libraries"]["transformer_engine/wheel_lib/libtransformer_engine.so"][
        "record_sha256"].startswith("bb1a41de")
    assert notes["staging_module"] == (f"megatron-lm/{KERNELS} matches the manifest "
                                       f"(NVIDIA/Megatron-LM {STAGED_COMMIT}:megatron)")


def test_the_staged_release_is_checked_but_has_no_source_commit(tmp_path):
    manifest = make_staging(tmp_path / "stage")
    env = {"ADALN_BENCH_STAGING_MANIFEST": str(manifest)}
    r = drive("megatron_triton", [], tmp_path, {**env, "PYTHONPATH": os.pathsep.join(
        [str(tmp_path / "stage" / "mcore"), str(STANDINS / "support"), str(REPO)])})
    assert r["path"] == f"{MEGATRON}.enable_batch_invariant_mode()"
    assert "megatron_source_commit" not in r["notes"]
    assert r["notes"]["staging_module"].startswith(f"mcore/{KERNELS} matches the manifest (megatron_core-0.19.2")


def test_a_source_tree_outside_the_staging_keeps_its_own_commit(tmp_path):
    manifest = make_staging(tmp_path / "stage", tamper=True)
    other = tmp_path / "elsewhere"
    shutil.copytree(STANDINS / "megatron_main", other)
    r = drive("megatron_triton", [], tmp_path, {"ADALN_BENCH_STAGING_MANIFEST": str(manifest)}, megatron_src=other)
    assert r["notes"]["megatron_source_commit"] is None  # not the staged tree: the manifest's commit is not its
    assert r["notes"]["staging_module"].startswith("not staged: ")
    r = drive("megatron_triton", [], tmp_path, {"ADALN_BENCH_STAGING_MANIFEST": str(manifest)},
              megatron_src=tmp_path / "stage" / "megatron-lm")
    assert r["notes"]["staging_module"].startswith(f"megatron-lm/{KERNELS} DIFFERS from the manifest")


def test_a_staging_variable_without_a_manifest_makes_the_mode_unavailable(tmp_path):
    r = drive("megatron_triton", ["megatron_main"], tmp_path,
              {"ADALN_BENCH_STAGING_MANIFEST": str(tmp_path / "missing.json")})
    assert r["error"] == "FileNotFoundError"
    assert r["message"].startswith(f"ADALN_BENCH_STAGING_MANIFEST={tmp_path / 'missing.json'}: no readable")
    assert r["calls"] == []  # refused before anything was switched


# --- every framework mode: a missing library, a switch that raises -----------------------------------

MISSING = {
    "vllm": ("vllm", "vllm is not installed (no module named 'vllm')"),
    "sglang": ("sglang", "sglang is not installed (no module named 'sglang')"),
    "sglang_ieee": ("sglang", "sglang is not installed (no module named 'sglang')"),
    "megatron_te_native": ("megatron.core", "megatron-core is not installed (no module named 'megatron.core')"),
    "megatron_triton": ("megatron.core", "megatron-core is not installed (no module named 'megatron.core')"),
    "megatron_triton_ieee": ("megatron.core", "megatron-core is not installed (no module named 'megatron.core')"),
}


@pytest.mark.parametrize("mode", sorted(MISSING))
def test_missing_library_raises_module_not_found_naming_it(tmp_path, mode):
    r = drive(mode, [], tmp_path)
    assert (r["error"], r["exc_name"], r["message"]) == ("ModuleNotFoundError", *MISSING[mode])


RAISING = {
    "vllm": (["vllm_new"], "vllm"),
    "sglang": (["sglang"], "sglang"),
    "megatron_triton": (["megatron_main"], "megatron-core"),
    "megatron_te_native": (["megatron_main"], "megatron-core"),
}


@pytest.mark.parametrize("mode", sorted(RAISING))
def test_a_raising_switch_propagates(tmp_path, mode):
    standins, library = RAISING[mode]
    r = drive(mode, standins, tmp_path, {"ADALN_STANDIN_FAIL": library})
    assert r["error"] == "StandinSwitchError"
    assert r["message"] == f"{library} stand-in: switch-on failed as asked by ADALN_STANDIN_FAIL"


def test_every_framework_mode_of_the_spec_is_registered():
    modes = all_modes()
    expected_env = {
        "vllm": {"CUBLAS_WORKSPACE_CONFIG": ":16:8", "CUBLASLT_WORKSPACE_SIZE": "1"},
        "sglang": {},
        "sglang_ieee": {"TRITON_F32_DEFAULT": "ieee"},
        "megatron_te_native": {"CUBLASLT_WORKSPACE_SIZE": "0"},
        "megatron_triton": {},
        "megatron_triton_ieee": {"TRITON_F32_DEFAULT": "ieee"},
    }
    assert {name: dict(modes[name].env) for name in expected_env} == expected_env
    assert all(modes[name].kind == "framework" and modes[name].enable is not None for name in expected_env)


# --- end to end: the CLI, its parent runner and the mode children -----------------------------------


@pytest.mark.slow
def test_run_through_the_harness_records_what_each_mode_did(tmp_path):
    """SGLang and vLLM stand-ins are importable, Megatron is not: the report says so mode by mode."""
    out = tmp_path / "report.json"
    env = child_env("plain", ["sglang", "vllm_new"])
    argv = [sys.executable, "-m", "adaln_bench", "run", "--device", "cpu", "--preset", "tiny", "--quick",
            "--mode", "sglang", "--mode", "vllm", "--mode", "megatron_triton", "--mode", "plain",
            "--candidate", "diffusers", "--out", str(out), "--quiet", "--no-cold-start"]
    proc = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr

    from adaln_bench.datamodel.io import read_report
    from adaln_bench.datamodel.schema import CandidateResult, CandidateUnavailable

    report = read_report(out)
    assert list(report.results) == ["sglang", "vllm", "megatron_triton", "plain"]

    sglang = report.modes["sglang"]
    assert sglang.status == "ok"
    assert sglang.observed.aten_overrides == SGLANG_OVERRIDES
    assert sglang.observed.switch_path == f"{SGLANG}.enable_batch_invariant_mode()"
    assert (sglang.observed.library, sglang.observed.library_version) == ("sglang", "0.5.23")
    assert sglang.observed.reference_mode_off is True
    assert sglang.observed.env_seen["TRITON_F32_DEFAULT"] is None
    assert sglang.observed.matmul_path == "triton_persistent"
    assert report.environment.sglang_matmul_path == "triton_persistent"
    assert sglang.observed.module_sha256 == sha256_of(Path(sglang.observed.module_file))
    measured = report.results["sglang"]["diffusers[sglang]"]
    assert isinstance(measured, CandidateResult)
    # the stand-in's mm sums each row's products by itself, so the measurement ran through the override
    assert measured.batch_invariance.batch_invariant is True

    vllm = report.modes["vllm"]
    assert vllm.status == "ok"
    assert vllm.observed.switch_path == f"{VLLM_NEW}.enable_batch_invariant_mode()"
    assert vllm.observed.env_seen["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
    assert vllm.observed.env_seen["CUBLASLT_WORKSPACE_SIZE"] == "1"
    assert vllm.observed.bf16_reduced_precision_reduction is False
    assert vllm.observed.reference_mode_off is False
    assert vllm.observed.module_file.endswith("determinism/batch_invariant.py")
    assert vllm.observed.module_sha256 == sha256_of(Path(vllm.observed.module_file))
    assert isinstance(report.results["vllm"]["diffusers[vllm]"], CandidateResult)

    megatron = report.modes["megatron_triton"]
    assert megatron.status == "unavailable"
    assert megatron.reason == (
        "ModuleNotFoundError: megatron-core is not installed (no module named 'megatron.core')")
    assert isinstance(report.results["megatron_triton"]["diffusers[megatron_triton]"], CandidateUnavailable)

    plain = report.modes["plain"]
    assert plain.status == "ok" and plain.observed.aten_overrides == []
    assert plain.observed.module_file is None and plain.observed.module_sha256 is None
    assert isinstance(report.results["plain"]["diffusers[plain]"], CandidateResult)
