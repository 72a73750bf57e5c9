"""The harness on a real GPU: a quick run per mode through child processes, and what the child observed."""
import json

import pytest

from conftest import run_cli

pytestmark = pytest.mark.gpu


def test_quick_cuda_run_of_plain_and_the_cublaslt_recipe(tmp_path):
    out = tmp_path / "r.json"
    proc = run_cli("run", "--device", "cuda", "--preset", "small", "--quick", "--quiet", "--mode", "plain",
                   "--mode", "cublaslt_ws1", "--candidate", "diffusers", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["environment"]["gpu"] and report["environment"]["capability"][0] >= 8
    recipe = report["modes"]["cublaslt_ws1"]["observed"]
    assert recipe["preferred_blas"] == "cublaslt"
    assert recipe["bf16_reduced_precision_reduction"] is False
    assert recipe["env_seen"]["CUBLASLT_WORKSPACE_SIZE"] == "1"
    assert report["modes"]["plain"]["observed"]["env_seen"]["CUBLASLT_WORKSPACE_SIZE"] is None
    for mode in ("plain", "cublaslt_ws1"):
        entry = report["results"][mode][f"diffusers[{mode}]"]
        acc = entry["accuracy_latency"]["3"]
        assert acc["clock"] == "cuda_event" and 0 < acc["fwd_rel_err"] < 1e-2
        assert entry["fingerprint"]["output_sha256"]
        # Device time: after the warm-up, sampled beside the cuBLAS path. The diffusers candidate in plain mode
        # is that path itself, so its ratio sits near 1 (the two graphs run the same kernels in turn).
        dt = acc["device_time"]
        assert dt["warmup_ms"] == 200.0 and dt.get("reference_error") is None
        ref = dt["reference"]
        assert len(ref["fwd_samples"]) == len(dt["fwd_samples"])
        assert len(ref["fwd_bwd_samples"]) == len(dt["fwd_bwd_samples"])
        assert "cuBLAS path" in ref["what"]
        if mode == "plain":
            assert 0.9 < ref["fwd_ratio"] < 1.1 and 0.9 < ref["fwd_bwd_ratio"] < 1.1


def test_the_run_index_gives_each_operators_peak_memory(tmp_path):
    # What the memory ledger's reservation estimates, measured: per operator, the most a child reserved.
    proc = run_cli("run", "--device", "cuda", "--preset", "small", "--quick", "--quiet", "--mode", "plain",
                   "--op", "timestep_sinusoid", "--op", "gate_residual", "--candidate", "diffusers",
                   "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    (index,) = (tmp_path / "runs").glob("run.*.json")
    plain = json.loads(index.read_text())["time"]["modes"]["plain"]
    by_op = plain["peak_memory_by_op"]
    assert set(by_op) == {"timestep_sinusoid", "gate_residual"}
    assert all(0 < b <= plain["peak_memory_bytes"] for b in by_op.values())
    # After each operator the child empties its cache: what it still reserves is below what it reserved.
    left = plain["residual_memory_by_op"]
    assert set(left) == set(by_op) and all(0 <= left[op] <= by_op[op] for op in by_op)
