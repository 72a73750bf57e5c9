"""Every mode in one run, each under its own interpreter: `--python`, the preflight check, `envs create/list`.

The second environments are venvs over this interpreter's packages (`--system-site-packages`: torch is not
installed again), with the vLLM stand-in only in them, so the parent's interpreter has no vLLM at all.
"""
from __future__ import annotations

import json
import shutil
import sys

import pytest
from conftest import run_cli, run_cli_forked
from envhelpers import STANDINS, add_pth, different_copy, make_venv, put_first, vllm_standin_package

# The cold-start check has its own tests (test_cold_start.py); skipping it here saves a process per pair.
TINY = ("--device", "cpu", "--quick", "--preset", "tiny", "--candidate", "diffusers", "--quiet", "--no-cold-start")


@pytest.mark.slow
def test_each_mode_runs_under_its_interpreter_and_a_wrong_one_is_a_reason(tmp_path):
    vllm_env = tmp_path / "vllm-env"
    vllm_python = make_venv(vllm_env)
    add_pth(vllm_env, "vllm_standin", [str(STANDINS / "vllm_new"), str(STANDINS / "support")])
    bare_python = make_venv(tmp_path / "bare", system_site_packages=False)  # no torch, no pydantic
    copy_env = tmp_path / "copy-env"
    copy_python = make_venv(copy_env)
    put_first(copy_env, different_copy(tmp_path / "copy"))
    missing = tmp_path / "missing" / "bin" / "python"
    # A missing interpreter in an envs file is that mode's reason (typed with --python it is bad input, exit 2).
    envs_file = tmp_path / "envs.toml"
    envs_file.write_text(f'[python]\nsglang = "{missing}"\n')
    out = tmp_path / "r.json"
    # Run from tmp_path with the checkout on PYTHONPATH, so that the copy's .pth can win in its venv.
    proc = run_cli("run", *TINY, "--mode", "plain", "--mode", "vllm", "--mode", "sglang", "--mode", "sglang_ieee",
                   "--mode", "megatron_triton", "--python", f"vllm={vllm_python}", "--envs-file", str(envs_file),
                   "--python", f"sglang_ieee={bare_python}", "--python", f"megatron_triton={copy_python}",
                   "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    modes = report["modes"]

    assert modes["plain"]["status"] == "ok" and modes["vllm"]["status"] == "ok"
    assert modes["plain"]["environment"]["interpreter"] == sys.executable == report["environment"]["interpreter"]
    assert modes["vllm"]["environment"]["interpreter"] == str(vllm_python)
    assert modes["vllm"]["environment"]["framework"] == "vllm"
    assert modes["vllm"]["environment"]["framework_version"] == "0.33.0"
    assert modes["vllm"]["observed"]["switch_path"] == \
        "vllm.model_executor.determinism.batch_invariant.enable_batch_invariant_mode()"
    assert "batch_invariance" in report["results"]["vllm"]["diffusers[vllm]"]
    # Same torch, same seeds: bitwise the same inputs, so nothing is flagged.
    assert modes["plain"]["inputs"] == modes["vllm"]["inputs"]
    assert report["inputs_differ"] == []

    assert modes["sglang"] == {**modes["sglang"], "status": "unavailable",
                               "reason": f"interpreter {missing}: no such file"}
    assert modes["sglang"]["environment"] == {"interpreter": str(missing)}
    # adaln_bench comes from PYTHONPATH there, but none of what it needs (the other case,
    # no adaln_bench at all, is in test_interpreters.py).
    assert modes["sglang_ieee"]["reason"] == (f"interpreter {bare_python}: imports adaln_bench but not its "
                                              "dependencies (ModuleNotFoundError: No module named 'pydantic')")
    assert modes["megatron_triton"]["status"] == "unavailable"
    assert "imports a different adaln_bench source from" in modes["megatron_triton"]["reason"]
    for name in ("sglang", "sglang_ieee", "megatron_triton"):
        assert "\n" not in modes[name]["reason"]
        (entry,) = report["results"][name].values()
        assert entry["status"] == "unavailable" and modes[name]["reason"] in entry["unavailable"]

    shown = run_cli_forked("report", str(out), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"mode vllm environment: interpreter {vllm_python}" in shown.stdout.replace("\n", "")


@pytest.mark.slow
def test_envs_create_list_and_the_created_environment_runs_its_mode(tmp_path):
    standin = vllm_standin_package(tmp_path / "vllm-standin")
    envs_dir = tmp_path / "envs"
    offline = ("--install-arg=--no-index", "--install-arg=--no-deps", "--install-arg=--no-build-isolation")
    create = ("envs", "create", "vllm", "--dir", str(envs_dir), "--installer", "pip", "--system-site-packages",
              "--pin", f"vllm={standin}", *offline)
    made = run_cli(*create, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "vllm: created" in made.stderr
    envs_file = envs_dir / "envs.toml"
    assert f"envs file: {envs_file}" in made.stdout
    text = envs_file.read_text()
    assert 'vllm = "vllm/bin/python"' in text and f'vllm = ["{standin}"]' in text

    again = run_cli(*create, cwd=tmp_path)  # the same recipe: reused, not rebuilt
    assert again.returncode == 0 and "vllm: reused" in again.stderr

    listed = run_cli("envs", "list", "--dir", str(envs_dir), "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    (env,) = json.loads(listed.stdout)
    assert env["framework"] == "vllm" and env["python"] == str(envs_dir / "vllm" / "bin" / "python")
    assert env["versions"]["vllm"] == "0.33.0" and env["versions"]["torch"]
    assert env["requirements"] == [str(standin)] and env["modes"] == ["vllm"]
    assert env["adaln_bench"] == "same source"

    out = tmp_path / "r.json"
    ran = run_cli("run", *TINY, "--mode", "vllm", "--envs-file", str(envs_file), "--out", str(out), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    vllm = json.loads(out.read_text())["modes"]["vllm"]
    assert vllm["status"] == "ok"
    assert vllm["environment"]["interpreter"] == str(envs_dir / "vllm" / "bin" / "python")
    assert vllm["environment"]["framework_version"] == "0.33.0"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not on PATH (pip install uv)")
def test_envs_create_with_uv_offline(tmp_path):
    standin = vllm_standin_package(tmp_path / "vllm-standin")
    envs_dir = tmp_path / "envs"
    made = run_cli("envs", "create", "vllm", "--dir", str(envs_dir), "--system-site-packages", "--pin",
                   f"vllm={standin}", "--install-arg=--offline", "--install-arg=--no-index",
                   "--install-arg=--no-deps", "--install-arg=--no-build-isolation", cwd=tmp_path,
                   env={"UV_CACHE_DIR": str(tmp_path / "uv-cache")})
    assert made.returncode == 0, made.stderr
    assert "(uv; extras vllm,diffusers" in made.stderr and "vllm: created" in made.stderr
    stamp = json.loads((envs_dir / "vllm" / "adaln-bench-env.json").read_text())
    assert stamp["installer"] == "uv" and stamp["recipe"]["requirements"] == [str(standin)]
    listed = run_cli("envs", "list", "--dir", str(envs_dir), "--json", cwd=tmp_path)
    (env,) = json.loads(listed.stdout)
    assert env["versions"]["vllm"] == "0.33.0" and env["adaln_bench"] == "same source"


def test_a_framework_that_does_not_build_is_left_out_of_the_envs_file(tmp_path):
    envs_dir = tmp_path / "envs"
    made = run_cli("envs", "create", "vllm", "--dir", str(envs_dir), "--installer", "pip", "--system-site-packages",
                   "--pin", f"vllm={tmp_path / 'no-such-project'}", "--install-arg=--no-index",
                   "--install-arg=--no-deps", "--install-arg=--no-build-isolation", cwd=tmp_path)
    assert made.returncode == 1
    assert "vllm: failed: installing into it failed (exit 1)" in made.stderr
    assert "no environment for vllm; its modes run under the parent's interpreter" in made.stderr
    assert not (envs_dir / "vllm").exists()  # half an environment is never left to be reused
    text = (envs_dir / "envs.toml").read_text()
    assert "[python]\n\n[pins]" in text and str(tmp_path / "no-such-project") in text
