"""Per-mode environments and input fingerprints in a report: what `report` shows and `diff` lists; the envs file."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from conftest import REFERENCE, run_main

from adaln_bench.envs.file import choose_interpreters
from adaln_bench.envs.build import EnvPlan, env_python
from adaln_bench.envs.file import EnvsFile, parse_python_options, read_envs_file, write_envs_file
from adaln_bench.modes.frameworks import FRAMEWORKS, merge_pins, modes_of, parse_pin
from adaln_bench.errors import UserError
from adaln_bench.modes.registry import all_modes
from adaln_bench.reports.diff import diff_reports
from adaln_bench.datamodel.mode_environments import environment_differences, modes_with_other_inputs
from adaln_bench.reports.render import markdown
from adaln_bench.datamodel.schema import Report

PARENT = "/opt/main/bin/python"
VLLM_ENV = "/opt/envs/vllm/bin/python"


def inputs(temb: str = "t" * 64) -> dict:
    return {"seed": 3, "rows": 257, "temb_sha256": temb, "weight_sha256": "w" * 64, "bias_sha256": "b" * 64,
            "upstream_sha256": "g" * 64, "permutation_sha256": "p" * 64}


def mode_run(interpreter: str, torch: str = "2.13.0", framework: str | None = None, version: str | None = None,
             temb: str = "t" * 64) -> dict:
    return {"status": "ok", "environment": {"interpreter": interpreter, "python": "3.12.3", "torch": torch,
                                            "cuda": "13.0", "framework": framework, "framework_version": version},
            "inputs": inputs(temb)}


def with_modes(runs: dict, parent_torch: str = "2.13.0", vllm_in_parent: str | None = None) -> dict:
    data = json.loads(REFERENCE.read_text(encoding="utf-8"))
    data["environment"].update(interpreter=PARENT, torch=parent_torch, python="3.12.3", cuda="13.0")
    data["environment"]["libraries"]["vllm"] = vllm_in_parent
    data["modes"] = {name: run for name, run in runs.items()}
    return data


def report(data: dict) -> Report:
    return Report.model_validate(data)


def test_environment_differences_show_only_what_differs_from_the_parent():
    data = with_modes({"plain": mode_run(PARENT),
                       "vllm": mode_run(VLLM_ENV, torch="2.14.0", framework="vllm", version="0.33.0"),
                       "sglang": {"status": "unavailable", "reason": "interpreter /x: no such file",
                                  "environment": {"interpreter": "/x"}}})
    diffs = environment_differences(report(data))
    assert diffs == {
        "vllm": [("interpreter", PARENT, VLLM_ENV), ("torch", "2.13.0", "2.14.0"), ("framework_version", None, "0.33.0")],
        "sglang": [("interpreter", PARENT, "/x")],
    }
    text = markdown(report(data))
    assert (f"- mode vllm environment: interpreter {VLLM_ENV} (parent: {PARENT}); torch 2.14.0 (parent: 2.13.0); "
            "vllm 0.33.0 (parent: —)") in text
    assert "mode plain" not in text
    assert "seeded inputs differ" not in text


def test_modes_with_other_inputs_are_flagged_against_the_parents_modes():
    runs = {"plain": mode_run(PARENT), "cublaslt_ws1": mode_run(PARENT),
            "vllm": mode_run(VLLM_ENV, temb="x" * 64), "sglang": mode_run("/opt/envs/sglang/bin/python")}
    data = with_modes(runs)
    r = report(data)
    assert modes_with_other_inputs(r.modes, PARENT) == ["vllm"]
    assert "**WARNING: seeded inputs differ from the parent environment's in mode(s) vllm:" in markdown(r)
    # With no mode under the parent's interpreter, the most common fingerprint is the reference.
    assert modes_with_other_inputs(r.modes, "/elsewhere/python") == ["vllm"]
    # Fingerprints recorded nowhere: nothing to say.
    for run in data["modes"].values():
        del run["inputs"]
    assert modes_with_other_inputs(report(data).modes, PARENT) is None


def test_report_command_shows_environments_and_the_input_warning(tmp_path, capsys):
    data = with_modes({"plain": mode_run(PARENT), "vllm": mode_run(VLLM_ENV, torch="2.14.0", temb="x" * 64)})
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    code, out, err = run_main(["report", str(path)], capsys)
    assert code == 0, err
    assert "mode vllm environment: interpreter /opt/envs/vllm/bin/python" in out
    assert "torch 2.14.0 (parent: 2.13.0)" in out
    assert "WARNING: seeded inputs differ from the parent environment's in mode(s) vllm" in out


def _config(old: dict, new: dict) -> dict:
    result = diff_reports(report(old), report(new), allow_quick_mismatch=True)
    return {d.field: (d.old, d.new) for d in result.config}


def test_diff_lists_per_mode_environment_changes_but_not_the_parents_twice():
    old = with_modes({"plain": mode_run(PARENT), "vllm": mode_run(VLLM_ENV, framework="vllm", version="0.30.0")})
    new = with_modes({"plain": mode_run(PARENT, torch="2.14.0"),
                      "vllm": mode_run(VLLM_ENV, torch="2.14.1", framework="vllm", version="0.33.0",
                                       temb="x" * 64)}, parent_torch="2.14.0")
    config = _config(old, new)
    assert config["torch"] == ("2.13.0", "2.14.0")
    assert "modes.plain.environment.torch" not in config  # the parent's change, listed once as `torch`
    assert config["modes.vllm.environment.torch"] == ("2.13.0", "2.14.1")
    assert config["modes.vllm.environment.framework_version"] == ("0.30.0", "0.33.0")
    assert config["modes.vllm.inputs"][0].startswith("temb tttttttt") and config["modes.vllm.inputs"][1].startswith("temb xxxxxxxx")
    assert not any(key.startswith("modes.plain") for key in config)
    # The same report against itself: no environment difference at all.
    assert not any(key.startswith("modes.") for key in _config(new, copy.deepcopy(new)))


def test_envs_file_round_trip_relative_paths_and_mistakes(tmp_path):
    path = tmp_path / "envs" / "envs.toml"
    path.parent.mkdir()
    envs = EnvsFile(python={"vllm": str(tmp_path / "envs" / "vllm" / "bin" / "python"), "sglang": "/abs/python"},
                    pins={"vllm": ["vllm==0.33.0"], "megatron": ["megatron-core==0.16.0", "torch==2.13.0"]})
    write_envs_file(path, envs, header=["test"])
    text = path.read_text()
    assert 'vllm = "vllm/bin/python"' in text  # under the file's folder: written relative to it
    assert read_envs_file(path) == envs
    bad = tmp_path / "bad.toml"
    bad.write_text('[pyhton]\nvllm = "x"\n')
    with pytest.raises(UserError, match=r"unknown table \[pyhton\]"):
        read_envs_file(bad)
    bad.write_text('[python]\nvllm = 3\n')
    with pytest.raises(UserError, match="must be an interpreter path"):
        read_envs_file(bad)


def test_python_options_override_the_envs_file_and_unknown_modes_are_refused(tmp_path):
    path = tmp_path / "envs.toml"
    path.write_text('[python]\nvllm = "a/bin/python"\nsglang = "b/bin/python"\n')
    modes = [m for name, m in all_modes().items() if name in ("plain", "vllm", "sglang")]
    typed = tmp_path / "c" / "bin" / "python"
    typed.parent.mkdir(parents=True)
    typed.write_text("#!/bin/sh\n")
    typed.chmod(0o755)
    chosen = choose_interpreters([f"sglang={typed}"], path, modes, None)
    assert chosen == {"vllm": str(tmp_path / "a" / "bin" / "python"), "sglang": str(typed)}
    # A typed interpreter that is not there is bad input; the envs file's `a/bin/python` (not built) is not.
    with pytest.raises(UserError, match=r"^--python vllm=/nonexistent: no such file$"):
        choose_interpreters(["vllm=/nonexistent"], None, modes, None)
    with pytest.raises(UserError, match="not an executable file"):
        choose_interpreters([f"vllm={tmp_path}"], None, modes, None)
    plain = [m for m in modes if m.name == "plain"]
    assert choose_interpreters(["vllm=/nonexistent"], None, plain, None) == {}  # a mode not run is not checked
    only_plain = [m for m in modes if m.name == "plain"]
    assert choose_interpreters([], path, only_plain, None) == {}  # modes not run need no interpreter
    with pytest.raises(UserError, match="unknown mode 'vlm'"):
        choose_interpreters(["vlm=/x"], None, modes, None)
    with pytest.raises(UserError, match="MODE=INTERPRETER"):
        parse_python_options(["vllm"])


def test_pins_and_framework_modes():
    assert parse_pin("vllm==0.33.0") == ("vllm", "vllm==0.33.0")
    assert parse_pin("transformer_engine>=2.20") == ("megatron", "transformer_engine>=2.20")
    assert parse_pin("megatron=torch==2.13.0") == ("megatron", "torch==2.13.0")
    assert parse_pin("vllm=./wheels/vllm.whl") == ("vllm", "./wheels/vllm.whl")
    with pytest.raises(UserError, match="FRAMEWORK=REQUIREMENT"):
        parse_pin("torch==2.13.0")
    assert merge_pins(["vllm==0.30.0", "torch==2.13.0"], ["vllm==0.33.0"]) == ["torch==2.13.0", "vllm==0.33.0"]
    assert {name: modes_of(fw) for name, fw in FRAMEWORKS.items()} == {
        "vllm": ["vllm"], "sglang": ["sglang", "sglang_ieee"],
        "megatron": ["megatron_te_native", "megatron_triton", "megatron_triton_ieee"]}


def test_installer_commands(tmp_path):
    fw = FRAMEWORKS["sglang"]
    common = dict(framework=fw, path=tmp_path / "sglang", requirements=["sglang==0.5.23"],
                  extras=["sglang", "diffusers"], checkout=Path("/src"), base_python="/usr/bin/python3")
    uv = EnvPlan(installer="uv", **common).commands()
    assert uv == [["uv", "venv", "--python", "/usr/bin/python3", str(tmp_path / "sglang")],
                  ["uv", "pip", "install", "--python", str(env_python(tmp_path / "sglang")), "-e",
                   "/src[sglang,diffusers]", "sglang==0.5.23"]]
    pip = EnvPlan(installer="pip", system_site_packages=True, install_args=["--no-index"], **common).commands()
    assert pip[0] == ["/usr/bin/python3", "-m", "venv", "--without-pip", "--system-site-packages",
                      str(tmp_path / "sglang")]
    assert pip[1][:5] == ["/usr/bin/python3", "-m", "pip", "--python", str(env_python(tmp_path / "sglang"))]
    assert pip[1][-4:] == ["-e", "/src[sglang,diffusers]", "sglang==0.5.23", "--no-index"]
