"""CPU-side checks of the bundled CUDA kernel: every source compiles for every target with the machine's
nvcc (sm90 wgmma path for sm_90a; portable mma.sync path for sm_90a and sm_100a), the library loads and its
C interface fails closed; the loader's target choice, cache key and prebuilt pickup. No GPU needed.

Skipped (with the reason) only when nvcc or the CUTLASS headers (`nvidia-cutlass`, the `kernel` extra) are
missing. Compiling takes a few minutes on a 2-core machine (CUTLASS 3 kernels dominate).
"""
from __future__ import annotations

import ctypes
import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from adaln_bench.kernels import toolchain
from adaln_bench.kernels.bundled import build as B

TARGETS = [("sm90", "sm_90a"), ("portable", "sm_90a"), ("portable", "sm_100a")]


def test_target_choice_by_architecture_only(monkeypatch):
    monkeypatch.delenv("ADALN_BENCH_BUNDLED_PATH", raising=False)
    assert B.target_for_capability(9, 0) == B.Target("sm90", "sm_90a", 90)
    assert B.target_for_capability(10, 0) == B.Target("portable", "sm_100a", 100)
    assert B.target_for_capability(8, 0) == B.Target("portable", "sm_80", 80)
    assert B.target_for_capability(9, 0, forced_path="portable") == B.Target("portable", "sm_90a", 90)
    with pytest.raises(B.BuildError, match="not supported"):
        B.target_for_capability(7, 5)
    with pytest.raises(B.BuildError, match="needs compute capability 9.0"):
        B.target_for_capability(10, 0, forced_path="sm90")
    with pytest.raises(ValueError):
        B.target_for_arch("sm90", "sm_100a")


def test_recipe_per_code_path(tmp_path, monkeypatch):
    """The flags nvcc gets (the code depends on them), one cache folder a path and target, a cached one used."""
    monkeypatch.setenv("ADALN_BENCH_KERNEL_CACHE", str(tmp_path))
    sm90, portable = B.recipe(B.Target("sm90", "sm_90a", 90)), B.recipe(B.Target("portable", "sm_100a", 100))
    assert sm90.nvcc_flags() == [*B.BASE_FLAGS, "-gencode=arch=compute_90a,code=sm_90a", "-DADALN_PATH_SM90",
                                 "-DADALN_REQUIRED_CC=90", "-DADALN_EXACT_CC=1"]
    assert portable.nvcc_flags()[-4:] == ["-gencode=arch=compute_100a,code=sm_100a", "-DADALN_PATH_PORTABLE",
                                          "-DADALN_REQUIRED_CC=100", "-DADALN_EXACT_CC=1"]
    assert sm90.sources == B.PATH_SOURCES["sm90"] and portable.sources == ("portable_gemms.cu", "dw_mma.cu", "api.cu")
    assert sm90.header_sets == (toolchain.CUTLASS,) and dict(sm90.notes) == {"path": "sm90", "cc": 90}
    variant = B.recipe(B.Target("sm90", "sm_90a", 90, ("ADALN_FWD_LARGE_TN=256",)))
    assert variant.nvcc_flags()[-1] == "-DADALN_FWD_LARGE_TN=256"
    keys = {B.cache_key(B.Target(*t)) for t in (("sm90", "sm_90a", 90), ("portable", "sm_90a", 90),
                                                ("portable", "sm_100a", 100), ("sm90", "sm_90a", 90, ("X=1",)))}
    assert len(keys) == 4
    d = toolchain.library_dir(sm90)
    assert d.parent == tmp_path and d.name == f"bundled-sm90-sm_90a-{B.cache_key(B.Target('sm90', 'sm_90a', 90))}"
    # a library already in the cache is used as is: no nvcc, no CUTLASS needed
    d.mkdir(parents=True)
    (d / B.LIB_NAME).write_bytes(b"prebuilt")
    (d / "meta.json").write_text(json.dumps({"key": "k"}))
    monkeypatch.setenv("ADALN_BENCH_NVCC", "/nonexistent/nvcc")
    monkeypatch.setenv("ADALN_BENCH_CUTLASS_INCLUDE", "/nonexistent")
    lib, meta = toolchain.ensure_library(sm90)
    assert lib == d / B.LIB_NAME and meta == {"key": "k", "prebuilt_or_cached": True}


_MISSING = toolchain.missing(B.recipe(B.Target("sm90", "sm_90a", 90)))


