"""CPU-side checks of the gathered-operator kernels (adaln_bench/kernels/gathered): the one source compiles for
sm_90a and sm_100a with the machine's nvcc, the library loads, its C interface fails closed before any CUDA call,
its chunking and workspace are what docs/kernels.md says; the Python API's input validation. No GPU needed.

Skipped (with the reason) only when nvcc is missing. The two compiles run concurrently, about 20 s each.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from adaln_bench.kernels import toolchain
from adaln_bench.kernels.gathered import build as B
from adaln_bench.kernels import gathered as G

ARCHS = ["sm_90a", "sm_100a"]
_MISSING = toolchain.missing(B.recipe(B.target_for_arch("sm_90a")))


def test_target_choice():
    assert B.target_for_capability(9, 0) == B.Target("sm_90a", 90)
    assert B.target_for_capability(10, 0) == B.Target("sm_100a", 100)
    assert B.target_for_capability(8, 0) == B.Target("sm_80", 80)
    with pytest.raises(B.BuildError, match="not supported"):
        B.target_for_capability(7, 5)
    with pytest.raises(ValueError):
        B.target_for_arch("90a")


def test_recipe(tmp_path, monkeypatch):
    """The flags nvcc gets (the code depends on them), one cache folder a target, a cached one used."""
    monkeypatch.setenv("ADALN_BENCH_KERNEL_CACHE", str(tmp_path))
    r = B.recipe(B.target_for_arch("sm_90a"))
    assert r.nvcc_flags() == ["-std=c++17", "-O3", "-DNDEBUG", "-Xcompiler", "-fPIC", "-Xcompiler",
                              "-fvisibility=hidden", "-gencode=arch=compute_90a,code=sm_90a", "-DGAT_REQUIRED_CC=90"]
    assert (r.sources, r.headers, r.header_sets) == (("gathered.cu",), ("norm_onepass.cuh",), ())
    assert toolchain.cache_key(r) != toolchain.cache_key(B.recipe(B.target_for_arch("sm_100a")))
    d = toolchain.library_dir(r)
    assert d.parent == tmp_path and d.name == f"gathered-sm_90a-{toolchain.cache_key(r)}"
    d.mkdir(parents=True)
    (d / B.LIB_NAME).write_bytes(b"prebuilt")
    monkeypatch.setenv("ADALN_BENCH_NVCC", "/nonexistent/nvcc")
    lib, meta = toolchain.ensure_library(r)
    assert lib == d / B.LIB_NAME and meta["prebuilt_or_cached"] is True


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if _MISSING:
        pytest.skip(_MISSING)

    outs = {arch: tmp_path_factory.mktemp(arch) for arch in ARCHS}  # not in the threads: see test_bundled_build.py

    def one(arch):
        target = B.target_for_arch(arch)
        out = outs[arch]
        t0 = time.perf_counter()
        meta = toolchain.compile_library(B.recipe(target), out)
        print(f"built gathered for {arch} in {time.perf_counter() - t0:.0f} s")
        return arch, B.Library(out / B.LIB_NAME, target, meta)

    with ThreadPoolExecutor(max_workers=len(ARCHS)) as pool:
        return dict(pool.map(one, ARCHS))


@pytest.mark.parametrize("arch", ARCHS)
def test_library_builds_and_fails_closed(built, arch):
    lib = built[arch]
    assert lib._lib.gat_abi_version() == B.ABI_VERSION
    # chunking is a function of S only: C = min(CMAX, ceil(S / 512)), lanes of ceil(S / (8 C)) tokens
    assert lib.chunking(B.OP_NORM, 4097, 9) == (6, 86)
    assert lib.chunking(B.OP_NORM, 64, 9) == (1, 8)
    assert lib.chunking(B.OP_NORM, 131072, 3) == (8, 2048)
    assert lib.chunking(B.OP_GATE, 32768) == (6, 683)
    assert lib.chunking(B.OP_ROW_GATHER, 32768) == (2, 2048)
    # workspace: C x entries x quantities x columns x fp32, capped whatever S is
    h = 5376
    assert lib.workspace_bytes(B.OP_GATE, 131072, h) == 6 * 9 * h * 4
    assert lib.workspace_bytes(B.OP_ROW_GATHER, 131072, h) == 2 * 9 * 6 * h * 4
    # the norm backward: one pass where H <= 6144, two passes for wider rows (no switch between them)
    assert lib.norm_backward_path(h) == 2 and lib.norm_backward_path(6144) == 2 and lib.norm_backward_path(6152) == 1
    assert not hasattr(lib, "set_norm_backward") and not hasattr(lib._lib, "gat_set_norm_backward")
    # two passes: C x entries x 2 sums x H x fp32, capped whatever S is
    w = 6152
    assert lib.workspace_bytes(B.OP_NORM, 131072, w, 9) == 6 * 9 * 2 * w * 4 == lib.workspace_bytes(B.OP_NORM, 4097, w, 9)
    assert lib.workspace_bytes(B.OP_NORM, 131072, w, 3) == 8 * 3 * 2 * w * 4
    assert lib.workspace_bytes(B.OP_NORM, 100, w, 9) == 9 * 2 * w * 4
    # one pass: tiles of T = ceil(S / (126 - entries)) rows of one entry, count blocks of >= 1024 tokens (<= 128)
    assert lib.onepass_tiling(32768, h, 9) == (281, 32, 1024)
    assert lib.onepass_tiling(131072, h, 3) == (1066, 128, 1024)
    assert lib.onepass_tiling(4097, h, 9) == (36, 5, 820)
    assert lib.onepass_tiling(1, h, 9) == (1, 1, 1)
    # workspace: the counts, 4 B a token for the partition, 126 tiles x 2 sums x H x fp32 (5.4 MB at H = 5376)
    tiles = 126 * 2 * h * 4
    assert lib.workspace_bytes(B.OP_NORM, 32768, h, 9) == 32 * 10 * 4 + 64 + 32768 * 4 + tiles
    assert lib.workspace_bytes(B.OP_NORM, 131072, h, 3) == 128 * 4 * 4 + 64 + 131072 * 4 + tiles
    # the one-pass ring: 10 rows where 2 x 10 rows of the CTA's columns and the reduction fit the device's opt-in
    # shared memory per block (232,448 B on an H200 and a B200), else 8 (no switch: the same bits either way)
    optin = 232448
    assert lib.onepass_ring(h, optin) == 10 and lib.onepass_ring(6144, optin) == 8  # 672 or 768 threads
    assert lib.onepass_ring(h, 10 * 2 * 672 * 16 + 1024) == 10 and lib.onepass_ring(h, 10 * 2 * 672 * 16 + 1023) == 8
    assert not hasattr(lib, "set_onepass_ring") and not hasattr(lib._lib, "gat_set_onepass_ring")
    assert lib._lib.gat_row_threads(5376) == 224 and lib._lib.gat_row_threads(32) == 32
    # bad sizes / pointers / alignment are refused before any CUDA call (this machine has no GPU)
    with pytest.raises(RuntimeError, match=r"\(bad_argument, status 1\): S must be >= 1"):
        lib.call("gat_gate_fwd", 16, 16, 16, 16, 16, 0, 64, 0, None)
    with pytest.raises(RuntimeError, match="multiple of 8"):
        lib.call("gat_gate_fwd", 16, 16, 16, 16, 16, 4, 60, 0, None)
    with pytest.raises(RuntimeError, match="16-byte aligned"):
        lib.call("gat_gate_fwd", 16, 24, 16, 16, 16, 4, 64, 0, None)
    with pytest.raises(RuntimeError, match="workspace too small"):
        lib.call("gat_norm_bwd", 16, 16, 16, 16, 64, 16, 9, 16, 16, 16, 16, 16, 64, 16, 100, 4, 64, 0, None)
    with pytest.raises(RuntimeError, match="ne .* must be 9 or 3"):
        lib.call("gat_norm_fwd", 16, 16, 16, 16, 64, 16, 5, 16, 16, 4, 64, 1e-5, 0, None)
    with pytest.raises(RuntimeError, match="null pointer"):
        lib.call("gat_row_gather_fwd", 16, 16, 16, 16, 16, 16, 16, 16, None, 4, 64, 0, None)
    assert not hasattr(lib._lib, "gat_set_column_variant")  # one column-kernel variant
    assert [lib.status_name(c) for c in (0, 1, 10, 11, 12, 15, 99)] == [
        "ok", "bad_argument", "device", "wrong_arch", "launch", "pending_error", "unknown"]


def _bf(*shape):
    return torch.zeros(shape, dtype=torch.bfloat16)


def _ix(n):
    return torch.zeros(n, dtype=torch.int64)


def test_python_validation_messages():
    with pytest.raises(ValueError, match="x must be torch.bfloat16"):
        G.norm_modulate(torch.zeros(4, 64), _bf(64), _bf(9, 64), _bf(9, 64), _ix(4))
    with pytest.raises(ValueError, match=r"sc must have shape \(9, 64\)"):
        G.norm_modulate(_bf(4, 64), _bf(64), _bf(9, 64), _bf(3, 64), _ix(4))
    with pytest.raises(ValueError, match="multiple of 8"):
        G.gate_residual(_bf(4, 60), _bf(4, 60), _bf(9, 60), _ix(4))
    with pytest.raises(ValueError, match="idx must be torch.int64"):
        G.gate_residual(_bf(4, 64), _bf(4, 64), _bf(9, 64), torch.zeros(4, dtype=torch.int32))
    with pytest.raises(ValueError, match="6·H columns"):
        G.row_gather(_bf(9, 100), _ix(4), _ix(4))
    with pytest.raises(ValueError, match=r"tags must have shape \(4,\)"):
        G.row_gather(_bf(9, 6 * 64), _ix(4), _ix(5))
    with pytest.raises(ValueError, match="temb must be torch.float32"):
        G.final_adaln_out(_bf(4, 64), _bf(64), _bf(3, 32), _bf(128, 32), _bf(128), _ix(4))
    with pytest.raises(ValueError, match=r"w must have shape \(128, 32\)"):
        G.final_adaln_out(_bf(4, 64), _bf(64), torch.zeros(3, 32), _bf(128, 16), _bf(128), _ix(4))
    with pytest.raises(ValueError, match="must be on a CUDA device"):
        G.gate_residual(_bf(4, 64), _bf(4, 64), _bf(9, 64), _ix(4))
