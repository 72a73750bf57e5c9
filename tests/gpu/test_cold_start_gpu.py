"""The bundled kernel the way a training job or a rollout engine first meets it, one fresh process per case.

A kernel that passed every warm probe once died on exactly these: the first backward of a fresh process
(autograd's device thread had no CUDA context when the TMA descriptors were encoded), a backward started
from a thread that never touched CUDA, and CUDA-graph capture. Both code paths; the portable one forced.
ADALN_BENCH_UNDER_TEST=<tree> runs the cases against another checkout's package (to show a fix).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

CASE = Path(__file__).with_name("cold_start_case.py")
ROOT = Path(os.environ.get("ADALN_BENCH_UNDER_TEST") or Path(__file__).resolve().parents[2])
PATHS = ("sm90", "portable")


def _path_env(path: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("ADALN_BENCH_BUNDLED_PATH", None)
    if path == "portable":
        env["ADALN_BENCH_BUNDLED_PATH"] = "portable"
    return env


@pytest.fixture(scope="module", autouse=True)
def libraries():
    """Build (or find) both libraries once, in a process of their own, so the cases only load them."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the sm90 path needs an H100/H200")
    for path in PATHS:
        code = ("import torch; from adaln_bench.kernels.bundled import candidate as C; "
                "C.get_library(torch.device('cuda', 0))")
        proc = subprocess.run([sys.executable, "-c", code], env=_path_env(path), capture_output=True, text=True,
                              timeout=900, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr[-3000:]


def _case(path: str, case: str, t: int) -> dict:
    proc = subprocess.run([sys.executable, str(CASE), case, str(t)], env=_path_env(path), capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, f"{case} T={t} ({path}) exit {proc.returncode}:\n{proc.stderr[-3000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["path"] == path
    return result


# 100: the portable middle tier (v7); 300 / 700: the sm90 forward's odd / even large token-tile counts (v14)
@pytest.mark.parametrize("t", [1, 2, 8, 16, 17, 100, 300, 700, 2049])
@pytest.mark.parametrize("path", PATHS)
def test_first_backward_of_a_fresh_process(path, t):
    result = _case(path, "first_step", t)
    assert result["temb"] <= 1e-5


@pytest.mark.parametrize("t", [2, 17])
@pytest.mark.parametrize("path", PATHS)
def test_backward_from_a_thread_that_never_touched_cuda(path, t):
    result = _case(path, "foreign_thread", t)
    assert result["temb"] <= 1e-5


@pytest.mark.parametrize("t", [2, 100, 300])
@pytest.mark.parametrize("path", PATHS)
def test_graph_replay_equals_eager(path, t):
    result = _case(path, "graph", t)
    assert result["fwd_graph"] and result["step_graph_out"] and result["step_graph_grads"]