@pytest.fixture(scope="module")
def all_built(tmp_path_factory):
    """Every target compiled once, concurrently (each nvcc is single-threaded; on two cores the three targets
    together take about as long as the sm90 one alone)."""
    if _MISSING:
        pytest.skip(_MISSING)

    # Made here, not in the threads: the factory's first call creates the session's base folder, and two threads
    # making it at once each get their own and then refuse the other's.
    outs = {t: tmp_path_factory.mktemp(f"{t[0]}-{t[1]}") for t in TARGETS}

    def one(path_arch):
        path, arch = path_arch
        target = B.target_for_arch(path, arch)
        out = outs[path_arch]
        t0 = time.perf_counter()
        meta = toolchain.compile_library(B.recipe(target), out)
        print(f"built {path} for {arch} in {time.perf_counter() - t0:.0f} s: {meta['compile_seconds']}")
        return target, out / B.LIB_NAME, meta

    with ThreadPoolExecutor(max_workers=len(TARGETS)) as pool:
        return dict(zip(TARGETS, pool.map(one, TARGETS)))


@pytest.fixture(params=TARGETS, ids=[f"{p}-{a}" for p, a in TARGETS])
def built(request, all_built):
    return all_built[request.param]


@pytest.mark.build
def test_library_compiles_and_exports_c_interface(built):
    target, lib_path, meta = built
    assert lib_path.exists() and meta["arch"] == target.arch
    lib = B.Library(lib_path, target, meta)
    assert ("wgmma" in lib.path_name) == (target.path == "sm90")
    # shipped sm90 recipe: token tiers from a 16-wide tile up (bit-identical on the H200)
    assert "dW" in lib.config and ("T<=16 128x16x128" in lib.config or target.path == "portable")
    # v13: programmatic dependent launch on the sm90 path only (CUTLASS 2 has no grid dependency control);
    # dW outside a GEMM up to 12 rows on sm90, 256 on the portable path
    assert ("pdl=1" in lib.config) == (target.path == "sm90") and "pdl=0" not in lib.config
    assert lib.config.endswith("outside a GEMM for T<=" + ("12" if target.path == "sm90" else "256"))
    # the d_temb reduction depends on N only: (chunk, chunks, chunks per group); the T block is the path's
    block = 2048 if target.path == "sm90" else 512
    assert lib.chunking(96768) == (4032, 24, 4, block)
    assert lib.chunking(18432) == (3712, 5, 1, block)
    assert lib.chunking(28000) == (4032, 7, 2, block)
    assert lib.chunking(768) == (768, 1, 1, block)
    # scratch is capped at one block's fp32 planes (6 group sums on sm90, 24 chunk partials on the portable
    # path: 132 MB at the H3 shape either way), less below a block
    planes = 6 if target.path == "sm90" else 24
    full = lib.dtemb_scratch_bytes(block, 2688, 96768)
    assert full == lib.dtemb_scratch_bytes(100000, 2688, 96768) == planes * block * 2688 * 4 + lib.gemm_ws_bytes
    assert lib.dtemb_scratch_bytes(1, 2688, 96768) < lib.dtemb_scratch_bytes(256, 2688, 96768) < full


@pytest.mark.build
def test_c_interface_fails_closed(built):
    """Bad sizes are refused by the C side with a message, before any CUDA call (so this runs on a CPU)."""
    target, lib_path, meta = built
    lib = B.Library(lib_path, target, meta)
    with pytest.raises(RuntimeError, match=r"\(bad_argument, status 1\): T must be >= 1"):
        lib.forward(16, 16, 16, 16, 16, 0, 256, 768, 16, 1 << 20, 0, None)
    with pytest.raises(RuntimeError, match="multiples of 8"):
        lib.forward(16, 16, 16, 16, 16, 4, 250, 768, 16, 1 << 20, 0, None)
    with pytest.raises(RuntimeError, match="multiples of 8"):
        lib.backward(16, 16, 16, 16, 16, 16, 16, 4, 256, 764, 16, 1 << 20, 0, None)
    with pytest.raises(RuntimeError, match="16-byte aligned"):
        lib.forward(16, 18, 16, 16, 16, 4, 256, 768, 16, 1 << 20, 0, None)
    # Every status has a name (status.h); the one for a failed TMA descriptor encoding among them.
    assert [lib.status_name(code) for code in (0, 1, 13, 14, 15, 99)] == [
        "ok", "bad_argument", "no_context", "descriptor", "pending_error", "unknown"]
    assert ctypes.CDLL(str(lib_path)).adaln_abi_version() == B.ABI_VERSION
