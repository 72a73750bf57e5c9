"""One candidate in a mode's child: built and measured, or why it could not be; its cold-start check in a process of
its own; and, on a CPU, the fork server those checks start from (harness/processes/fork_server.py)."""
from __future__ import annotations

import traceback
from pathlib import Path

from adaln_bench.harness.measurement.step_clock import BUILD, StepClock
from adaln_bench.harness.processes.protocol import ChildSpec, ProgressWriter


def fork_server(spec: ChildSpec):
    """A fork server for the cold-start checks of a CPU child that runs them; None elsewhere."""
    config = spec.config
    if config.device != "cpu" or config.check_only or not (config.parts.probes and config.cold_start):
        return None
    from adaln_bench.harness.processes import cold_start
    from adaln_bench.harness.processes.fork_server import ForkServer

    _preload(spec)
    return ForkServer.start(cold_start.main, cold_start.in_new_interpreter)


def _preload(spec: ChildSpec) -> None:
    """Before the fork server starts: the declarations and the modules the candidates' builds import (diffusers:
    4-6 s of imports), which this child, the server and every check then share. Not in a framework's mode, whose
    switch may patch what a library binds at import: there the builds import them after the switch, as before."""
    import importlib

    from adaln_bench.modes.registry import all_modes
    from adaln_bench.ops import candidates

    if all_modes(spec.config.modes_file)[spec.mode].kind == "framework":
        return
    for work in spec.work:
        for name in work.candidates:
            try:
                for module in candidates.get(name, work.op).preload:
                    importlib.import_module(module)
            except Exception:  # noqa: BLE001 - an optional library, a bad name: the build says why, as before
                continue


def report_name(op: str, name: str, mode: str) -> str:
    from adaln_bench.ops import candidates

    return candidates.get(name, op).report_name(mode)


def measure_one(spec: ChildSpec, op, name: str, params: dict, switch, clock: StepClock):
    """One candidate of one operator: built and measured, each step under the GPU lease; or why it could not be.
    Its cold-start check is the caller's (harness/processes/child_measure.py)."""
    import torch

    from adaln_bench.harness.measurement.measure import measure_candidate
    from adaln_bench.harness.measurement.probes import planned_runs
    from adaln_bench.harness.measurement.subject import Subject
    from adaln_bench.ops import candidates
    from adaln_bench.ops.candidates import BuildContext
    from adaln_bench.datamodel.schema import CandidateUnavailable

    config = spec.config
    device = torch.device(config.device)
    candidate = candidates.get(name, op.name)
    report_name = candidate.report_name(spec.mode)
    reason = candidate.availability()
    if reason is not None:
        return CandidateUnavailable(unavailable=reason, status="unavailable")
    plan = op.family.plan(config.quick)
    label = report_name if len(spec.work) == 1 else f"{op.name}/{report_name}"
    progress = ProgressWriter(label, planned_runs(plan) if config.parts.probes else 0)
    try:
        with clock.step(BUILD):
            impl = candidate.build(BuildContext(mode=spec.mode, device=device, shape=config.shape, op=op.name))
    except Exception as exc:
        traceback.print_exc()
        return CandidateUnavailable(unavailable=f"build failed: {type(exc).__name__}: {exc}", status="failed")
    try:
        subject = Subject.of(op, candidate, impl, config.shape)
        measured = measure_candidate(subject, params, config.shape, device, plan, config.parts, switch.off, progress,
                                     clock, probe_graphs=config.probe_graphs)
    except Exception as exc:
        traceback.print_exc()
        return CandidateUnavailable(unavailable=f"measurement failed: {type(exc).__name__}: {exc}", status="failed")
    if config.parts.probes and config.cold_start:  # a latency-only repeat does not need it again
        progress.phase("cold start")  # queued: it runs now, or in the pool beside the next candidates
    return measured


def cold_start_path(spec: ChildSpec, index: int) -> Path:
    """Where the cold-start check of the child's `index`-th candidate writes its result."""
    # Named after this child's result file: two parts of one mode run side by side in one folder.
    return Path(spec.result_path).with_name(f"{Path(spec.result_path).stem}.cold-start.{index}.json")


def cold_start_of(spec: ChildSpec, op: str, candidate: str, index: int, forks=None):
    """The candidate's cold-start check (harness/processes/cold_start.py), in a process of its own beside this
    one, under the child's GPU lease: forked from `forks` where there is one, else a new interpreter."""
    from adaln_bench.harness.processes.cold_start import TIMEOUT_S, ColdStartSpec, check_cold_start, in_new_interpreter

    cold = ColdStartSpec(config=spec.config, mode=spec.mode, op=op, candidate=candidate,
                         result_path=str(cold_start_path(spec, index)), lease_dir=spec.lease_dir,
                         lease_key=spec.lease_key)
    return check_cold_start(cold, TIMEOUT_S, forks.launch if forks is not None else in_new_interpreter)
