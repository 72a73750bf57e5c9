"""A mode's child process: `python -m adaln_bench.harness.processes.child SPEC.json` (harness/processes/launcher.py).

The parent starts it with the mode's variables already in its environment, so they are in place before
torch is imported here. It switches the mode on, measures each candidate, and rewrites its result file
after every candidate, so that a crash later keeps what was finished. On a CPU it forks a server for the
cold-start checks right after its imports (harness/processes/fork_server.py). What it measures, and how each step
takes the GPU's lease, is harness/processes/child_measure.py; one candidate, harness/processes/candidate_run.py.
"""
from __future__ import annotations

import os
import sys
import time
import traceback
import warnings
from typing import Callable

from adaln_bench.harness.processes.candidate_run import fork_server
from adaln_bench.harness.processes.launcher import child_main
from adaln_bench.harness.processes.protocol import ChildResult, ChildSpec, announce_switched_on

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # numpy is optional
BORN = time.monotonic()  # the imports before the first step count as start-up


def run_child(spec: ChildSpec, publish: Callable[[ChildResult], None]) -> ChildResult:
    import torch  # noqa: F401 - imported first, so that the fork server below shares the import

    # Before anything runs or is switched on: the CPU cold-start checks fork from here
    # (harness/processes/fork_server.py), and share the imports made so far.
    forks = fork_server(spec)
    try:
        return _switch_and_measure(spec, forks, publish)
    finally:
        if forks is not None:
            forks.close()


def _switch_and_measure(spec: ChildSpec, forks, publish: Callable[[ChildResult], None]) -> ChildResult:
    from adaln_bench.harness.processes.child_measure import ChildState, clock_for, measure_all, peak_memory_bytes
    from adaln_bench.harness.measurement.step_clock import START_UP

    started = time.monotonic()
    result = ChildResult(mode=spec.mode, status="running")
    clock = clock_for(spec)  # every step from here on under the GPU's lease (harness/processes/gpu_lease.py)

    results: dict[str, dict] = {}
    inputs: dict = {}

    def save() -> None:
        # Assigned, not mutated, so that pydantic counts the fields as set and writes them.
        result.results = {op: dict(entries) for op, entries in results.items()}
        result.inputs = dict(inputs)
        result.wall_s = round(time.monotonic() - started, 3)
        result.time = clock.snapshot()
        result.time.peak_memory_bytes = peak_memory_bytes(device, result.time.peak_memory_by_op)
        publish(result)

    state = ChildState(save)
    import torch

    from adaln_bench.harness.measurement.environment import torch_environment
    from adaln_bench.harness.processes.mode_environment import runtime_environment
    from adaln_bench.modes import observe
    from adaln_bench.modes.registry import ModeOptions, all_modes
    from adaln_bench.modes.switch import ModeSwitch

    from adaln_bench.draws import geometry
    from adaln_bench.ops.draws import use_geometry

    use_geometry(geometry(spec.config.draw_geometry))  # before anything is drawn
    mode = all_modes(spec.config.modes_file)[spec.mode]
    result.runtime = runtime_environment(mode)  # before the switch: an unavailable mode still says where it ran
    device = torch.device(spec.config.device)
    before = observe.dispatch_snapshot()
    try:  # the switch is host work (a library's imports, settings): no lease
        switch = ModeSwitch(mode, ModeOptions(megatron_src=spec.config.megatron_src), device.type == "cuda")
    except Exception as exc:  # any failure to switch on makes the mode unavailable, with the reason
        result.status, result.reason = "unavailable", f"{type(exc).__name__}: {exc}"
        result.observed = observe.observe(mode, before, None)
        result.complete = True
        traceback.print_exc()
        state.save()
        return result
    clock.add(START_UP, held=time.monotonic() - BORN)  # the imports and the switch
    with clock.step(START_UP):  # CUDA's start: the process's first GPU work
        if device.type == "cuda":  # after the switch: Megatron's te_native wants to be on before CUDA starts
            torch.cuda.set_device(0)
        result.observed = observe.observe(mode, before, switch.switch, settings_restorable=switch.settings_applied)
        result.environment = torch_environment(spec.config.device)
    announce_switched_on()
    notes = switch.switch.notes if switch.switch is not None else {}
    if "megatron_source_commit" in notes:
        result.environment.megatron_source_commit = notes["megatron_source_commit"]
    if "staging" in notes:  # tools/stage_megatron.py's manifest, as the mode read it
        import json

        result.environment.megatron_staging = json.loads(notes["staging"])
        result.observed.staging_module = notes.get("staging_module")
    if spec.config.check_only:
        result.status, result.complete = "ok", True
        state.save()
        return result
    state.save()
    measure_all(spec, device, switch, results, inputs, state, forks, clock)
    result.status, result.complete = "ok", True
    state.save()
    return result


def main(argv: list[str]) -> int:
    os.environ.setdefault("ADALN_BENCH_CHILD", "1")
    return child_main(argv[1:], "adaln_bench.harness.processes.child", ChildSpec, run_child)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
