"""A mode's child process: `python -m adaln_bench.harness.child SPEC.json`.

The parent starts it with the mode's variables already in its environment, so they are in place before
torch is imported here. It switches the mode on, measures each candidate, and rewrites its result file
after every candidate, so that a crash later keeps what was finished.
"""
from __future__ import annotations

import os
import sys
import time
import traceback
import warnings
from pathlib import Path

from adaln_bench.harness.protocol import ChildResult, ChildSpec, ProgressWriter
from adaln_bench.reports.io import write_text_atomic

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # numpy is optional


def run_child(spec: ChildSpec) -> ChildResult:
    started = time.monotonic()
    result = ChildResult(mode=spec.mode, status="running")

    entries: dict = {}

    def save() -> None:
        # Assigned, not mutated, so that pydantic counts the field as set and writes it.
        result.candidates = dict(entries)
        result.wall_s = round(time.monotonic() - started, 3)
        write_text_atomic(result.model_dump_json(exclude_unset=True, indent=1), spec.result_path)

    import torch

    from adaln_bench.harness import plan as P
    from adaln_bench.harness.environment import torch_environment
    from adaln_bench.harness.inputs import make_params
    from adaln_bench.harness.measure import Parts, measure_candidate
    from adaln_bench.harness.probes import planned_runs
    from adaln_bench.kernels import registry as candidates
    from adaln_bench.kernels.registry import BuildContext
    from adaln_bench.modes import observe
    from adaln_bench.modes.registry import ModeOptions, all_modes
    from adaln_bench.modes.switch import ModeSwitch
    from adaln_bench.reports.schema import CandidateUnavailable

    from adaln_bench.harness.input_fingerprint import input_fingerprint
    from adaln_bench.harness.mode_environment import runtime_environment

    mode = all_modes(spec.modes_file)[spec.mode]
    result.runtime = runtime_environment(mode)  # before the switch: an unavailable mode still says where it ran
    device = torch.device(spec.device)
    if device.type == "cuda":
        torch.cuda.set_device(0)
    before = observe.dispatch_snapshot()
    try:
        switch = ModeSwitch(mode, ModeOptions(megatron_src=spec.megatron_src), device.type == "cuda")
    except Exception as exc:  # any failure to switch on makes the mode unavailable, with the reason
        result.status, result.reason = "unavailable", f"{type(exc).__name__}: {exc}"
        result.observed = observe.observe(mode, before, None)
        result.complete = True
        traceback.print_exc()
        save()
        return result
    result.observed = observe.observe(mode, before, switch.switch, settings_restorable=switch.settings_applied)
    result.environment = torch_environment(spec.device)
    if switch.switch is not None and "megatron_source_commit" in switch.switch.notes:
        result.environment.megatron_source_commit = switch.switch.notes["megatron_source_commit"]
    if spec.check_only:
        result.status, result.complete = "ok", True
        save()
        return result
    save()

    params = make_params(spec.shape, device)
    result.inputs = input_fingerprint(spec.shape, params, device)
    save()
    plan = P.QUICK if spec.quick else P.FULL
    parts = Parts(probes=spec.probes, accuracy=spec.accuracy, latency=spec.latency)
    ctx = BuildContext(mode=spec.mode, device=device, shape=spec.shape)
    for name in spec.candidates:
        candidate = candidates.get(name)
        report_name = candidate.report_name(spec.mode)
        reason = candidate.availability()
        if reason is not None:
            entries[report_name] = CandidateUnavailable(unavailable=reason, status="unavailable")
            save()
            continue
        progress = ProgressWriter(report_name, planned_runs(plan) if spec.probes else 0)
        try:
            impl = candidate.build(ctx)
        except Exception as exc:
            traceback.print_exc()
            entries[report_name] = CandidateUnavailable(
                unavailable=f"build failed: {type(exc).__name__}: {exc}", status="failed")
            save()
            continue
        try:
            measured = measure_candidate(impl, params, spec.shape, device, plan, parts, switch.off, progress)
        except Exception as exc:
            traceback.print_exc()
            entries[report_name] = CandidateUnavailable(
                unavailable=f"measurement failed: {type(exc).__name__}: {exc}", status="failed")
        else:
            if spec.probes and spec.cold_start:  # a latency-only repeat does not need it again
                progress.phase("cold start")
                measured.cold_start = cold_start_of(spec, name, len(entries))
            entries[report_name] = measured
        del impl
        if device.type == "cuda":
            torch.cuda.empty_cache()
        save()
    result.status, result.complete = "ok", True
    save()
    return result


def cold_start_of(spec: ChildSpec, candidate: str, index: int):
    """The candidate's cold-start check (harness/cold_start.py), in a process of its own beside this one."""
    from adaln_bench.harness.cold_start import ColdStartSpec, check_cold_start

    result_path = Path(spec.result_path).with_name(f"{spec.mode}.cold-start.{index}.json")
    return check_cold_start(ColdStartSpec(mode=spec.mode, modes_file=spec.modes_file, megatron_src=spec.megatron_src,
                                          candidate=candidate, device=spec.device, shape=spec.shape,
                                          result_path=str(result_path)))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m adaln_bench.harness.child SPEC.json", file=sys.stderr)
        return 2
    spec = ChildSpec.model_validate_json(Path(argv[1]).read_text(encoding="utf-8"))
    os.environ.setdefault("ADALN_BENCH_CHILD", "1")
    run_child(spec)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
