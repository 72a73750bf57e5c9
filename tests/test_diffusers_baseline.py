"""The stock candidates: diffusers' real code where it imports, the op-for-op replay where it does not, and
the two bitwise equal, forward and every gradient, for each operator diffusers has code for."""
import pytest
import torch

from adaln_bench.harness.measurement.subject import as_outputs
from adaln_bench.ops import candidates
from adaln_bench.ops import stock_candidate
from adaln_bench.ops.adaln_projection import candidates as projection
from adaln_bench.ops.adaln_projection import replay
from adaln_bench.ops.candidates import BuildContext
from adaln_bench.ops.draws import draw_params, draw_rows, draw_upstream
from adaln_bench.ops.registry import get_operator
from adaln_bench.shape import Shape

SHAPE = Shape(32, 8, 3, frequency=16)
CPU = torch.device("cpu")
WITH_DIFFUSERS_CODE = ("timestep_sinusoid", "timestep_mlp", "adaln_projection", "final_adaln_out")


def _run(op, forward, n=5):
    drawn = {**draw_rows(op, SHAPE, 3, n, CPU), **draw_params(op, SHAPE, CPU)}
    leaves = {k: v.detach().requires_grad_() if k in op.grads else v for k, v in drawn.items()}
    outs = as_outputs(forward(*(leaves[t.name] for t in op.tensors)))
    if op.grads:
        ups = draw_upstream([o.shape for o in outs], [o.dtype for o in outs], 3, CPU)
        torch.autograd.backward(outs, list(ups))
    return outs, [leaves[g].grad for g in op.grads]


@pytest.mark.parametrize("name", WITH_DIFFUSERS_CODE)
def test_real_diffusers_code_matches_the_replay_bitwise_with_gradients(name):
    pytest.importorskip("diffusers")
    op = get_operator(name)
    impl = candidates.get("diffusers", name).build(BuildContext(mode="plain", device=CPU, shape=SHAPE, op=name))
    assert impl.source.startswith("diffusers ") and impl.details["path"] != "replay"
    outs, grads = _run(op, impl.forward)
    ref_outs, ref_grads = _run(op, op.stock_for(SHAPE))
    assert all(torch.equal(a, b) for a, b in zip(outs, ref_outs))
    assert all(torch.equal(a, b) for a, b in zip(grads, ref_grads))


def test_projection_replay_when_diffusers_does_not_import(monkeypatch):
    monkeypatch.setattr(projection, "_diffusers_module", lambda: (None, "ModuleNotFoundError: No module named 'diffusers'"))
    impl = projection._build_diffusers(BuildContext(mode="plain", device=CPU, shape=SHAPE))
    assert impl.source.startswith("replay of diffusers AdaLN projection")
    assert impl.details["diffusers_unavailable"] == "ModuleNotFoundError: No module named 'diffusers'"
    assert impl.forward is replay


@pytest.mark.parametrize("name", ["timestep_mlp", "final_adaln_out"])
def test_other_operators_say_replay_when_diffusers_does_not_import(monkeypatch, name):
    monkeypatch.setattr(stock_candidate, "load", lambda module, attr: (None, "ModuleNotFoundError: no diffusers"))
    impl = candidates.get("diffusers", name).build(BuildContext(mode="vllm", device=CPU, shape=SHAPE, op=name))
    assert impl.source.startswith("replay of diffusers") and impl.details["path"] == "replay"
    assert ("[vllm]" in impl.source) == (name == "timestep_mlp")  # the GEMM operator is named per mode
