"""The diffusers baseline: the real module where diffusers imports, the op-for-op replay where it does not."""
import pytest
import torch

from adaln_bench.kernels import diffusers_baseline as baseline
from adaln_bench.kernels.registry import BuildContext
from adaln_bench.shape import Shape

CTX = BuildContext(mode="plain", device=torch.device("cpu"), shape=Shape(32, 8, 3))


def _leaves(seed=0):
    g = torch.Generator().manual_seed(seed)
    temb = torch.randn(5, 32, generator=g).requires_grad_()
    w = (torch.randn(144, 32, generator=g) * 0.2).bfloat16().requires_grad_()
    b = torch.randn(144, generator=g).bfloat16().requires_grad_()
    return temb, w, b


def test_real_module_matches_the_replay_bitwise_with_gradients():
    pytest.importorskip("diffusers")
    impl = baseline._build(CTX)
    assert impl.source.startswith("diffusers MiniMaxH3AdaLayerNormModulation") and "[plain]" in impl.source
    a, b_ = _leaves(), _leaves()
    y, y_ref = impl.forward(*a), baseline.replay(*b_)
    assert y.shape == (5, 144) and torch.equal(y, y_ref)
    g = torch.randn(y.shape).bfloat16()
    y.backward(g)
    y_ref.backward(g)
    for got, ref in zip(a, b_):
        assert torch.equal(got.grad, ref.grad)


def test_replay_when_diffusers_does_not_import(monkeypatch):
    monkeypatch.setattr(baseline, "_diffusers_module", lambda: (None, "ModuleNotFoundError: No module named 'diffusers'"))
    impl = baseline._build(CTX)
    assert impl.source.startswith("replay of diffusers AdaLN projection")
    assert impl.details["diffusers_unavailable"] == "ModuleNotFoundError: No module named 'diffusers'"
    assert impl.forward is baseline.replay
