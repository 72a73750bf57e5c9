"""tools/device/nightly.sh on the CPU: the wheels it installs (one per distribution) and its detached job, which
must not hold the call's output open (else the device call waits for the job up to its limit)."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEVICE = ROOT / "tools" / "device"
_spec = importlib.util.spec_from_file_location("pick_wheels", DEVICE / "pick_wheels.py")
pick_wheels = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pick_wheels)  # a tool, not a package module: loaded from its file, sys.path untouched


def wheel(folder: Path, name: str, version: str, tag: str = "py3-none-any") -> Path:
    """A minimal wheel pip installs with --no-index --no-deps --target."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-{tag}.whl"
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}/__init__.py", f"VERSION = {version!r}\n")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path


def test_one_wheel_per_distribution_the_first_folder_wins_and_the_kernels_build_comes_last(tmp_path):
    stage2, night, solo = tmp_path / "stage2", tmp_path / "night", tmp_path / "solo"
    a7 = wheel(stage2, "annotated_types", "0.7.0")
    slim = wheel(stage2, "sglang", "0.5.23", "0slim-cp312-cp312-manylinux_2_34_x86_64")
    a8 = wheel(night, "annotated_types", "0.8.0")
    kernels = wheel(night, "sglang", "0.5.23", "0slimkernels-cp312-cp312-manylinux_2_34_x86_64")
    liger = wheel(night, "liger_kernel", "0.8.5")
    same = wheel(solo, "annotated_types", "0.7.0")  # the same file name again: not "left out", just once
    chosen, left_out = pick_wheels.pick([stage2, night, solo])
    assert chosen == [a7, slim, liger, kernels]
    assert left_out == [a8]
    assert same not in chosen
    # the kernels build is last even when its folder comes first
    chosen, _ = pick_wheels.pick([night, stage2])
    assert chosen[-1] == kernels and a8 in chosen and a7 not in chosen


def test_the_picker_names_what_it_leaves_out_and_fails_on_nothing(tmp_path):
    wheel(tmp_path / "a", "dill", "0.4.1")
    wheel(tmp_path / "b", "Dill", "0.3.0")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(DEVICE / "pick_wheels.py"), str(tmp_path / "a"), str(tmp_path / "b")],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == [str(tmp_path / "a" / "dill-0.4.1-py3-none-any.whl")]
    assert "left out" in proc.stderr and "Dill-0.3.0" in proc.stderr
    empty = subprocess.run([sys.executable, str(DEVICE / "pick_wheels.py"), str(tmp_path / "none")],
                           capture_output=True, text=True, env=env, timeout=60)
    assert empty.returncode == 2 and empty.stdout == ""


@pytest.mark.skipif(shutil.which("setsid") is None or shutil.which("xz") is None, reason="needs setsid and xz")
def test_start_returns_while_its_detached_job_runs_on(tmp_path):
    """`start` launches the job and ends; its output pipe (as the device tool reads it) closes at once, not when
    the job ends. The job here is a stand-in that runs 30 s."""
    tree = tmp_path / "tree"
    (tree / "tools" / "device").mkdir(parents=True)
    for name in ("nightly.sh", "pick_wheels.py"):
        shutil.copy(DEVICE / name, tree / "tools" / "device" / name)
    (tree / "tools" / "device" / "nightly_job.sh").write_text(
        'sleep 30; echo "draws - nightly 0" > "$NIGHT/job.done"\n')
    wheel(tree / ".carry" / "solo", "stubpkg", "1.0")
    wheel(tree / ".carry" / "solo" / "dup", "stubpkg", "0.9")  # not a folder it reads: never installed
    night, out = tmp_path / "night", tmp_path / "out"
    env = {**os.environ, "NIGHT": str(night), "OUT": str(out), "PYTHONPATH": ""}
    t0 = time.monotonic()
    proc = subprocess.run(["bash", "tools/device/nightly.sh", "start", "60", "3"], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=25)
    took = time.monotonic() - t0
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert took < 20, f"start held its output open for {took:.0f} s: the job kept it"
        assert "starting the job" in proc.stdout
        assert (night / "site" / "stubpkg" / "__init__.py").read_text() == "VERSION = '1.0'\n"
        assert (out / "nightly.tar.xz").exists() and not (night / "job.done").exists()
        jobs = subprocess.run(["pgrep", "-f", f"{night}/job.sh"], capture_output=True, text=True)
        assert jobs.stdout.strip(), "the job did not outlive the call"
    finally:
        subprocess.run(["pkill", "-f", f"{night}/job.sh"], capture_output=True)
