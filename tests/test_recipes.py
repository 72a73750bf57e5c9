"""Recipe modes: the built-in cublaslt_ws1 and a user's TOML file, checked and then run in a child."""
import json

import pytest

from adaln_bench.errors import UserError
from adaln_bench.modes.recipe_file import load_recipe_file
from adaln_bench.modes.registry import all_modes
from conftest import run_cli_forked

GOOD = """
[recipes.ws16_nored]
description = "cuBLAS 16 KiB x 8 workspace, reduced-precision reductions off"
env = { CUBLAS_WORKSPACE_CONFIG = ":16:8" }
preferred_blas = "cublas"
bf16_reduced_precision_reduction = false
tf32_matmul = false
"""


def test_builtin_recipe_is_registered_with_its_settings():
    mode = all_modes()["cublaslt_ws1"]
    assert mode.kind == "recipe" and dict(mode.env) == {"CUBLASLT_WORKSPACE_SIZE": "1"}
    assert mode.torch_settings.as_dict() == {"preferred_blas": "cublaslt", "bf16_reduced_precision_reduction": False,
                                             "fp16_reduced_precision_reduction": False}


def test_recipe_file_is_read(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text(GOOD)
    (mode,) = load_recipe_file(str(path))
    assert mode.name == "ws16_nored" and mode.kind == "recipe"
    assert dict(mode.env) == {"CUBLAS_WORKSPACE_CONFIG": ":16:8"}
    assert mode.torch_settings.as_dict() == {"preferred_blas": "cublas", "bf16_reduced_precision_reduction": False,
                                             "tf32_matmul": False}


@pytest.mark.parametrize("text, message", [
    ("[recipes.x]\nspeed = true\n", "unknown keys ['speed']"),
    ("[recipes.x]\npreferred_blas = 'magma'\n", "preferred_blas must be"),
    ("[recipes.x]\ntf32_matmul = 'yes'\n", "tf32_matmul must be true or false"),
    ("[recipes.x]\nenv = 3\n", "env must be a table"),
    ("title = 'no recipes'\n", "no [recipes.<name>] tables"),
    ("[recipes.x\n", "not valid TOML"),
])
def test_bad_recipe_files_are_user_errors(tmp_path, text, message):
    path = tmp_path / "r.toml"
    path.write_text(text)
    with pytest.raises(UserError) as info:
        load_recipe_file(str(path))
    assert message in str(info.value)


def test_recipe_name_clash_and_missing_file(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text("[recipes.plain]\n")
    with pytest.raises(UserError, match="already exists"):
        all_modes(str(path))
    with pytest.raises(UserError, match="no such file"):
        load_recipe_file(str(tmp_path / "absent.toml"))


@pytest.mark.slow
def test_a_user_recipe_runs_in_its_own_child_with_its_environment(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text(GOOD)
    out = tmp_path / "report.json"
    proc = run_cli_forked("run", "--device", "cpu", "--preset", "tiny", "--quick", "--quiet", "--modes-file", str(path),
                   "--mode", "ws16_nored", "--no-cold-start", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    observed = report["modes"]["ws16_nored"]["observed"]
    assert observed["env_seen"]["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
    assert observed["bf16_reduced_precision_reduction"] is False and observed["tf32_matmul"] is False
    assert report["environment"]["mode_environment"] == {"ws16_nored": {"CUBLAS_WORKSPACE_CONFIG": ":16:8"}}
    assert "batch_invariance" in report["results"]["ws16_nored"]["diffusers[ws16_nored]"]
