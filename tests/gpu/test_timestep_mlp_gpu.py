"""GPU tests of the bundled timestep MLP (adaln_bench/kernels/timestep_mlp, docs/kernels-timestep_mlp.md): the H3
shape's rows bitwise the same whatever T and tile configuration, repeatable weight gradients, every error against
FP64 within the issue's bound, and the contract every bundled kernel keeps: a fresh process (forward, then one
backward with torch's default autograd threads), a thread that never touched CUDA, CUDA-graph capture, clear
errors on bad inputs. Skipped without CUDA (or without a library and a way to build one).
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest
import torch
import torch.nn.functional as F

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

F_IN, HID, D = 256, 5376, 2688


@pytest.fixture(scope="module")
def lib():
    from adaln_bench.kernels import timestep_mlp
    from adaln_bench.kernels.timestep_mlp import ops

    reason = timestep_mlp.availability()
    if reason:
        pytest.skip(f"timestep_mlp kernel unavailable: {reason}")
    return ops.library(torch.device("cuda", torch.cuda.current_device()))


@pytest.fixture(scope="module")
def params():
    g = torch.Generator("cuda").manual_seed(3)
    w1 = torch.randn(HID, F_IN, generator=g, device="cuda") * F_IN ** -0.5
    b1 = torch.randn(HID, generator=g, device="cuda") * 0.02
    w2 = torch.randn(D, HID, generator=g, device="cuda") * HID ** -0.5
    b2 = torch.randn(D, generator=g, device="cuda") * 0.02
    return w1, b1, w2, b2


def _rows(t, seed=5):
    g = torch.Generator("cuda").manual_seed(seed)
    return torch.randn(t, F_IN, generator=g, device="cuda"), torch.randn(t, D, generator=g, device="cuda")


def _run(x, dy, params):
    from adaln_bench.kernels.timestep_mlp import timestep_mlp

    leaves = [t.detach().clone().requires_grad_() for t in (x, *params)]
    y = timestep_mlp(*leaves)
    return (y.detach(), *torch.autograd.grad(y, leaves, dy))


def _stock(x, dy, params):
    leaves = [t.detach().clone().requires_grad_() for t in (x, *params)]
    y = F.linear(F.silu(F.linear(leaves[0], leaves[1], leaves[2])), leaves[3], leaves[4])
    return (y.detach(), *torch.autograd.grad(y, leaves, dy))


def _rel(a, ref):
    return ((a.double() - ref).abs().max() / ref.abs().max()).item()


def test_rows_do_not_depend_on_t(lib, params):
    x, dy = _rows(2048)
    y, dx, *_ = _run(x, dy, params)
    for lo, t in ((0, 1), (5, 3), (100, 4), (9, 8), (40, 9), (17, 16), (3, 31), (64, 64), (300, 257), (1024, 1024)):
        ys, dxs, *_ = _run(x[lo:lo + t], dy[lo:lo + t], params)
        assert torch.equal(ys, y[lo:lo + t]), f"y rows {lo}..{lo + t} differ at T = {t}"
        assert torch.equal(dxs, dx[lo:lo + t]), f"dx rows {lo}..{lo + t} differ at T = {t}"


@pytest.mark.parametrize("t", [5, 300])
def test_tile_configuration_changes_no_bit(lib, params, t):
    # 4 is the weight-streaming kernel (small T by default), 0..3 the CUTLASS tiles: every output the same bits
    x, dy = _rows(t, seed=7)
    base = _run(x, dy, params)
    old = lib.force_config(-1)
    try:
        for c in (0, 1, 2, 3, 4):
            lib.force_config(c)
            got = _run(x, dy, params)
            for name, a, b in zip(("y", "dx", "dw1", "db1", "dw2", "db2"), got, base):
                assert torch.equal(a, b), f"{name} at T = {t} with configuration {c}"
    finally:
        lib.force_config(old)


@pytest.mark.parametrize("t", [3, 257])
def test_weight_gradients_repeat(lib, params, t):
    x, dy = _rows(t, seed=11)
    first, second = _run(x, dy, params), _run(x, dy, params)
    for name, a, b in zip(("y", "dx", "dw1", "db1", "dw2", "db2"), first, second):
        assert torch.equal(a, b), f"{name} differs between two runs at T = {t}"


@pytest.mark.parametrize("t", [1, 4, 64, 2048])
def test_errors_within_the_bound(lib, params, t):
    x, dy = _rows(t, seed=13)
    ref = _stock(x.double(), dy.double(), [p.double() for p in params])
    ours, stock = _run(x, dy, params), _stock(x, dy, params)
    for name, o, s, r in zip(("y", "dx", "dw1", "db1", "dw2", "db2"), ours, stock, ref):
        bound = min(max(2 * _rel(s, r), 1e-7), 1e-5)
        assert _rel(o, r) <= bound, f"{name} at T = {t}: {_rel(o, r):.3g} > {bound:.3g} (stock {_rel(s, r):.3g})"


def test_cuda_graph_capture_matches_eager(lib, params):
    from adaln_bench.kernels.timestep_mlp import timestep_mlp

    x, dy = _rows(64, seed=17)
    leaves = [t.detach().clone().requires_grad_() for t in (x, *params)]
    eager = _run(x, dy, params)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up on the side stream, as torch's graph docs ask
        y = timestep_mlp(*leaves)
        torch.autograd.grad(y, leaves, dy)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = timestep_mlp(*leaves)
        grads = torch.autograd.grad(y, leaves, dy)
    graph.replay()
    torch.cuda.synchronize()
    for name, a, b in zip(("y", "dx", "dw1", "db1", "dw2", "db2"), (y, *grads), eager):
        assert torch.equal(a.detach(), b), f"{name}: graph replay differs from eager"


def test_a_thread_new_to_cuda(lib, params):
    x, dy = _rows(5, seed=19)
    want = _run(x, dy, params)
    got, errors = [], []

    def work():
        try:
            got.append(_run(x, dy, params))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    th = threading.Thread(target=work)
    th.start()
    th.join()
    assert not errors, errors
    assert all(torch.equal(a, b) for a, b in zip(got[0], want))


def test_fresh_process_forward_then_backward(lib):
    code = textwrap.dedent("""
        import torch
        from adaln_bench.kernels.timestep_mlp import timestep_mlp
        g = torch.Generator("cuda").manual_seed(1)
        leaves = [(torch.randn(*s, generator=g, device="cuda") * 0.05).requires_grad_()
                  for s in ((3, 256), (5376, 256), (5376,), (2688, 5376), (2688,))]
        y = timestep_mlp(*leaves)
        y.sum().backward()  # torch's default autograd: the backward runs on its device thread
        torch.cuda.synchronize()
        assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in leaves)
        print("ok", float(y.double().sum()))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.startswith("ok"), proc.stdout + proc.stderr[-3000:]


def test_bad_inputs_give_clear_errors(lib, params):
    from adaln_bench.kernels.timestep_mlp import timestep_mlp

    w1, b1, w2, b2 = params
    x = torch.randn(4, F_IN, device="cuda")
    cases = [
        ((x.bfloat16(), w1, b1, w2, b2), "x must be torch.float32"),
        ((x, w1[:, :128], b1, w2, b2), "w1 must have shape"),
        ((x, w1, b1, w2[:, :64], b2), "w2 must have shape"),
        ((x.cpu(), w1, b1, w2, b2), "different devices"),
        ((x.cpu(), w1.cpu(), b1.cpu(), w2.cpu(), b2.cpu()), "CUDA device"),
        ((x[:0], w1, b1, w2, b2), "at least one row"),
    ]
    for args, message in cases:
        with pytest.raises(ValueError, match=message):
            timestep_mlp(*args)
