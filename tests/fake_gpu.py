"""Two modes' children at once on one fake GPU: a CPU run that takes the GPU's lease (and memory ledger) as a
CUDA run does. Used by the tests of the lease and of the ledger."""
from __future__ import annotations


def two_modes_on_one_fake_gpu(options, op: str = "norm_modulate", candidates=("diffusers",)) -> dict:
    """plain and cublaslt_ws1 measuring `op`, two children sharing GPU 0; the outcome of each mode."""
    from adaln_bench.harness.processes.protocol import OpWork
    from adaln_bench.harness.processes.runner import ModeJob, ModeRunner
    from adaln_bench.modes.registry import all_modes

    modes = all_modes()
    outcomes = {}
    with ModeRunner(options, [0, 0], lambda mode, event: None) as runner:
        work = (OpWork(op=op, candidates=list(candidates)),)
        runner.run_all([ModeJob(modes["plain"], work), ModeJob(modes["cublaslt_ws1"], work)],
                       lambda name, outcome: outcomes.__setitem__(name, outcome))
    return outcomes
