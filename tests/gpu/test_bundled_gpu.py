"""GPU tests of the bundled CUDA kernel: bitwise invariance, accuracy vs FP64, fail-closed inputs.

Skipped without CUDA (or without a library and a way to build one). Uses small real shapes
(D = 256, N = 6 * 2 * 64 and a larger one) so it runs in seconds.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.fixture(scope="module")
def fwd():
    from adaln_bench.kernels.bundled import candidate as C

    reason = C.availability()
    if reason:
        pytest.skip(f"bundled kernel unavailable: {reason}")
    return C.make_forward(C.get_library(torch.device("cuda", torch.cuda.current_device())))


def _inputs(t, d, n, seed=0):
    g = torch.Generator("cuda").manual_seed(seed)
    temb = torch.randn(t, d, generator=g, device="cuda")
    w = (torch.randn(n, d, generator=g, device="cuda") * d ** -0.5).to(torch.bfloat16)
    b = (torch.randn(n, generator=g, device="cuda") * 0.02).to(torch.bfloat16)
    dy = torch.randn(t, n, generator=g, device="cuda").to(torch.bfloat16)
    return temb, w, b, dy


def _run(fwd, temb, w, b, dy):
    t = temb.detach().clone().requires_grad_(True)
    wl, bl = w.detach().requires_grad_(True), b.detach().requires_grad_(True)
    y = fwd(t, wl, bl)
    y.backward(dy)
    return y.detach(), t.grad, wl.grad, bl.grad


# d_temb's reduction over N (api.cu `Chunking`): N = 18432 (Flux) has 5 chunks, the last shorter, one per group;
# N = 28000 has 7 chunks in groups of 2, the last group a lone shorter chunk; N = 30728 has 8 chunks in groups
# of 2, the last group a whole chunk and a shorter one.
@pytest.mark.parametrize("d,n,t", [(256, 768, 37), (3072, 18432, 521), (256, 28000, 37), (256, 30728, 45),
                                   (256, 768, 2049)])
def test_rows_bitwise_invariant(fwd, d, n, t):
    """Every row (output and d_temb) equals its single-row run, at random positions, for odd T; T = 521
    crosses the portable path's 512-row block of the d_act pass and T = 2049 the sm90 path's 2048-row one;
    the N above cover every way the chunks fall into groups."""
    temb, w, b, dy = _inputs(t, d, n, seed=1)
    ys, gs = [], []
    for i in range(t):
        y, gt, _, _ = _run(fwd, temb[i:i + 1], w, b, dy[i:i + 1])
        ys.append(y)
        gs.append(gt)
    ys, gs = torch.cat(ys), torch.cat(gs)
    y, gt, gw, gb = _run(fwd, temb, w, b, dy)
    assert torch.equal(y, ys), "forward rows differ from single-row runs"
    assert torch.equal(gt, gs), "d_temb rows differ from single-row runs"
    gen = torch.Generator().manual_seed(5)
    # 17, 40, 80: the sm90 forward tiers 0B, 0C, 1B; 257 and 700: its large tiles, an odd and an even count of them
    for m in (2, 3, 7, 9, 17, 40, 64, 80, 129, 257, 700, t):
        if m > t:
            continue
        idx = torch.randperm(t, generator=gen)[:m].to("cuda")
        y, gt, _, _ = _run(fwd, temb[idx], w, b, dy[idx])
        assert torch.equal(y, ys[idx]), f"forward differs in a batch of {m}"
        assert torch.equal(gt, gs[idx]), f"d_temb differs in a batch of {m}"
    # dW, db repeatable
    _, _, gw2, gb2 = _run(fwd, temb, w, b, dy)
    assert torch.equal(gw, gw2) and torch.equal(gb, gb2)


# N = 30736: 8 chunks in groups of 2, the last group a whole chunk and a shorter one (3408 = 53 x 64 + 16).
@pytest.mark.parametrize("d,n", [(256, 18432), (256, 28000), (256, 30736), (2688, 96768)])
def test_sm90_and_portable_paths_agree_bitwise(d, n):
    """The sm90 path sums d_act's chunks inside its GEMM, the portable path folds per-chunk planes: the same
    order by construction (api.cu `Chunking`), so every output and d_temb row must have the same bits.
    Only where D and N are multiples of 16: a K that ends inside a 16-wide step is read with its remainder
    last by CUTLASS 3 and first by CUTLASS 2, which groups the k16 steps differently (seen on the H200 at
    N = 30728). Each path stays invariant either way (test_rows_bitwise_invariant covers N = 30728)."""
    from adaln_bench.kernels.bundled import build as B
    from adaln_bench.kernels.bundled import candidate as C

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("both paths run on compute capability 9.0 only")
    try:
        libs = [B.load(B.target_for_capability(9, 0, forced_path=p)) for p in ("sm90", "portable")]
    except B.BuildError as e:
        pytest.skip(f"a library is missing: {e}")
    temb, w, b, dy = _inputs(67, d, n, seed=3)
    (y1, g1, _, _), (y2, g2, _, _) = (_run(C.make_forward(lib), temb, w, b, dy) for lib in libs)
    assert torch.equal(y1, y2), "forward bits differ between the paths"
    assert torch.equal(g1, g2), "d_temb bits differ between the paths"


@pytest.mark.parametrize("t", [1, 3, 24, 40, 64, 80, 300, 700])
def test_accuracy_vs_fp64(fwd, t):
    _check_accuracy(fwd, t, 512, 6 * 2 * 128)


# dW outside a GEMM (dw_mma.cu, where the path uses it: up to T = 12 on sm90, ADALN_DW_MMA_MAX on portable) and
# otherwise its GEMM, checked the same way: D = 2688 is whole column groups in each dw_mma tier (64, 32 and 32
# columns a warp in 14, 14 and 12 warps), N = 1544 ends inside a 16-row block (rows zero-filled past N), T = 9 ..
# 200 end inside a 16-wide k-step (rows zero past T); the T cover every tier's first and last k-step counts (KT =
# 1, 4; 5, 8; 9, 16).
@pytest.mark.parametrize("t", [2, 9, 17, 33, 48, 64, 65, 100, 128, 129, 200, 256])
def test_dw_accuracy_vs_fp64(fwd, t):
    _check_accuracy(fwd, t, 2688, 1544)


def _check_accuracy(fwd, t, d, n):
    temb, w, b, dy = _inputs(t, d, n, seed=2)
    y, gt, gw, gb = _run(fwd, temb, w, b, dy)
    t64, w64, b64 = (x.double().requires_grad_(True) for x in (temb, w, b))
    ref = F.linear(F.silu(t64), w64, b64)
    ref.backward(dy.double())
    rel = lambda x, r: ((x.double() - r).abs().max() / r.abs().max()).item()  # noqa: E731
    # cuBLAS path for "no worse than" comparisons
    ct, cw, cb = (x.detach().clone().requires_grad_(True) for x in (temb, w, b))
    cy = F.linear(F.silu(ct).to(torch.bfloat16), cw, cb)
    cy.backward(dy)
    assert rel(y, ref.detach()) <= max(1.05 * rel(cy, ref.detach()), 4e-3)
    assert rel(gt, t64.grad) <= 1e-5, rel(gt, t64.grad)
    assert rel(gw, w64.grad) <= max(1.05 * rel(cw.grad, w64.grad), 4e-3)
    assert rel(gb, b64.grad) <= max(1.05 * rel(cb.grad, b64.grad), 4e-3)
    assert gt.dtype == torch.float32 and gw.dtype == torch.bfloat16 and gb.dtype == torch.bfloat16


def test_bad_inputs_fail_closed(fwd):
    temb, w, b, _ = _inputs(4, 256, 768)
    cases = {
        "temb must be float32": (temb.bfloat16(), w, b),
        "w must be bfloat16": (temb, w.float(), b),
        "b must be bfloat16": (temb, w, b.float()),
        "temb must be 2-D": (temb[0], w, b),
        "w has 128 columns": (temb, w[:, :128], b),
        "b has 760 entries": (temb, w, b[:760]),
        "T = 0": (temb[:0], w, b),
        "multiples of 8": (temb[:, :252], w[:, :252], b),
        "different devices": (temb, w.cpu(), b),
        "CUDA device": (temb.cpu(), w.cpu(), b.cpu()),
    }
    for msg, args in cases.items():
        with pytest.raises(ValueError, match=msg):
            fwd(*args)


def test_wrong_gpu_refused(fwd, monkeypatch):
    from adaln_bench.kernels.bundled import build as B
    from adaln_bench.kernels.bundled import candidate as C

    with pytest.raises(B.BuildError, match="not supported"):
        B.target_for_capability(7, 5)
    monkeypatch.setattr(C, "device_cc", lambda dev: 100)
    temb, w, b, _ = _inputs(2, 256, 768)
    with pytest.raises(RuntimeError, match="built for"):
        fwd(temb, w, b)


def test_kernel_bench_of_the_libraries_end_to_end(fwd, tmp_path):
    """`kernel-bench` without --op: the bundled library as a subject of the projection beside cuBLAS, its entry
    points, its bits across the tier sizes, and the output read back by `report` (the loader's schema)."""
    import json

    from tests.conftest import run_cli

    path = "sm90" if torch.cuda.get_device_capability() == (9, 0) else "portable"
    r = run_cli("kernel-bench", "--library", path, "--sizes", "1,64", "--accuracy-sizes", "64", "--processes", "1",
                "--out", str(tmp_path), "--name", "kb", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    op = json.loads((tmp_path / "kb.json").read_text())["combined"]["ops"]["adaln_projection"]
    assert op["bits"]["subjects"][path]["invariant"] and op["bits"]["subjects"][path]["repeatable"]
    assert op["rows"]["64"]["fwd_bwd"][path]["vs_stock"] > 0 and op["rows"]["64"]["fwd"][path]["of_floor"] > 0
    assert set(op["entries"][path]["64"]) == {"fwd", "d_temb", "dW", "db"}
    shown = run_cli("report", str(tmp_path / "kb.json"))
    assert shown.returncode == 0 and f"| adaln_projection | {path} | 64 |" in shown.stdout
