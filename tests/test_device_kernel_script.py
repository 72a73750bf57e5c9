"""scripts/device_kernel.py on the CPU, with the replay in place of the kernel and a fake C library: the
calls it times, the rows it compares across builds, and that it writes only where it is told."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

from adaln_bench.harness.inputs import make_params
from adaln_bench.harness.shapes import PRESETS
from adaln_bench.kernels.diffusers_baseline import replay

ROOT = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")
SHAPE = PRESETS["tiny"]


def _script():
    spec = importlib.util.spec_from_file_location("device_kernel", ROOT / "scripts" / "device_kernel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeLibrary:
    """The bundled library's Python interface (build.Library), recording the calls instead of launching."""

    gemm_ws_bytes = 64

    def __init__(self):
        self.calls: list[tuple] = []

    def dtemb_scratch_bytes(self, t, d, n):
        return 32 * t

    def forward(self, temb, w, b, act, y, t, d, n, ws, ws_bytes, device, stream):
        self.calls.append(("forward", y is not None, t, d, n, ws_bytes))

    def backward(self, dy, w, temb, act, dtemb, dw, db, t, d, n, scratch, scratch_bytes, device, stream):
        self.calls.append(("backward", dtemb is not None, dw is not None, db is not None, t, d, n, scratch_bytes))


def test_each_entry_point_is_timed_alone_at_each_size():
    script, lib = _script(), FakeLibrary()
    timing = script.entry_timing(lib, SHAPE, make_params(SHAPE, CPU), CPU, sizes=(1, 3))
    assert list(timing) == ["1", "3"]
    assert all(list(row) == ["fwd(silu+gemm)", "dtemb(gemm+fold)", "dW", "db"] for row in timing.values())
    per_call = script.ENTRY_WARMUP + script.ENTRY_SAMPLES
    d, n = SHAPE.dim, SHAPE.out_features
    assert lib.calls.count(("forward", True, 3, d, n, 64)) == per_call
    # Each backward entry point writes exactly one of d_temb, dW, db.
    for outputs in ((True, False, False), (False, True, False), (False, False, True)):
        assert lib.calls.count(("backward", *outputs, 3, d, n, 96)) == per_call
    assert len(lib.calls) == 2 * 4 * per_call


def test_single_rows_are_the_all_rows_probe_runs_and_builds_compare_bitwise(tmp_path):
    script = _script()
    params = make_params(SHAPE, CPU)
    rows = script.single_rows(replay, SHAPE, params, CPU, n=6)
    assert rows["y"].shape == (6, SHAPE.out_features) and rows["d_temb"].shape == (6, SHAPE.dim)
    assert script.compare_with_other_builds("a", rows, tmp_path) == {}  # the first build has no one to compare with

    def off_by_one_ulp(temb, w, b):
        out = replay(temb, w, b)
        return out + (out.detach().abs().max() * 2 ** -7) * (temb.detach()[:, :1] > 0)

    other = script.single_rows(off_by_one_ulp, SHAPE, params, CPU, n=6)
    found = script.compare_with_other_builds("b", other, tmp_path)
    positive = int((script.single_rows(replay, SHAPE, params, CPU, n=6)["y"] != other["y"]).any(dim=1).sum())
    assert found == {"a": {"fwd_rows_differ": positive, "dtemb_rows_differ": 0}} and positive > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["singles_a.pt", "singles_b.pt"]
    # A build run again compares with the others only, not with its own earlier rows.
    assert set(script.compare_with_other_builds("a", rows, tmp_path)) == {"b"}


def test_sanity_is_the_forward_error_on_a_small_shape():
    assert 0 < _script().sanity(replay, CPU) < 1e-2
