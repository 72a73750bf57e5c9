"""CPU checks of adaln_bench.draws: geometry parsing, the launch/offset arithmetic against worked examples, the
element layout (with a fake Philox that tags every word with where it came from), the numpy model (Philox
known-answer vectors, published torch CUDA outputs), and that the CUDA source compiles for sm_90a and sm_100a.

The compile test skips (with the reason) when nvcc or curand's device headers are missing (`pip install
nvidia-curand` gives the headers); it takes about 10 s on two cores. The bitwise comparison against torch
itself needs a GPU: tests/gpu/test_draws_gpu.py and tools/draws_check.py.
"""
from __future__ import annotations

import ctypes
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from adaln_bench.draws import build as B
from adaln_bench.draws import geometry, plan_draw
from adaln_bench.draws import plan as P
from adaln_bench.draws import reference as R
from adaln_bench.errors import UserError
from adaln_bench.kernels import toolchain

H = 5376


# --- geometry ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, name, sms", [("native", "native", None), ("NATIVE", "native", None),
                                             ("h200", "h200", 132), ("B200", "b200", 148), (" 148 ", "148", 148),
                                             ("132", "132", 132), ("1", "1", 1), ("0148", "148", 148)])
def test_geometry_parses(text, name, sms):
    g = geometry(text)
    assert (g.name, g.sms, g.threads_per_sm) == (name, sms, 2048)
    assert g.is_native == (sms is None)


@pytest.mark.parametrize("text", ["", "0", "-3", "h100", "1.5", "132 SMs", "b200x", "+5", "١٣٢"])
def test_geometry_rejects_with_one_line(text):
    with pytest.raises(UserError) as e:
        geometry(text)
    msg = str(e.value)
    assert "\n" not in msg and repr(text) in msg and "native" in msg and e.value.exit_code == 2


