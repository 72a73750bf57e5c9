"""CPU-side checks of the bundled timestep MLP (adaln_bench/kernels/timestep_mlp): the C interface and its
elementwise kernels compile for sm_90a and sm_100a with the machine's nvcc (quick: mlp.cu alone, a few seconds);
the whole library (the CUTLASS 3xTF32 GEMMs too, 1-2 min a target on two cores, so marked slow) builds, loads,
fails closed before any CUDA call and reports the K slices fixed by the shape; the Python API's input checks and
the candidate's registration without a GPU.

Compile tests are skipped (with the reason) only when nvcc or the CUTLASS headers are missing.
"""
from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from adaln_bench.kernels import toolchain
from adaln_bench.kernels.timestep_mlp import build as B

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
    assert r.nvcc_flags() == [*B.FLAGS, "-gencode=arch=compute_90a,code=sm_90a", "-DTMLP_REQUIRED_CC=90"]
    assert r.sources == ("gemm_nn.cu", "gemm_tn.cu", "gemm_dw.cu", "row_stream.cu", "mlp.cu") and r.header_sets == (toolchain.CUTLASS,)
    assert B.recipe(B.Target("sm_90a", 90, ("TMLP_SPLIT_Y=8",))).nvcc_flags()[-1] == "-DTMLP_SPLIT_Y=8"
    assert toolchain.cache_key(r) != toolchain.cache_key(B.recipe(B.target_for_arch("sm_100a")))
    d = toolchain.library_dir(r)
    assert d.parent == tmp_path and d.name == f"timestep_mlp-sm_90a-{toolchain.cache_key(r)}"
    d.mkdir(parents=True)
    (d / B.LIB_NAME).write_bytes(b"prebuilt")
    monkeypatch.setenv("ADALN_BENCH_NVCC", "/nonexistent/nvcc")
    lib, meta = toolchain.ensure_library(r)
    assert lib == d / B.LIB_NAME and meta["prebuilt_or_cached"] is True


@pytest.mark.skipif(bool(_MISSING), reason=str(_MISSING))
@pytest.mark.parametrize("arch", ARCHS)
def test_interface_compiles(tmp_path, arch):
    target = B.target_for_arch(arch)
    cmd = [toolchain.find_nvcc(), *B.recipe(target).nvcc_flags(), f"-I{B.HERE}",
           f"-I{toolchain.CUTLASS.find(toolchain.find_nvcc())}", "-c",
           str(B.HERE / "mlp.cu"), "-o", str(tmp_path / "mlp.o")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "mlp.o").stat().st_size > 0


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if _MISSING:
        pytest.skip(_MISSING)

    def one(arch):
        target = B.target_for_arch(arch)
        out = tmp_path_factory.mktemp(arch)
        t0 = time.perf_counter()
        meta = toolchain.compile_library(B.recipe(target), out, jobs=2)
        print(f"built timestep_mlp for {arch} in {time.perf_counter() - t0:.0f} s")
        return arch, B.Library(out / B.LIB_NAME, target, meta)

    return dict(map(one, ARCHS))


@pytest.mark.slow
@pytest.mark.build
@pytest.mark.parametrize("arch", ARCHS)
def test_library_builds_and_fails_closed(built, arch):
    lib = built[arch]
    assert lib._lib.tmlp_abi_version() == B.ABI_VERSION
    assert lib._lib.tmlp_required_cc() == int(arch[3:].rstrip("a"))
    # the K slices are a function of the shape only; the tile configuration follows T (same bits in each)
    assert lib.splits(256, 5376, 2688) == {"y": 8, "d_act": 4, "dx": 42}
    assert lib.splits(256, 32, 128) == {"y": 1, "d_act": 4, "dx": 1}
    assert [lib.config_for(t) for t in (1, 16, 17, 32, 33, 128, 129, 1024, 1025)] == [4, 4, 0, 0, 1, 1, 3, 3, 2]
    t, f, h, d = 2048, 256, 5376, 2688
    assert lib.forward_workspace_bytes(t, f, h, d) == 8 * t * d * 4
    assert lib.backward_workspace_bytes(t, f, h, d) == (4 * t * h + 42 * t * f) * 4
    with pytest.raises(ValueError):
        lib.force_config(5)
    with pytest.raises(ValueError):
        lib.set_large_variant(5)
    # bad sizes are refused before any CUDA call (no device here): status bad_argument and a message
    null = [None] * 8
    with pytest.raises(RuntimeError, match="bad_argument.*T must be"):
        lib.call("tmlp_forward", *null, None, 0, 0, f, h, d, 0, None)
    with pytest.raises(RuntimeError, match="bad_argument.*multiples of 32"):
        lib.call("tmlp_forward", *null, None, 0, 4, f, 40, d, 0, None)
    with pytest.raises(RuntimeError, match="bad_argument.*16-byte aligned"):
        lib.call("tmlp_forward", *null, None, 0, 4, f, h, d, 0, None)


