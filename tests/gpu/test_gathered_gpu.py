"""GPU tests of the gathered-operator kernels' norm backward (adaln_bench/kernels/gathered, docs/kernels.md):
one pass and two passes both FP64-close, the one-pass backward's rows independent of the batch and its table
gradients repeatable, with every token on one table entry (the skew real packed sequences have), with
out-of-range indices, and above the one-pass width, the ring depth changing no bit; then `kernel-bench --op` end to
end at small sizes.

Small shapes, so it runs in seconds. Skipped without CUDA (or without a library and a way to build one).
"""
from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.fixture(scope="module")
def lib():
    from adaln_bench.kernels import gathered
    from adaln_bench.kernels.gathered import ops

    reason = gathered.availability()
    if reason:
        pytest.skip(f"gathered kernels unavailable: {reason}")
    return ops.library(torch.device("cuda", torch.cuda.current_device()))


def _inputs(s, h, idx=None, seed=0):
    g = torch.Generator("cuda").manual_seed(seed)
    x = (torch.randn(s, h, generator=g, device="cuda") * 2).bfloat16()
    w = (0.5 + torch.rand(h, generator=g, device="cuda")).bfloat16()
    sh, sc = ((torch.randn(9, h, generator=g, device="cuda") * 0.1).bfloat16() for _ in range(2))
    if idx is None:
        idx = torch.randint(0, 9, (s,), generator=g, device="cuda")
    dy = torch.randn(s, h, generator=g, device="cuda").bfloat16()
    return x, w, sh, sc, idx, dy


def _run(x, w, sh, sc, idx, dy):
    from adaln_bench.kernels.gathered import norm_modulate

    leaves = [t.detach().requires_grad_() for t in (x, w, sh, sc)]
    y = norm_modulate(*leaves, idx)
    grads = torch.autograd.grad(y, leaves, dy)
    return y.detach(), grads


def _reference(x, w, sh, sc, idx, dy):
    leaves = [t.detach().double().requires_grad_() for t in (x, w, sh, sc)]
    xd, wd, shd, scd = leaves
    y = xd * torch.rsqrt((xd * xd).mean(1, keepdim=True) + 1e-5) * wd * (1 + scd[idx]) + shd[idx]
    return torch.autograd.grad(y, leaves, dy.double())


def _rel(a, ref):
    return ((a.double() - ref).abs().max() / ref.abs().max()).item()


@pytest.mark.parametrize("h, s, skew", [(64, 600, False), (200, 1100, False), (5376, 4097, False), (5376, 3000, True)])
def test_one_and_two_passes_are_fp64_close(lib, h, s, skew):
    inputs = _inputs(s, h, torch.full((s,), 4, device="cuda") if skew else None)
    ref = _reference(*inputs)
    old = lib.set_norm_backward(1)
    try:
        two = _run(*inputs)[1]
        lib.set_norm_backward(2)
        assert lib.norm_backward_path(h) == 2
        one = _run(*inputs)[1]
    finally:
        lib.set_norm_backward(old)
    for g1, g2, r in zip(one, two, ref):
        assert _rel(g1, r) < 1e-2 and _rel(g2, r) < 1e-2


def test_one_pass_rows_do_not_see_the_batch_and_table_gradients_repeat(lib):
    x, w, sh, sc, idx, dy = _inputs(5000, 5376)
    y, (dx, dw, dsh, dsc) = _run(x, w, sh, sc, idx, dy)
    for rows in (slice(0, 1), slice(17, 18), slice(4096, 5000), slice(0, 700)):
        y2, (dx2, *_rest) = _run(x[rows], w, sh, sc, idx[rows], dy[rows])
        assert torch.equal(y2, y[rows]) and torch.equal(dx2, dx[rows])
    _y, again = _run(x, w, sh, sc, idx, dy)
    assert all(torch.equal(a, b) for a, b in zip(again[1:], (dw, dsh, dsc)))


def test_the_ring_depth_leaves_every_bit_alone(lib):
    """The one-pass kernel stages 10 rows where they fit, 8 on request: the same sums in the same order."""
    inputs = _inputs(5000, 5376)
    optin = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    deep = lib.onepass_ring(5376, optin)
    y, grads = _run(*inputs)
    old = lib.set_onepass_ring(8)
    try:
        assert lib.onepass_ring(5376, optin) == 8
        y8, grads8 = _run(*inputs)
    finally:
        lib.set_onepass_ring(old)
    assert deep in (8, 10) and torch.equal(y, y8) and all(torch.equal(a, b) for a, b in zip(grads, grads8))


