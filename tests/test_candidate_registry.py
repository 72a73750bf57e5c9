"""Looking candidates up is cheap, and the stock candidates say which library their build imports."""
import importlib.metadata

from adaln_bench.ops import candidates


def test_entry_points_are_read_once_per_process(monkeypatch):
    calls = []

    def entry_points(**kwargs):
        calls.append(kwargs)
        return []

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    monkeypatch.setattr(candidates, "_ENTRY_POINTS_LOADED", False)
    for _ in range(3):
        candidates.candidates_of("gate_residual")
        candidates.get("diffusers", "timestep_mlp")
    assert calls == [{"group": "adaln_bench.candidates"}]


def test_a_bad_entry_point_keeps_raising(monkeypatch):
    class Bad:
        name = "not_a_candidate"

        def load(self):
            return 42

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kwargs: [Bad()])
    monkeypatch.setattr(candidates, "_ENTRY_POINTS_LOADED", False)
    for _ in range(2):
        try:
            candidates.candidates_of("gate_residual")
        except TypeError as exc:
            assert "not_a_candidate" in str(exc)
        else:
            raise AssertionError("a bad entry point was accepted")


def test_the_stock_candidates_name_the_diffusers_module_their_build_imports():
    # What a CPU child imports before its cold-start fork server starts (harness/processes/child.py).
    assert candidates.get("diffusers", "timestep_mlp").preload == ("diffusers.models.embeddings",)
    assert candidates.get("diffusers", "final_adaln_out").preload == (
        "diffusers.models.transformers.transformer_minimax_h3",)
    assert candidates.get("torch_rms_norm", "norm_modulate").preload == ()
