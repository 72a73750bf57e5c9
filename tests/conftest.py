"""Shared test fixtures. GPU tests are marked `gpu` and skipped where CUDA is not available."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "results" / "b200" / "adaln_projection" / "adaln_projection.b200.prior-art.json"


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# Under `-n 2 --dist loadfile` xdist deals out whole files, those with the most tests first. Here the costly files
# have few tests (a compile, or a few runs of child processes each), so they came last and ended the run on one
# worker alone. These files go first, heaviest first (CPU time on two cores), then the rest in xdist's order. A
# file missing from the list, or one that is gone, only changes the order. (The whole libraries' compiles are
# marked `build` and run in a step of their own.)
HEAVY_FIRST = (
    "tests/test_bundled_build.py",
    "tests/test_runner.py",
    "tests/test_envs.py",
    "tests/test_cold_start.py",
    "tests/test_modes_frameworks.py",
    "tests/test_exit_codes.py",
    "tests/test_first_run.py",
    "tests/test_first_hour.py",
    "tests/test_faults.py",
    "tests/test_gathered_build.py",
    "tests/test_kernel_bench.py",
    "tests/test_progress.py",
    "tests/test_cli.py",
    "tests/test_repeat.py",
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class HeavyFirst(LoadFileScheduling):
        def _assign_work_unit(self, node):
            # xdist's queue of files (an OrderedDict in pytest-xdist 3.x); anything else keeps xdist's order.
            for name in HEAVY_FIRST if hasattr(self.workqueue, "move_to_end") else ():
                if name in self.workqueue:
                    self.workqueue.move_to_end(name, last=False)
                    break
            super()._assign_work_unit(node)

    return HeavyFirst(config, log)


@pytest.fixture
def reference_path() -> Path:
    return REFERENCE


def run_cli(*args: str, env: dict | None = None, timeout: float = 300, cwd: Path | None = None):
    """The CLI as a user runs it: a separate process, its exit code, stdout and stderr."""
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), full_env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "adaln_bench", *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=cwd or ROOT)


def run_cli_forked(*args: str, env: dict | None = None, timeout: float = 300, cwd: Path | None = None):
    """run_cli, in a process forked from one that has imported torch (tests/forked.py) instead of a new
    interpreter: the same exit code, stdout and stderr, less the 2-3 s of CPU each new interpreter spends
    importing torch. For a test whose subject is what the command says and does (its refusal of bad input, a
    rendering), not how an interpreter starts it; those keep run_cli."""
    import forked

    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), full_env.get("PYTHONPATH")]))
    return forked.run("module", "adaln_bench", list(args), env=full_env, cwd=cwd or ROOT, timeout=timeout)


def run_main(argv: list[str], capsys) -> tuple[int, str, str]:
    """The CLI in this process (fast, for many cases): its exit code, stdout and stderr."""
    from adaln_bench.cli import main

    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err
