"""The preflight check of another interpreter: it must exist and import this very adaln_bench."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from envhelpers import ROOT, add_pth, different_copy, make_venv, put_first

from adaln_bench.harness.processes.interpreters import (
    check_interpreter,
    is_this_interpreter,
    package_source_sha256,
    resolve_interpreter,
    this_identity,
)


def _env(pythonpath: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def test_source_hash_follows_every_source_file_and_nothing_else(tmp_path):
    pkg = tmp_path / "adaln_bench"
    shutil.copytree(ROOT / "adaln_bench", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    original = package_source_sha256(str(pkg))
    assert original == package_source_sha256(str(ROOT / "adaln_bench"))
    (pkg / "__pycache__").mkdir(exist_ok=True)
    (pkg / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"compiled")
    (pkg / "notes.txt").write_text("not source")
    assert package_source_sha256(str(pkg)) == original
    kernel = pkg / "kernels" / "bundled" / "sm90_fwd.cu"
    kernel.write_bytes(kernel.read_bytes() + b" ")
    assert package_source_sha256(str(pkg)) != original
    kernel.write_bytes(kernel.read_bytes()[:-1])
    (pkg / "harness" / "measurement" / "plan.py").rename(pkg / "harness" / "measurement" / "plan2.py")  # a rename is a change too
    assert package_source_sha256(str(pkg)) != original


def test_this_interpreter_passes(tmp_path):
    assert check_interpreter(sys.executable, _env(str(ROOT)), this_identity(), cwd=str(tmp_path)) is None


def test_a_venv_that_imports_this_checkout_passes(tmp_path):
    python = make_venv(tmp_path / "env")
    add_pth(tmp_path / "env", "checkout", [str(ROOT)])
    assert not is_this_interpreter(str(python))
    assert check_interpreter(str(python), _env(None), this_identity(), cwd=str(tmp_path)) is None


def test_missing_and_not_executable(tmp_path):
    identity = this_identity()
    missing = tmp_path / "nope" / "python"
    assert check_interpreter(str(missing), _env(str(ROOT)), identity) == f"interpreter {missing}: no such file"
    assert check_interpreter(str(tmp_path), _env(str(ROOT)), identity) == \
        f"interpreter {tmp_path}: not an executable file"


def test_an_environment_without_adaln_bench(tmp_path):
    python = make_venv(tmp_path / "bare", system_site_packages=False)
    reason = check_interpreter(str(python), _env(None), this_identity(), cwd=str(tmp_path))
    assert reason == (f"interpreter {python}: does not import adaln_bench "
                      "(ModuleNotFoundError: No module named 'adaln_bench')")


def test_an_environment_with_adaln_bench_but_without_its_dependencies(tmp_path):
    python = make_venv(tmp_path / "bare", system_site_packages=False)
    reason = check_interpreter(str(python), _env(str(ROOT)), this_identity(), cwd=str(tmp_path))
    assert reason == (f"interpreter {python}: imports adaln_bench but not its dependencies "
                      "(ModuleNotFoundError: No module named 'pydantic')")


def test_a_different_copy_of_the_source_is_refused(tmp_path):
    copy = different_copy(tmp_path / "copy")
    python = make_venv(tmp_path / "env")
    put_first(tmp_path / "env", copy)
    # Even with this checkout on PYTHONPATH, the copy is what that interpreter imports, and the hash says so.
    reason = check_interpreter(str(python), _env(str(ROOT)), this_identity(), cwd=str(tmp_path))
    assert reason is not None and "\n" not in reason
    assert reason.startswith(f"interpreter {python}: imports a different adaln_bench source from "
                             f"{copy / 'adaln_bench'} (source sha256 ")
    assert package_source_sha256(str(copy / "adaln_bench"))[:12] in reason


def test_another_version_is_refused(tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "adaln_bench", copy / "adaln_bench", ignore=shutil.ignore_patterns("__pycache__"))
    init = copy / "adaln_bench" / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', '__version__ = "9.'))
    python = make_venv(tmp_path / "env", system_site_packages=False)
    add_pth(tmp_path / "env", "copy", [str(copy)])
    reason = check_interpreter(str(python), _env(None), this_identity(), cwd=str(tmp_path))
    assert reason is not None
    assert f"imports adaln_bench 9.{this_identity().version} from {copy / 'adaln_bench'}, not this run's" in reason


def test_resolve_interpreter_keeps_links_and_takes_relative_paths_from_a_base(tmp_path):
    python = make_venv(tmp_path / "env", system_site_packages=False)
    assert python.is_symlink()
    assert resolve_interpreter("env/bin/python", tmp_path) == str(python)  # not the link's target
    assert resolve_interpreter(str(python)) == str(python)
    found = shutil.which("python3")
    if found:
        assert resolve_interpreter("python3") == os.path.abspath(found)
