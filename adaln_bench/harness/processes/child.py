"""A mode's child process: `python -m adaln_bench.harness.processes.child SPEC.json`.

The parent starts it with the mode's variables already in its environment, so they are in place before
torch is imported here. It switches the mode on, measures each candidate, and rewrites its result file
after every candidate, so that a crash later keeps what was finished. On a CPU it forks a server for the
cold-start checks right after its imports (harness/processes/fork_server.py), and as one part of a mode split over
several children it measures only the operators it claims (harness/processes/claims.py).
"""
from __future__ import annotations

import os
import sys
import time
import traceback
import warnings
from pathlib import Path

from adaln_bench.harness.processes.candidate_run import fork_server, measure_one, report_name
from adaln_bench.harness.processes.protocol import ChildResult, ChildSpec, announce_switched_on
from adaln_bench.datamodel.io import write_text_atomic

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # numpy is optional


def run_child(spec: ChildSpec) -> ChildResult:
    import torch  # noqa: F401 - imported first, so that the fork server below shares the import

    # Before anything runs or is switched on: the CPU cold-start checks fork from here
    # (harness/processes/fork_server.py), and share the imports made so far.
    forks = fork_server(spec)
    try:
        return _switch_and_measure(spec, forks)
    finally:
        if forks is not None:
            forks.close()


def _switch_and_measure(spec: ChildSpec, forks) -> ChildResult:
    started = time.monotonic()
    result = ChildResult(mode=spec.mode, status="running")

    results: dict[str, dict] = {}
    inputs: dict = {}

    def save() -> None:
        # Assigned, not mutated, so that pydantic counts the fields as set and writes them.
        result.results = {op: dict(entries) for op, entries in results.items()}
        result.inputs = dict(inputs)
        result.wall_s = round(time.monotonic() - started, 3)
        write_text_atomic(result.model_dump_json(exclude_unset=True, indent=1), spec.result_path)

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
    try:
        switch = ModeSwitch(mode, ModeOptions(megatron_src=spec.config.megatron_src), device.type == "cuda")
    except Exception as exc:  # any failure to switch on makes the mode unavailable, with the reason
        result.status, result.reason = "unavailable", f"{type(exc).__name__}: {exc}"
        result.observed = observe.observe(mode, before, None)
        result.complete = True
        traceback.print_exc()
        save()
        return result
    if device.type == "cuda":  # after the switch: Megatron's te_native wants to be on before CUDA starts
        torch.cuda.set_device(0)
    announce_switched_on()
    result.observed = observe.observe(mode, before, switch.switch, settings_restorable=switch.settings_applied)
    result.environment = torch_environment(spec.config.device)
    notes = switch.switch.notes if switch.switch is not None else {}
    if "megatron_source_commit" in notes:
        result.environment.megatron_source_commit = notes["megatron_source_commit"]
    if "staging" in notes:  # tools/stage_megatron.py's manifest, as the mode read it
        import json

        result.environment.megatron_staging = json.loads(notes["staging"])
        result.observed.staging_module = notes.get("staging_module")
    if spec.config.check_only:
        result.status, result.complete = "ok", True
        save()
        return result
    save()
    _measure_all(spec, device, switch, results, inputs, save, forks)
    result.status, result.complete = "ok", True
    save()
    return result


def _measure_all(spec: ChildSpec, device, switch, results: dict, inputs: dict, save, forks) -> None:
    import torch

    from adaln_bench.harness.measurement.input_fingerprint import input_fingerprint
    from adaln_bench.ops.draws import draw_params
    from adaln_bench.ops.registry import get_operator

    from adaln_bench.harness.processes.claims import claim

    index = 0
    for work in spec.work:
        if spec.claims_dir is not None and not claim(spec.claims_dir, work.op, spec.claimant or spec.mode):
            continue  # another part of this mode measures it
        op = get_operator(work.op)
        entries = results.setdefault(op.name, {})
        params = draw_params(op, spec.config.shape, device)
        inputs[op.name] = input_fingerprint(op, spec.config.shape, params, device)
        save()
        for name in work.candidates:
            entries[report_name(op.name, name, spec.mode)] = measure_one(spec, op, name, params, switch, index,
                                                                          forks)
            index += 1
            if device.type == "cuda":
                torch.cuda.empty_cache()
            save()
        del params


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m adaln_bench.harness.processes.child SPEC.json", file=sys.stderr)
        return 2
    spec = ChildSpec.model_validate_json(Path(argv[1]).read_text(encoding="utf-8"))
    os.environ.setdefault("ADALN_BENCH_CHILD", "1")
    run_child(spec)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
