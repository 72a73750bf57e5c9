"""Runs, accuracy and fingerprints on the CPU with real tensors (the tiny shape)."""
import torch
import torch.nn.functional as F

from adaln_bench.harness.measurement.accuracy import measure_accuracy, rel_err
from adaln_bench.ops.adaln_projection.inputs import make_params, make_temb, make_upstream
from adaln_bench.harness.assembly.shapes import PRESETS
from adaln_bench.harness.measurement.workload import Workload
from adaln_bench.ops.adaln_projection import replay
from adaln_bench.ops.candidates import Implementation
from fixture_candidates import projection_subject

CPU = torch.device("cpu")
SHAPE = PRESETS["tiny"]


def _impl(fn=replay):
    return Implementation(source="test", has_backward=True, forward=fn)


def test_inputs_follow_the_seeding_contract():
    params = make_params(SHAPE, CPU)
    g = torch.Generator(device="cpu").manual_seed(1 * 1000 + 8)
    expected_w = (torch.randn(SHAPE.out_features, SHAPE.dim, generator=g) * SHAPE.dim ** -0.5).to(torch.bfloat16)
    assert torch.equal(params.weight, expected_w)
    g = torch.Generator(device="cpu").manual_seed(3 * 1000 + 7)
    assert torch.equal(make_temb(5, SHAPE, 3, CPU), torch.randn(5, SHAPE.dim, generator=g))
    assert params.weight.dtype == params.bias.dtype == torch.bfloat16


def test_a_run_uses_the_matching_rows_of_the_full_batch_upstream():
    params = make_params(SHAPE, CPU)
    run = Workload(projection_subject(_impl(), SHAPE), params.as_inputs(), SHAPE, CPU)
    got = run(4, 10, [7, 2])
    temb = make_temb(10, SHAPE, 4, CPU)[[7, 2]].requires_grad_()
    w = params.weight.detach().requires_grad_()
    b = params.bias.detach().requires_grad_()
    out = replay(temb, w, b)
    out.backward(make_upstream((10, SHAPE.out_features), torch.bfloat16, 4, CPU)[[7, 2]])
    assert torch.equal(got.outs[0], out.detach())
    assert torch.equal(got.row_grads[0], temb.grad)
    assert torch.equal(got.param_grads[0], w.grad) and torch.equal(got.param_grads[1], b.grad)


def test_accuracy_of_the_bf16_path_and_of_an_fp64_candidate():
    params = make_params(SHAPE, CPU)
    subject = projection_subject(_impl(), SHAPE)
    fwd, grads, repeat = measure_accuracy(subject, params.as_inputs(), SHAPE, CPU, tokens=1)
    assert repeat is None  # not asked for
    assert 1e-4 < fwd < 1e-2
    # At T = 1, db is the upstream gradient itself: exact (the reference report shows 0.0 too).
    assert grads.b == 0.0
    assert 1e-4 < grads.temb < 1e-2

    def fp64(temb, w, b):
        return F.linear(F.silu(temb.double()), w.double(), b.double())

    fwd64, grads64, _ = measure_accuracy(projection_subject(_impl(fp64), SHAPE), params.as_inputs(), SHAPE, CPU,
                                      tokens=3)
    # Its d_temb lands in temb's float32: only that one rounding remains.
    assert fwd64 < 1e-12 and grads64.temb < 1e-6


class _DriftingBiasGrad(torch.autograd.Function):
    """The identity, whose gradient gains one ulp more on every call: a parameter gradient summed in an order
    that changes from run to run, as atomics do."""

    calls = 0

    @staticmethod
    def forward(ctx, b):
        return b.view_as(b)

    @staticmethod
    def backward(ctx, grad):
        _DriftingBiasGrad.calls += 1
        return grad + _DriftingBiasGrad.calls * torch.finfo(grad.dtype).eps * grad.abs().max()


def test_accuracy_asked_to_repeat_tells_repeatable_parameter_gradients_from_drifting_ones():
    params = make_params(SHAPE, CPU)
    steady = measure_accuracy(projection_subject(_impl(), SHAPE), params.as_inputs(), SHAPE, CPU, tokens=3,
                              repeat_params=True)
    assert steady.params_repeatable is True

    def drifting(temb, w, b):
        return replay(temb, w, _DriftingBiasGrad.apply(b))

    moving = measure_accuracy(projection_subject(_impl(drifting), SHAPE), params.as_inputs(), SHAPE, CPU,
                              tokens=3, repeat_params=True)
    assert moving.params_repeatable is False
    # the errors themselves are the first pass's, as without the repeat
    once = measure_accuracy(projection_subject(_impl(), SHAPE), params.as_inputs(), SHAPE, CPU, tokens=3)
    assert (steady.fwd, steady.grads) == (once.fwd, once.grads)


def test_rel_err_never_returns_nan():
    assert rel_err(torch.tensor([float("nan")]), torch.tensor([1.0], dtype=torch.float64)) is None
    assert rel_err(torch.zeros(2), torch.zeros(2, dtype=torch.float64)) == 0.0
    assert rel_err(torch.tensor([1.5, 2.0]), torch.tensor([1.0, 2.0], dtype=torch.float64)) == 0.25


def test_fingerprint_hashes_the_tensor_bytes_without_numpy():
    """numpy is not a dependency: the fingerprint must work in a process where it cannot be imported."""
    import hashlib
    import struct
    import subprocess
    import sys

    from conftest import ROOT

    code = ("import sys; sys.modules['numpy'] = None\n"
            "import torch\n"
            "from adaln_bench.harness.measurement.fingerprint import sha256\n"
            "print(sha256(torch.arange(4, dtype=torch.int16)[1:]))\n")
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == hashlib.sha256(struct.pack("<3h", 1, 2, 3)).hexdigest()
