"""tools/import_layers.py: the package has no circle of imports and no import up a layer, and the check
finds each kind of problem in a package made to have it."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import import_layers as L  # noqa: E402


def test_the_package_has_no_circle_and_no_import_up_a_layer():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "import_layers.py")], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no circle, no import up a layer" in proc.stdout


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    pkg = tmp_path / "adaln_bench"
    for name, text in {"__init__.py": "", **files}.items():
        path = pkg / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return pkg


LAYERS = [("base", ("", "errors")), ("middle", ("ops",)), ("top", ("reports",))]


def test_an_import_up_a_layer_is_found_even_inside_a_function(tmp_path):
    pkg = _package(tmp_path, {
        "errors.py": "",
        "ops/__init__.py": "",
        "ops/a.py": "def f():\n    from adaln_bench.reports import render\n",
        "reports/__init__.py": "",
        "reports/render.py": "from adaln_bench.ops import a\n",
    })
    found = L.problems(L.import_graph(pkg), LAYERS, {})
    assert "adaln_bench/ops/a.py:2: imports adaln_bench.reports.render, up from layer 'middle' to 'top'" in found
    assert "circle of files: adaln_bench.ops.a <-> adaln_bench.reports.render" in found
    assert "circle of packages: ops <-> reports" in found


def test_relative_imports_and_literal_import_module_count(tmp_path):
    pkg = _package(tmp_path, {
        "errors.py": "import importlib\nimportlib.import_module('adaln_bench.ops.b')\n",
        "ops/__init__.py": "",
        "ops/a.py": "from . import b\n",
        "ops/b.py": "from .a import x\n",
    })
    found = L.problems(L.import_graph(pkg), LAYERS, {})
    assert "adaln_bench/errors.py:2: imports adaln_bench.ops.b, up from layer 'base' to 'middle'" in found
    assert "circle of files: adaln_bench.ops.a <-> adaln_bench.ops.b" in found


def test_a_module_in_no_layer_and_a_known_circle_that_is_gone_are_problems(tmp_path):
    pkg = _package(tmp_path, {"errors.py": "", "extra.py": ""})
    found = L.problems(L.import_graph(pkg), LAYERS, {frozenset({"ops.a", "ops.b"}): "other work"})
    assert "adaln_bench.extra: in no layer (declare it in LAYERS)" in found
    assert any(line.startswith("known circle gone (other work)") for line in found)


def test_an_old_module_path_counts_as_the_module_it_now_is(tmp_path):
    pkg = _package(tmp_path, {
        "errors.py": "",
        "moved_modules.py": "MOVED: dict[str, str] = {'adaln_bench.errors_old': 'adaln_bench.reports.render'}\n",
        "ops/__init__.py": "",
        "ops/a.py": "import adaln_bench.errors_old\n",
        "reports/__init__.py": "",
        "reports/render.py": "",
    })
    layers = [("base", ("", "errors", "moved_modules")), *LAYERS[1:]]
    assert L.problems(L.import_graph(pkg), layers, {}) == [
        "adaln_bench/ops/a.py:1: imports adaln_bench.reports.render, up from layer 'middle' to 'top'"]


@pytest.mark.parametrize("argv, code", [(["--layers"], 0), (["--package", "/nonexistent"], 2)])
def test_the_command_lists_its_layers_and_refuses_a_folder_that_is_no_package(argv, code, capsys):
    assert L.main(argv) == code
    out, err = capsys.readouterr()
    if code == 0:
        assert out.splitlines()[0].startswith("0  base: (the package's __init__)")
    else:
        assert err.strip() == "import_layers: /nonexistent is not a package folder (no __init__.py)"
