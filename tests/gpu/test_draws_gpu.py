"""GPU tests of adaln_bench.draws: with the GPU's own geometry the kernel draws torch.randn/torch.rand bit for
bit, over one draw and over successive draws from one generator (the offset); another geometry keeps torch's
first 270,336 elements (the stride both share) and follows the numpy model of plan.py elsewhere.

Skipped without CUDA, or without a cached draw library and nvcc + curand headers to build one. A few seconds.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from adaln_bench import draws
from adaln_bench.draws import build as B
from adaln_bench.draws import reference as R

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

H = 5376
SIZES = [1, 1000, 4097, 270_336, 270_337, 1_081_344, 1_081_345, 2048 * 2688, 4097 * H, H * H]  # to 28.9 M


@pytest.fixture(scope="module")
def dev():
    d = torch.device("cuda", torch.cuda.current_device())
    try:
        from adaln_bench.draws.draw import _library

        _library(d)
    except (B.BuildError, OSError) as exc:
        pytest.skip(f"draw library unavailable: {exc}")
    return d


def _bits(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(torch.int32)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(_bits(a), _bits(b))


def _pair(dev, seed):
    geom = draws.device_geometry(dev)
    return torch.Generator(device=dev).manual_seed(seed), draws.GeometryGenerator(seed, geom.sms, dev,
                                                                                 geom.threads_per_sm)


@pytest.mark.parametrize("numel", SIZES)
def test_first_draw_is_torchs_bit_for_bit(dev, numel):
    for kind in ("randn", "rand"):
        tg, gg = _pair(dev, 3000 + numel % 97)
        want = getattr(torch, kind)(numel, generator=tg, device=dev)
        got = getattr(draws, kind)((numel,), gg)
        assert _same(got, want), f"{kind} of {numel}: {(got != want).sum().item()} elements differ"
        if hasattr(tg, "get_offset"):
            assert gg.get_offset() == tg.get_offset()


def test_successive_draws_track_the_offset(dev):
    """The six (4097, 5376) upstream gradients of adaln_row_gather from one generator, then smaller draws."""
    tg, gg = _pair(dev, 4)
    shapes = [(4097, H)] * 6 + [(64, 3), (257, 2688), (1_081_345,), (7,)]
    for k, shape in enumerate(shapes):
        kind = "rand" if k % 4 == 3 else "randn"
        want = getattr(torch, kind)(shape, generator=tg, device=dev)
        got = getattr(draws, kind)(shape, gg)
        assert _same(got, want), f"draw {k} ({kind} {shape}) differs"
        if hasattr(tg, "get_offset"):
            assert gg.get_offset() == tg.get_offset(), f"offset after draw {k}"


def test_split_draw_of_the_full_token_batch(dev):
    """(131072, 5376) float32 needs 64-bit byte offsets: torch splits it into two launches."""
    free, _ = torch.cuda.mem_get_info(dev)
    if free < 8 * 131072 * H + (1 << 30):
        pytest.skip("needs about 6.7 GB free")
    tg, gg = _pair(dev, 11)
    want = torch.randn(131072, H, generator=tg, device=dev)
    got = draws.randn((131072, H), gg)
    assert _same(got, want)
    del got, want
    want = torch.rand(7, generator=tg, device=dev)  # and the draw after it starts where torch's does
    assert _same(draws.rand(7, gg), want)


def test_other_geometry_keeps_the_shared_prefix_and_follows_the_model(dev):
    geom = draws.device_geometry(dev)
    own = geom.sms
    other = 148 if own != 148 else 132
    n = 4097 * H // 8
    tg = torch.Generator(device=dev).manual_seed(5)
    gg = draws.GeometryGenerator(5, other, dev)
    theirs, ours = torch.rand(n, generator=tg, device=dev), draws.rand(n, gg)
    k = min(own * geom.threads_per_sm, other * 2048)  # the stride both launches share
    assert _same(ours[:k], theirs[:k]) and not _same(ours[k:], theirs[k:])
    model, after = R.emulate("rand", n, 5, 0, other)
    assert np.array_equal(ours.cpu().numpy().view(np.int32), model.view(np.int32)) and gg.get_offset() == after
    z = draws.randn(n, gg)
    model, _ = R.emulate("randn", n, 5, after, other)
    assert np.abs(z.cpu().numpy() - model).max() < 1e-4


def test_stream_out_and_native_helper(dev):
    s = torch.cuda.Stream(dev)
    tg, gg = _pair(dev, 9)
    want = torch.randn(4097, H, generator=tg, device=dev)
    out = torch.empty(4097, H, device=dev)
    with torch.cuda.stream(s):
        got = draws.randn((4097, H), gg, out=out)
    s.synchronize()
    assert got is out and _same(out, want)
    g = draws.generator("native", 9, dev)
    assert isinstance(g, torch.Generator) and _same(draws.randn((4097, H), g), torch.randn(
        4097, H, generator=torch.Generator(device=dev).manual_seed(9), device=dev))
    assert isinstance(draws.generator("b200", 9, dev), draws.GeometryGenerator)
    with pytest.raises(ValueError):
        draws.randn((3, 3), gg, out=torch.empty(3, 3, device=dev, dtype=torch.bfloat16))
