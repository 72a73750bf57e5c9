"""The observation a mode's child records: real aten overrides registered here, on the CPU build of torch."""
from __future__ import annotations

import pytest
import torch

from adaln_bench.modes.observe import WATCHED_ENV, changed_entries, dispatch_snapshot, observe
from adaln_bench.modes.registry import Mode, Switch

# torch warns once when a kernel replaces a built-in one: here that is the point.
pytestmark = pytest.mark.filterwarnings("ignore:Warning only once for all operators")

MODE = Mode(name="probe_mode", description="test", kind="framework", env={"ADALN_TEST_MODE_VAR": "7"})


def _register(overrides: dict[str, str]) -> torch.library.Library:
    lib = torch.library.Library("aten", "IMPL")
    for op, key in overrides.items():
        lib.impl(op, lambda *args, **kwargs: None, key)
    return lib


def test_snapshot_is_stable_when_nothing_changes():
    assert changed_entries(dispatch_snapshot(), dispatch_snapshot()) == []


def test_overrides_for_the_cpu_and_the_cuda_key_are_detected_and_undone():
    before = dispatch_snapshot()
    lib = _register({"aten::mm": "CPU", "aten::mean.dim": "CUDA", "aten::linear": "CompositeImplicitAutograd"})
    try:
        assert observe(MODE, before, None).aten_overrides == ["aten::mm", "aten::linear", "aten::mean.dim"]
    finally:
        lib._destroy()
    assert changed_entries(before, dispatch_snapshot()) == []


def test_an_override_of_an_op_outside_the_watch_list_is_not_reported():
    before = dispatch_snapshot()
    lib = _register({"aten::cos": "CPU"})
    try:
        assert observe(MODE, before, None).aten_overrides == []
    finally:
        lib._destroy()


def test_python_level_replacement_of_torch_bmm_is_reported(monkeypatch):
    before = dispatch_snapshot()
    monkeypatch.setattr(torch, "bmm", lambda a, b: a)
    assert observe(MODE, before, None).aten_overrides == ["torch.bmm"]


def test_env_seen_has_the_mode_variables_and_the_cublas_triton_ones(monkeypatch):
    for name in WATCHED_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ADALN_TEST_MODE_VAR", "7")
    monkeypatch.setenv("CUBLASLT_WORKSPACE_SIZE", "1")
    obs = observe(MODE, dispatch_snapshot(), None)
    assert obs.env_seen == {
        "ADALN_TEST_MODE_VAR": "7",
        "CUBLAS_WORKSPACE_CONFIG": None,
        "CUBLASLT_WORKSPACE_SIZE": "1",
        "TRITON_F32_DEFAULT": None,
    }


def test_torch_flags_are_read_as_the_process_has_them():
    matmul = torch.backends.cuda.matmul
    saved = (matmul.allow_bf16_reduced_precision_reduction, matmul.allow_fp16_reduced_precision_reduction,
             torch.get_float32_matmul_precision(), torch.are_deterministic_algorithms_enabled())
    try:
        matmul.allow_bf16_reduced_precision_reduction = False
        matmul.allow_fp16_reduced_precision_reduction = True
        torch.set_float32_matmul_precision("high")
        torch.use_deterministic_algorithms(True)
        obs = observe(MODE, dispatch_snapshot(), None)
        assert obs.bf16_reduced_precision_reduction is False
        assert obs.fp16_reduced_precision_reduction is True
        assert obs.float32_matmul_precision == "high"
        assert obs.deterministic_algorithms is True
        assert obs.preferred_blas in ("cublas", "cublaslt", "ck", None)
    finally:
        matmul.allow_bf16_reduced_precision_reduction = saved[0]
        matmul.allow_fp16_reduced_precision_reduction = saved[1]
        torch.set_float32_matmul_precision(saved[2])
        torch.use_deterministic_algorithms(saved[3])


def test_switch_details_are_copied_and_a_missing_switch_off_is_reported():
    snapshot = dispatch_snapshot()
    no_off = Switch(path="lib.mod.enable_batch_invariant_mode()", library="lib", library_version="1.2")
    obs = observe(MODE, snapshot, no_off)
    assert (obs.switch_path, obs.library, obs.library_version) == (no_off.path, "lib", "1.2")
    assert obs.reference_mode_off is False
    assert observe(MODE, snapshot, Switch(off=lambda: None, on=lambda: None)).reference_mode_off is True
    assert observe(MODE, snapshot, None).reference_mode_off is None