def test_python_api_checks_inputs():
    from adaln_bench.kernels.timestep_mlp import timestep_mlp

    x, w1, b1 = torch.zeros(2, 256), torch.zeros(5376, 256), torch.zeros(5376)
    w2, b2 = torch.zeros(2688, 5376), torch.zeros(2688)
    with pytest.raises(ValueError, match="x must be torch.float32"):
        timestep_mlp(x.double(), w1, b1, w2, b2)
    with pytest.raises(ValueError, match=r"w1 must have shape \(\*, 256\)"):
        timestep_mlp(x, w1[:, :128], b1, w2, b2)
    with pytest.raises(ValueError, match=r"b2 must have shape \(2688,\)"):
        timestep_mlp(x, w1, b1, w2, b2[:5])
    with pytest.raises(ValueError, match="at least one row"):
        timestep_mlp(x[:0], w1, b1, w2, b2)
    with pytest.raises(ValueError, match="multiple of 32"):
        timestep_mlp(torch.zeros(2, 8), torch.zeros(5376, 8), b1, w2, b2)
    with pytest.raises(ValueError, match="CUDA device"):
        timestep_mlp(x, w1, b1, w2, b2)


def test_candidate_registered_and_unavailable_without_a_gpu(monkeypatch):
    import adaln_bench.ops.timestep_mlp.candidates  # noqa: F401 - registers the candidates
    from adaln_bench.ops.candidates import candidates_of

    bundled = candidates_of("timestep_mlp")["bundled"]
    assert bundled.default_modes == ("plain",) and "3xTF32" in bundled.description
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bundled.availability() == "no CUDA device"
    # the gathered operators keep their own bundled candidate
    import adaln_bench.ops.gate_residual.candidates  # noqa: F401

    assert "table gradients" in candidates_of("gate_residual")["bundled"].description


def test_kernel_bench_targets_floors_and_error_bound():
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.kernel_bench import floors
    from adaln_bench.kernel_bench import targets as T

    # issue 43's table: T < 64, 64 <= T < 2048, T >= 2048
    assert [T.target(k, 4, "timestep_mlp").max_ratio for k in ("fwd", "fwd_bwd")] == [1.0, 1.0]
    assert [T.target(k, 256, "timestep_mlp").max_ratio for k in ("fwd", "fwd_bwd")] == [1.0, 0.8]
    assert [T.target(k, 2048, "timestep_mlp").max_ratio for k in ("fwd", "fwd_bwd")] == [0.6, 0.5]
    assert T.judge("fwd_bwd", 2048, 0.51, None, "timestep_mlp").passed is False
    assert T.judge("fwd_bwd", 2048, 0.51, None).passed is True  # the gathered table: 1.0x below S = 32768
    assert T.has_targets("timestep_mlp") and not T.has_targets("adaln_projection")
    # errors: within max(2x stock, 1e-7), never above 1e-5
    assert T.mlp_error_verdict(1.9e-7, 1e-7) and not T.mlp_error_verdict(2.1e-7, 1e-7)
    assert T.mlp_error_verdict(1e-7, 0.0) and not T.mlp_error_verdict(1.1e-5, 1e-4)
    assert T.mlp_error_verdict(None, 1e-7) is None
    # floors: bytes at small T (weights read once forward, twice + both gradients written forward + backward)
    h3 = PRESETS["h3"]
    w = 4 * (5376 * 256 + 5376 + 2688 * 5376 + 2688)
    one = floors.mlp_work(h3, 1, "fwd")
    assert one.bound == "bytes" and one.bytes == w + 4 * (256 + 2688)
    assert floors.mlp_work(h3, 1, "fwd_bwd").bytes == 3 * w + 2 * 4 * (256 + 2688)
    big = floors.mlp_work(h3, 2048, "fwd_bwd")
    assert big.bound == "flops" and big.flops == 3 * 3 * 2.0 * 2048 * (256 * 5376 + 5376 * 2688)


def test_kernel_bench_verdicts_use_issue_43_table():
    from adaln_bench.kernel_bench.combine import verdicts

    fig = {"vs_stock": 0.9, "of_copy": 0.1, "processes": 3}
    op = {"rows": {"256": {"fwd": {"stock": fig, "bundled": fig}, "fwd_bwd": {"stock": fig, "bundled": fig}}}}
    v = verdicts(op, "timestep_mlp")["bundled"]["256"]
    assert v["fwd"]["passed"] and not v["fwd_bwd"]["passed"] and v["fwd_bwd"]["target"] == "≤ 0.8× stock"