def test_draws_imports_no_other_part_of_the_package():
    # the errors module and the kernel toolchain (stdlib only) are the leaves draws may use; the package's root
    # imports moved_modules (stdlib only) to keep old module paths importable
    code = ("ALLOWED = {'adaln_bench.errors', 'adaln_bench.kernels', 'adaln_bench.moved_modules'}; "
            "import sys, adaln_bench.draws, adaln_bench.draws.plan, adaln_bench.draws.reference, "
            "adaln_bench.draws.build; "
            "bad = sorted(m for m in sys.modules if m.startswith('adaln_bench.') and m not in ALLOWED "
            "and not m.startswith(('adaln_bench.draws', 'adaln_bench.kernels.toolchain'))); "
            "print(bad); assert not bad and 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


# --- the launch and offset arithmetic --------------------------------------------------------------------------

@pytest.mark.parametrize("numel, sms, blocks, inc", [
    (1, 132, 1, 4), (256, 132, 1, 4), (257, 132, 2, 4), (1000, 132, 4, 4),
    (270_336, 132, 1056, 4), (270_337, 132, 1056, 4), (270_337, 148, 1057, 4),
    (1_081_344, 132, 1056, 4), (1_081_345, 132, 1056, 8), (1_081_345, 148, 1184, 4),
    (4097 * H, 132, 1056, 84), (4097 * H, 148, 1184, 76),  # 22,025,472: 21 and 19 rounds
    (28_901_376, 132, 1056, 108), (20_000, 1, 8, 12),  # 28.9 M = 5376^2; one SM: 2048 threads, 3 rounds
])
def test_worked_examples(numel, sms, blocks, inc):
    (la,), after = plan_draw(numel, 0, sms)
    assert (la.start, la.numel, la.blocks, la.offset, la.increment, after) == (0, numel, blocks, 0, inc, inc)
    assert la.rounds * 4 * la.threads >= numel > (la.rounds - 1) * 4 * la.threads


def test_threads_per_sm_sets_the_cap():
    assert P.max_blocks(132) == 1056 and P.max_blocks(148) == 1184
    assert P.max_blocks(84, threads_per_sm=1536) == 504  # a GPU with 1536 threads per SM: 6 blocks per SM
    with pytest.raises(ValueError):
        P.max_blocks(0)


def test_six_successive_upstream_draws_offsets():
    """adaln_row_gather's six (4097, 5376) upstream draws from one generator."""
    for sms, inc in ((132, 84), (148, 76)):
        offset, starts = 0, []
        for _ in range(6):
            (la,), offset = plan_draw(4097 * H, offset, sms)
            starts.append(la.offset)
        assert starts == [inc * k for k in range(6)] and offset == 6 * inc


def test_zero_elements_take_no_offset():
    assert plan_draw(0, 40, 132) == ([], 40)
    with pytest.raises(ValueError):
        plan_draw(10, 6, 132)  # not a multiple of 4


def test_32bit_split_of_the_full_token_batch():
    """(131072, 5376) float32 is 2.8 GB: past int32 byte offsets, so torch charges the whole tensor's increment,
    then draws each half as its own launch."""
    assert P.fits_32bit(536_870_912) and not P.fits_32bit(536_870_913)
    launches, after = plan_draw(131072 * H, 0, 132)
    whole = P.offset_increment(131072 * H, 1056)
    assert whole == 2608
    assert [(la.start, la.numel, la.blocks, la.offset, la.increment) for la in launches] == [
        (0, 352_321_536, 1056, 2608, 1304), (352_321_536, 352_321_536, 1056, 3912, 1304)]
    assert after == 5216


def test_split_is_depth_first_halves():
    """2^31 + 5 elements: halves 1073741826 and 1073741827, then 536870913 x 3 and 536870914, each still one
    past the limit, so halved once more; launched first half first, all the way down."""
    parts = P.split_32bit(2**31 + 5)
    sizes = [268_435_456, 268_435_457] * 3 + [268_435_457, 268_435_457]
    assert [n for _, n in parts] == sizes
    assert [s for s, _ in parts] == [sum(sizes[:k]) for k in range(8)]
    launches, after = plan_draw(2**31 + 5, 0, 132)
    assert [la.start for la in launches] == [s for s, _ in parts]
    assert after == P.offset_increment(2**31 + 5, 1056) + sum(la.increment for la in launches)


def test_where_h200_and_b200_draws_part():
    """A first draw agrees across 132 and 148 SMs only on its first 270,336 elements, and only when it has more
    than that (docs/spec.md#11-seeded-draws-on-another-gpu)."""
    assert P.first_difference(50 * H, 132, 148) is None and P.first_difference(51 * H, 132, 148) == 270_336
    assert P.first_difference(100 * 2688, 132, 148) is None and P.first_difference(101 * 2688, 132, 148) == 270_336
    assert P.first_difference(1056 * 256, 132, 148) is None and P.first_difference(1057 * 256, 132, 148) == 270_336
    assert P.first_difference(2 * 96768, 132, 148) is None and P.first_difference(3 * 96768, 132, 148) == 270_336
    assert 9 * 32256 - P.first_difference(9 * 32256, 132, 148) == 19_968
    # a later draw starts elsewhere once an earlier one passed 4 x the stride on one GPU but not the other
    assert plan_draw(1_081_344, 0, 132)[1] == plan_draw(1_081_344, 0, 148)[1] == 4
    assert plan_draw(1_081_345, 0, 132)[1] == 8 != plan_draw(1_081_345, 0, 148)[1]


# --- the element layout, with a fake Philox ---------------------------------------------------------------------

def _tagging_words(subseq: np.ndarray, counter: np.ndarray) -> np.ndarray:
    """Word w of (subsequence s, counter step c) is s * 2^16 + c * 4 + w: which word landed where is readable."""
    base = subseq.astype(np.uint64) * np.uint64(1 << 16) + counter.astype(np.uint64) * np.uint64(4)
    return np.stack([base + np.uint64(w) for w in range(4)]).astype(np.uint32)


@pytest.mark.parametrize("numel, sms, offset", [(5, 132, 0), (2048 * 8 + 1234, 1, 0), (2048 * 8 + 1234, 1, 8),
                                                (3 * 4096 * 3, 2, 12), (100_003, 7, 40)])
def test_layout_matches_the_unrolled_loop(numel, sms, offset):
    (la,), _ = plan_draw(numel, offset, sms)
    got = R.launch_words(la, _tagging_words).astype(np.int64)
    assert got.shape == (numel,)
    g_threads = la.threads
    i = np.arange(numel)
    r, rest = np.divmod(i, 4 * g_threads)
    w, g = np.divmod(rest, g_threads)
    want = g * (1 << 16) + (offset // 4 + r) * 4 + w  # element r*4G + w*G + g = word w of thread g, round r
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(got)) == numel  # no word used twice
    for k in (0, numel // 3, numel - 1):
        s, c, wd = P.element_source(k, la)
        assert got[k] == s * (1 << 16) + c * 4 + wd


def test_successive_draws_use_fresh_counters():
    """Draw two tensors from one generator: the second starts at the first's offset after, so no (thread,
    counter) pair is used twice."""
    seen = set()
    offset = 0
    for numel in (5000, 3000, 70_000):
        (la,), offset = plan_draw(numel, offset, 1)
        tags = R.launch_words(la, _tagging_words).astype(np.int64) // 4
        pairs = set(np.unique(tags).tolist())
        assert not pairs & seen
        seen |= pairs


# --- the numpy model ---------------------------------------------------------------------------------------------

def test_philox_known_answers():
    """Random123's known-answer vectors for Philox4x32-10."""
    cases = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
             ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
             ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
              (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for ctr, key, want in cases:
        got = R.philox4x32_10(np.array(ctr, dtype=np.uint32).reshape(4, 1), key)[:, 0]
        assert tuple(int(x) for x in got) == want


def test_model_matches_published_torch_cuda_draws():
    """torch.manual_seed(42); torch.randn(2, 5, device='cuda') as printed in public examples (4 decimals)."""
    x, after = R.emulate("randn", 10, 42, 0, 132)
    want = [0.1940, 2.1614, -0.1721, 0.8491, -1.9244, 0.6530, -0.6494, -0.8175, 0.5280, -1.2753]
    np.testing.assert_allclose(x, want, atol=6e-5)
    assert after == 4


def test_model_matches_published_torch_cuda_successive_rand_draws():
    """torch.manual_seed(0); torch.rand(10, device='cuda') twice, as printed in public examples (4 decimals):
    the second draw starts at offset 4, Philox counter step 1."""
    first, off = R.emulate("rand", 10, 0, 0, 132)
    second, off2 = R.emulate("rand", 10, 0, off, 132)
    np.testing.assert_allclose(first, [0.3990, 0.5167, 0.0249, 0.9401, 0.9459, 0.7967, 0.4150, 0.8203, 0.2290,
                                       0.9096], atol=6e-5)
    np.testing.assert_allclose(second, [0.9722, 0.7910, 0.4690, 0.3300, 0.3345, 0.3783, 0.7640, 0.6405, 0.1103,
                                        0.3594], atol=6e-5)
    assert (off, off2) == (4, 8)


def test_model_rand_range_and_normal_moments():
    u, _ = R.emulate("rand", 300_000, 7, 0, 132)
    assert u.dtype == np.float32 and u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 3e-3
    z, _ = R.emulate("randn", 300_000, 7, 0, 132)
    assert abs(z.mean()) < 1e-2 and abs(z.std() - 1.0) < 1e-2
    # one rand word of all ones is 1.0 in curand's (0, 1], which torch maps to 0.0
    assert R.uniform_from_words(np.array([0xFFFFFFFF, 0, 0x7FFFFFFF], dtype=np.uint32)).tolist() == \
        [0.0, 2.0**-33, 0.5]


def test_model_first_elements_agree_across_geometries():
    n = 4097 * H // 8  # 2.75 M elements: several rounds on both
    a, _ = R.emulate("rand", n, 3, 0, 132)
    b, _ = R.emulate("rand", n, 3, 0, 148)
    assert np.array_equal(a[:270_336], b[:270_336]) and not np.array_equal(a[270_336:], b[270_336:])


# --- the CUDA source compiles ------------------------------------------------------------------------------------

_MISSING = toolchain.missing(B.recipe("sm_90a"))
ARCHS = ("sm_90a", "sm_100a")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if _MISSING:
        pytest.skip(_MISSING)
    root = tmp_path_factory.mktemp("draws-build")
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda a: toolchain.compile_library(B.recipe(a), root / a), ARCHS))
    return {a: root / a / B.LIB_NAME for a in ARCHS}


@pytest.mark.parametrize("arch", ARCHS)
def test_cuda_source_compiles_and_loads(built, arch):
    lib = B.Library(built[arch])  # loads without a GPU (the CUDA runtime is linked statically)
    assert lib.threads_per_block == P.BLOCK_THREADS
    raw = ctypes.CDLL(str(built[arch]))
    err = ctypes.create_string_buffer(256)
    fill = raw.adaln_draws_fill
    fill.argtypes = B.Library(built[arch])._lib.adaln_draws_fill.argtypes
    # bad arguments are refused before any CUDA call: fail closed, with a message
    assert fill(7, None, 10, 0, 0, 1, 0.0, 1.0, 0, None, err, 256) == 1 and b"kind" in err.value
    assert fill(0, None, 10, 0, 0, 1, 0.0, 1.0, 0, None, err, 256) == 1 and b"bad launch" in err.value
    assert fill(0, 16, 10, 0, 6, 1, 0.0, 1.0, 0, None, err, 256) == 1 and b"multiple of 4" in err.value


def test_recipe_and_cached_library_pickup(tmp_path, monkeypatch):
    monkeypatch.setenv("ADALN_BENCH_KERNEL_CACHE", str(tmp_path))
    monkeypatch.delenv("ADALN_BENCH_DRAWS_NVCC_FLAGS", raising=False)
    r = B.recipe("sm_90a")
    assert r.nvcc_flags() == ["-std=c++17", "-O3", "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden",
                              "-gencode=arch=compute_90a,code=sm_90a"]
    assert r.header_sets == (toolchain.CURAND,) and toolchain.CURAND.staged == "curand*.h"
    monkeypatch.setenv("ADALN_BENCH_DRAWS_NVCC_FLAGS", "-lineinfo  -Xptxas=-v")  # an experiment: its own key
    assert B.recipe("sm_90a").nvcc_flags()[-2:] == ["-lineinfo", "-Xptxas=-v"]
    assert toolchain.cache_key(B.recipe("sm_90a")) != toolchain.cache_key(r)
    monkeypatch.delenv("ADALN_BENCH_DRAWS_NVCC_FLAGS")
    d = toolchain.library_dir(r)
    assert d == tmp_path / f"draws-sm_90a-{toolchain.cache_key(r)}" != toolchain.library_dir(B.recipe("sm_100a"))
    d.mkdir()
    (d / B.LIB_NAME).write_bytes(b"prebuilt")
    monkeypatch.setenv("ADALN_BENCH_NVCC", "/nonexistent/nvcc")  # a cached library needs no compiler nor headers
    monkeypatch.setenv("ADALN_BENCH_CURAND_INCLUDE", "/nonexistent")
    assert toolchain.ensure_library(r)[0] == d / B.LIB_NAME
    assert B.arch_for_capability(9, 0) == "sm_90a" and B.arch_for_capability(10, 0) == "sm_100a"
    assert B.arch_for_capability(8, 0) == "sm_80"


# --- the torch API on the CPU (the numpy model fills) and the GPU check script's flow ------------------------------

def test_generator_api_on_the_cpu_model():
    import torch

    from adaln_bench import draws

    g = draws.generator("h200", 42, "cpu")
    assert isinstance(g, draws.GeometryGenerator) and (g.sms, g.get_offset(), g.initial_seed()) == (132, 0, 42)
    x = draws.randn((2, 5), g)
    assert x.dtype == torch.float32 and x.shape == (2, 5) and g.get_offset() == 4
    torch.testing.assert_close(x.flatten(), torch.tensor(
        [0.1940, 2.1614, -0.1721, 0.8491, -1.9244, 0.6530, -0.6494, -0.8175, 0.5280, -1.2753]), atol=6e-5, rtol=0)
    out = torch.empty(4097, 3)
    assert draws.rand((4097, 3), g, out=out) is out and g.get_offset() == 8
    want, after = R.emulate("rand", 4097 * 3, 42, 4, 132)
    assert np.array_equal(out.numpy().reshape(-1), want) and after == 8
    with pytest.raises(ValueError):
        draws.rand((3, 3), g, out=torch.empty(3, 3, dtype=torch.bfloat16))
    assert draws.randn((0, 5), g).shape == (0, 5) and g.get_offset() == 8
    g.manual_seed(42)
    assert g.get_offset() == 0 and torch.equal(draws.randn(10, g), x.flatten())
    native = draws.generator("native", 42, "cpu")
    assert isinstance(native, torch.Generator)
    assert torch.equal(draws.randn(4, native), torch.randn(4, generator=torch.Generator().manual_seed(42)))
    with pytest.raises(ValueError):
        draws.GeometryGenerator(-1, 132, "cpu")


def test_gpu_check_script_runs_its_flow_on_the_cpu(tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "check.json"
    proc = subprocess.run([sys.executable, str(root / "tools" / "draws_check.py"), "--device", "cpu", "--quick",
                           "--json", str(out)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr  # torch's CPU generator is not Philox: every bitwise case differs
    assert "rand equals the numpy model bit for bit: True" in proc.stdout and "-> ok" in proc.stdout
    import json

    rep = json.loads(out.read_text())
    assert rep["results"][-1]["ok"] is True and rep["failures"] == len(rep["results"]) - 1
