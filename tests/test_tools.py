"""tools/: every maintainer tool and device wrapper answers --help, and no module of the tree imports a module
(or a name of one) that does not exist."""
from __future__ import annotations

import ast
import json
import os
import subprocess
from pathlib import Path
from typing import Optional

import pytest

import forked

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools"
WRAPPERS = sorted((TOOLS / "device").glob("*.sh"))
PY_TOOLS = sorted([*TOOLS.glob("*.py"), *(TOOLS / "device").glob("*.py")])


def test_the_device_folder_has_a_readme_naming_every_wrapper_and_tool():
    readme = (TOOLS / "device" / "README.md").read_text(encoding="utf-8")
    for path in [*WRAPPERS, *(TOOLS / "device").glob("*.py")]:
        assert f"`{path.name}`" in readme, f"tools/device/README.md does not describe {path.name}"


@pytest.mark.parametrize("script", WRAPPERS, ids=lambda p: p.name)
def test_each_device_wrapper_answers_help_without_running_anything(script, tmp_path):
    # OUT points at an empty folder: a wrapper that went past --help would write there.
    proc = subprocess.run(["bash", str(script), "--help"], cwd=ROOT, capture_output=True, text=True, timeout=30,
                          env={**os.environ, "OUT": str(tmp_path / "out")})
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) >= 2 and not proc.stdout.startswith("#")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("script", PY_TOOLS, ids=lambda p: p.relative_to(TOOLS).as_posix())
def test_each_python_tool_answers_help(script):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = forked.run("script", str(script), ["--help"], env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()


# --- imports that resolve ------------------------------------------------------------------------------------

# First-party packages and the folder each is imported from: tools/*.py put tools/ on sys.path for `slim`.
PACKAGES = {"adaln_bench": ROOT, "slim": TOOLS, "tests": ROOT}


def module_file(name: str) -> Optional[Path]:
    top, *rest = name.split(".")
    path = PACKAGES[top].joinpath(top, *rest)
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return None


def defined_names(path: Path) -> Optional[set[str]]:
    """The names a module defines at its top level (or in if/try blocks there); None when it cannot be told
    (a star import or a module __getattr__)."""
    names: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))

    def visit(body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    if alias.name == "*":
                        return False
                    names.add(alias.asname or alias.name.split(".")[0])
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for part in (node.body, getattr(node, "orelse", []), getattr(node, "finalbody", []),
                             *[h.body for h in getattr(node, "handlers", [])]):
                    if visit(part) is False:
                        return False
        return True

    if visit(tree.body) is False or "__getattr__" in names:
        return None
    return names


def first_party_imports(path: Path):
    """(line, module, name or None) of each import of a first-party module in a file, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = None  # the package a relative import is relative to
    for top, base in PACKAGES.items():
        if base / top in path.parents:
            package = ".".join(path.relative_to(base).parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PACKAGES:
                    yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = (package or "").split(".")
                module = ".".join(parts[:len(parts) - node.level + 1] + ([module] if module else []))
            if module.split(".")[0] in PACKAGES:
                for alias in node.names:
                    yield node.lineno, module, alias.name


def test_no_module_imports_a_module_or_name_that_does_not_exist():
    files = sorted([*(ROOT / "adaln_bench").rglob("*.py"), *TOOLS.rglob("*.py")])
    assert len(files) > 100
    missing = []
    for path in files:
        for line, module, name in first_party_imports(path):
            where = f"{path.relative_to(ROOT)}:{line}"
            target = module_file(module)
            if target is None:
                missing.append(f"{where}: no module {module}")
                continue
            if name is None or name == "*" or module_file(f"{module}.{name}") is not None:
                continue
            names = defined_names(target)
            if names is not None and name not in names:
                missing.append(f"{where}: {module} has no {name}")
    assert missing == []


def test_the_import_check_finds_a_module_that_is_gone(tmp_path):
    gone = tmp_path / "gone.py"
    gone.write_text("from adaln_bench.harness.inputs import make_params\nfrom adaln_bench.errors import NoSuchError\n")
    found = list(first_party_imports(gone))
    assert [(m, n) for _, m, n in found] == [("adaln_bench.harness.inputs", "make_params"),
                                             ("adaln_bench.errors", "NoSuchError")]
    assert module_file("adaln_bench.harness.inputs") is None
    assert "NoSuchError" not in defined_names(module_file("adaln_bench.errors"))


def test_no_notes_or_docs_are_shipped_as_package_data():
    from adaln_bench.toml_file import read_toml

    data = read_toml(ROOT / "pyproject.toml")
    patterns = [p for pats in data["tool"]["setuptools"]["package-data"].values() for p in pats]
    assert patterns and not [p for p in patterns if p.endswith((".md", ".txt", ".rst"))]


def test_run_time_splits_a_step_trace_into_exclusive_shared_only_and_idle_seconds():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "tools/device/run_time.py"
    spec = importlib.util.spec_from_file_location("run_time", path)
    run_time = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_time)

    def step(start, end, exclusive=False):
        return {"start": start, "end": end, "exclusive": exclusive}

    # 0-4: two shared steps, then one (6 process-s); 4-5 idle; 5-7 latency; 7-8 one shared step (1 process-s).
    t = run_time.timeline([step(0, 4), step(0, 2), step(5, 7, True), step(7, 8)])
    assert (t["span_s"], t["exclusive_s"], t["shared_only_s"], t["idle_s"]) == (8, 2, 5, 1)
    assert t["shared_overlap"] == (4 + 2 + 1) / 5
    assert run_time.timeline([])["span_s"] == 0.0


def _device_tool(name: str):
    import importlib.util

    path = Path(__file__).resolve().parents[1] / f"tools/device/{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_run_time_gives_the_gpus_utilization_while_each_kind_of_step_ran(tmp_path, capsys):
    import lzma

    run_time, gpu_util = _device_tool("run_time"), _device_tool("gpu_util")

    def step(start, end, exclusive=False):
        return {"start": start, "end": end, "exclusive": exclusive}

    steps = [step(0, 4), step(0, 2), step(5, 7, True), step(7, 8)]
    assert run_time.kinds_at(steps, [-1, 1, 4.5, 6, 7.5, 9]) == ["idle", "shared", "idle", "exclusive", "shared",
                                                                "idle"]
    got = run_time.utilization(steps, [(6, 90.0), (1, 30.0), (3, 50.0), (4.5, 0.0)])
    assert got == {"shared": {"mean_pct": 40.0, "samples": 2}, "exclusive": {"mean_pct": 90.0, "samples": 1},
                   "idle": {"mean_pct": 0.0, "samples": 1}}
    # gpu_util.py's lines, read back for GPU 0 only; a line nvidia-smi could not fill ([N/A]) is left out.
    lines = gpu_util.sample_lines(1.0, "0, 30, 1000\n1, 99, 5\n0, [N/A], 7\n")
    assert lines == ["1.000,0,30,1000", "1.000,1,99,5"]
    util = tmp_path / "util.csv"
    util.write_text("\n".join(lines + gpu_util.sample_lines(6.0, "0, 90, 1000")) + "\n")
    assert run_time.read_util(str(util)) == [(1.0, 30.0), (6.0, 90.0)]
    trace = tmp_path / "steps.jsonl.xz"  # a committed trace is compressed
    with lzma.open(trace, "wt") as f:
        f.write("\n".join(json.dumps(s) for s in steps) + "\n")
    assert run_time.main(["--util", str(util), "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "4 steps over 8.0 s" in out and "exclusive 90 % (1 samples), shared 30 % (1 samples)" in out


def test_the_sampler_reads_the_hosts_cpus_and_run_time_reports_them_per_kind_of_step(tmp_path, capsys):
    run_time, gpu_util = _device_tool("run_time"), _device_tool("gpu_util")
    # /proc/stat: user nice system idle iowait irq softirq steal guest guest_nice
    before = gpu_util.cpu_times("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\nprocs_running 3\n")
    after = gpu_util.cpu_times("cpu  400 0 150 1200 50 0 0 0 0 0\nprocs_running 17\n")
    assert before == (150, 1000, 3) and after == (550, 1800, 17)
    assert gpu_util.host_line(2.0, before, after) == "2.000,host,50,17"  # 400 busy of 800
    steps = [{"start": 0, "end": 4, "exclusive": False}, {"start": 5, "end": 7, "exclusive": True}]
    util = tmp_path / "util.csv"
    util.write_text("1.000,0,30,1000\n1.000,host,90,20\n3.000,host,70,14\n6.000,0,95,1000\n6.000,host,10,1\n")
    assert run_time.read_util(str(util)) == [(1.0, 30.0), (6.0, 95.0)]  # the host's lines are not a GPU's
    assert run_time.read_util(str(util), "host", 3) == [(1.0, 20.0), (3.0, 14.0), (6.0, 1.0)]
    trace = tmp_path / "steps.jsonl"
    trace.write_text("\n".join(json.dumps(s) for s in steps) + "\n")
    assert run_time.main(["--util", str(util), "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "the host's CPUs while exclusive 10 % busy, 1.0 threads runnable; shared 80 % busy, 17.0 threads" in out


def test_run_time_says_whether_the_run_went_through_the_multi_process_service(tmp_path, capsys):
    run_time = _device_tool("run_time")
    index = {"wall_s": 10.0, "incomplete": False, "modes": ["plain"], "reports": {},
             "time": {"schedule": {"why": "2 child(ren)", "mps": {"on": False, "why": "nvidia-cuda-mps-control is "
                                                                               "not on PATH"}},
                      "phases_s": {}, "gpu_exclusive_s": 1.0, "waited_s": 0.0, "modes": {}}}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(index))
    assert run_time.main([str(path)]) == 0
    assert "Multi-Process Service: off: nvidia-cuda-mps-control is not on PATH" in capsys.readouterr().out