def test_out_of_range_indices_give_nan_rows_and_stay_out_of_the_sums(lib):
    x, w, sh, sc, idx, dy = _inputs(300, 64)
    bad = idx.clone()
    bad[[5, 77]] = 11
    _y, (dx, dw, dsh, dsc) = _run(x, w, sh, sc, bad, dy)
    assert torch.isnan(dx[[5, 77]]).all() and not torch.isnan(dx[[4, 6, 78]]).any()
    keep = torch.ones(300, dtype=torch.bool, device="cuda")
    keep[[5, 77]] = False
    ref = _reference(x[keep], w, sh, sc, idx[keep], dy[keep])
    assert _rel(dsh, ref[2]) < 1e-2 and _rel(dsc, ref[3]) < 1e-2


def test_wider_rows_than_one_pass_takes_run_two_passes(lib):
    assert lib.norm_backward_path(6152) == 1
    inputs = _inputs(50, 6152)
    grads = _run(*inputs)[1]
    for g, r in zip(grads, _reference(*inputs)):
        assert _rel(g, r) < 1e-2


def test_final_adaln_out_writes_its_table_gradient_whole_with_the_slice_paths_values(lib):
    """final_adaln_out's norm part takes the (3, 2H) table whole and writes its gradient whole: the same values as
    the two slice views through norm_modulate's Function (their SliceBackward adds turn a -0 into +0, hence the
    == compare), and d_temb, dW, db FP64-close."""
    import torch.nn.functional as F

    from adaln_bench.kernels.gathered import final_adaln_out
    from adaln_bench.kernels.gathered.ops import _NormModulate

    s, h, d = 3000, 5376, 64
    g = torch.Generator("cuda").manual_seed(3)
    x = torch.randn(s, h, generator=g, device="cuda").bfloat16()
    nw = (0.5 + torch.rand(h, generator=g, device="cuda")).bfloat16()
    temb = torch.randn(3, d, generator=g, device="cuda")
    w = (torch.randn(2 * h, d, generator=g, device="cuda") * 0.05).bfloat16()
    b = (torch.randn(2 * h, generator=g, device="cuda") * 0.05).bfloat16()
    ti = torch.randint(0, 3, (s,), generator=g, device="cuda")
    dy = torch.randn(s, h, generator=g, device="cuda").bfloat16()

    leaves = [t.detach().requires_grad_() for t in (x, nw, temb, w, b)]
    y = final_adaln_out(*leaves[:2], leaves[2], leaves[3], leaves[4], ti)
    grads = torch.autograd.grad(y, leaves, dy)

    old = [t.detach().requires_grad_() for t in (x, nw, temb, w, b)]
    table = F.linear(F.silu(old[2]).to(torch.bfloat16), old[3], old[4])
    y_old = _NormModulate.apply(old[0], old[1], table[:, :h], table[:, h:], ti, 3)
    grads_old = torch.autograd.grad(y_old, old, dy)
    assert torch.equal(y, y_old)
    assert all(bool((a == c).all()) for a, c in zip(grads, grads_old))

    ref = [t.detach().double().requires_grad_() for t in (x, nw, temb, w, b)]
    tab = F.linear(F.silu(ref[2]), ref[3], ref[4])
    xd = ref[0]
    y_ref = xd * torch.rsqrt((xd * xd).mean(1, keepdim=True) + 1e-5) * ref[1] * (1 + tab[ti, h:]) + tab[ti, :h]
    for a, r in zip(grads, torch.autograd.grad(y_ref, ref, dy.double())):
        assert _rel(a, r) < 2e-2


def test_kernel_bench_with_an_operator_end_to_end(tmp_path, lib):
    import json

    from tests.conftest import run_cli

    r = run_cli("kernel-bench", "--op", "gate_residual", "--sizes", "64,4097", "--processes", "1",
                "--out", str(tmp_path), "--name", "kb", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads((tmp_path / "kb.json").read_text())
    op = doc["combined"]["ops"]["gate_residual"]
    assert op["bits"]["subjects"]["bundled"]["invariant"] and op["bits"]["subjects"]["bundled"]["repeatable"]
    assert op["rows"]["4097"]["fwd_bwd"]["bundled"]["vs_stock"] < 1.0
    assert "## gate_residual" in (tmp_path / "kb.md").read_text()
