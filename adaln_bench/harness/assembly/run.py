"""A whole run, assembled: what it measures, its checks before anything starts, the children of every mode (and
their latency repetitions), the reports put together from their results and written, and the exit code.

`adaln-bench run` parses its arguments into a `RunRequest` and calls `run`; nothing here reads the command line.
"""
from __future__ import annotations

import datetime as _dt
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, ContextManager, Optional

from adaln_bench.draws.geometry import DrawGeometry
from adaln_bench.bounded_read import reason_suffix
from adaln_bench.errors import UserError
from adaln_bench.harness.assembly.run_checks import check_file_names, warn_loader_variables
from adaln_bench.shape import Shape


@dataclass(frozen=True)
class RunRequest:
    """What the command line asked for, its values checked one by one (`adaln-bench run --help` says each)."""

    op: list[str]
    mode: list[str]
    candidate: list[str]
    device: str  # the --device option as given: auto, cuda or cpu
    run_device: str  # cuda or cpu
    shape: Shape
    # The first option given that means the projection (ops/compat.py `legacy_form`), or None.
    legacy_form: Optional[str]
    quick: bool
    out: Optional[Path]
    timeout: Optional[float]
    slots: list[Optional[int]]
    modes_file: Optional[Path]
    megatron_src: Optional[Path]
    python: list[str]
    envs_file: Optional[Path]
    quiet: bool
    strict: bool
    yes: bool
    latency_only: bool
    accuracy_only: bool
    cold_start: bool
    geometry: DrawGeometry
    repeat: int
    # `--serial`: one step at a time (harness/assembly/schedule.py).
    serial: bool = False
    # `--mps`: the run's processes share the GPU through CUDA's Multi-Process Service (harness/processes/mps.py).
    mps: bool = False
    # `--probe-graphs`: CUDA probe runs of few rows replayed from CUDA graphs (harness/measurement/graphed_runs.py).
    probe_graphs: bool = False
    argv: list[str] = field(default_factory=lambda: list(sys.argv))


# Shows the children's progress while they run: made with the run's jobs and whether it is silenced.
ProgressDisplay = Callable[[list, bool], ContextManager]


def _choose_modes(names: list[str], modes_file: Optional[str]):
    from adaln_bench.modes.registry import all_modes

    known = all_modes(modes_file)
    if not names:
        return list(known.values())
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UserError(f"unknown mode {unknown[0]!r}; known modes: {', '.join(known)}")
    return [known[n] for n in dict.fromkeys(names)]


def _check_environments(modes) -> None:
    """Every chosen mode's environment, before the first child starts."""
    from adaln_bench.modes.registry import env_problem

    for m in modes:
        problem = env_problem(m.name, m.env)
        if problem is not None:
            raise UserError(problem)


def _check_cpu_cost(ops, shape: Shape, quick: bool, yes: bool) -> None:
    """A shape that would take hours on the CPU runs only with --yes; otherwise one line says why not."""
    from adaln_bench.harness.assembly.cpu_estimate import (CPU_LIMIT_S, describe_seconds, estimate_line,
                                                           estimate_seconds, needs_estimate)

    costly = [op for op in ops if needs_estimate(op, shape)]
    if not costly:
        return
    seconds, op = max(((estimate_seconds(op, shape, op.family.plan(quick)), op) for op in costly),
                      key=lambda pair: pair[0])
    what = (f"{shape.describe(with_n=op.reads_out_features)}{' --quick' if quick else ''} on the CPU: "
            f"about {describe_seconds(seconds)} per measured (mode, candidate) pair"
            f"{'' if len(ops) == 1 else ' of ' + op.name} (estimated here)")
    if seconds <= CPU_LIMIT_S:
        line = estimate_line(seconds, what)
        if line is not None:
            print(line, file=sys.stderr)
        return
    if not yes:
        raise UserError(f"{what}; pass --yes to run it anyway, or use a smaller --preset or a GPU")
    print(f"adaln-bench: warning: {what}; running it because of --yes", file=sys.stderr)


def run_name(device: str, shape: Shape, quick: bool, latency_only: bool, modes, all_modes: bool, geometry=None,
             accuracy_only: bool = False):
    from adaln_bench.harness.measurement.environment import gpu_slug, tool_git_state
    from adaln_bench.reports.naming import RunName, shape_tag

    slug = gpu_slug() if device == "cuda" else "cpu"
    commit, dirty = tool_git_state()
    tag = (commit[:7] if commit else "nocommit") + ("-dirty" if dirty else "")
    return RunName(slug, tag, shape_tag(shape), quick, latency_only, accuracy_only,
                   None if all_modes else tuple(m.name for m in modes),
                   None if geometry is None or geometry.is_native else geometry.name)


def run(request: RunRequest, progress_display: ProgressDisplay) -> tuple[int, list[str]]:
    """Measure everything the request names and write its reports: (exit code, closing lines for stderr)."""
    from adaln_bench.datamodel.io import check_writable
    from adaln_bench.envs.file import choose_interpreters
    from adaln_bench.harness.assembly import exit_status
    from adaln_bench.harness.assembly.assemble import RunContext
    from adaln_bench.harness.assembly.repeat import RepeatedRun
    from adaln_bench.harness.assembly.selection import check_candidates, choose_operators, jobs as make_jobs, select
    from adaln_bench.harness.assembly.time_accounting import run_time
    from adaln_bench.harness.processes.mps import multi_process_service
    from adaln_bench.harness.processes.runner import ModeOutcome, ModeRunner
    from adaln_bench.harness.processes.stop_signals import StopSignals
    from adaln_bench.reports.run_output import write_run

    r = request
    op, mode, candidate, device, run_device, shape = r.op, r.mode, r.candidate, r.device, r.run_device, r.shape
    quick, out, slots, modes_file = r.quick, r.out, r.slots, r.modes_file
    quiet, strict, yes, latency_only, accuracy_only = r.quiet, r.strict, r.yes, r.latency_only, r.accuracy_only
    geometry, repeat, python, envs_file = r.geometry, r.repeat, r.python, r.envs_file
    only = r.legacy_form
    ops = choose_operators(op, only, candidate)
    check_candidates(ops, candidate)
    modes = _choose_modes(mode, str(modes_file) if modes_file else None)
    _check_environments(modes)
    warn_loader_variables(modes)
    selection = select(ops, modes, candidate)
    interpreters = choose_interpreters(python, envs_file, modes, str(modes_file) if modes_file else None)
    single_file = out is not None and len(ops) == 1 and out.suffix == ".json"
    if out is not None and out.suffix == ".json" and len(ops) > 1:
        raise UserError(f"--out {out}: with {len(ops)} operators --out names a directory (or pass one --op)")
    name = run_name(run_device, shape, quick, latency_only, modes, all_modes=not mode, geometry=geometry,
                    accuracy_only=accuracy_only)
    if not single_file:
        check_file_names(name, ops)
    out_target = check_writable(out, directory=False) if single_file else check_writable(
        out or Path("results") / name.slug, directory=True)
    if run_device == "cpu":
        _check_cpu_cost(ops, shape, quick, yes)
    # CUDA-only recipes (cuBLAS settings) mean nothing on the CPU: skipped there unless named with --mode.
    skipped = [m for m in modes if m.cuda_only and run_device != "cuda" and m.name not in mode]

    what = f"{len(ops)} operator(s)" if len(ops) > 1 else ops[0].name
    if run_device == "cpu" and device == "auto":
        print(f"adaln-bench: no CUDA device here: running {what} on the CPU with the "
              f"{shape.describe(('dim', 'hidden', 'modalities'), with_n=len(ops) == 1)} shape (CPU times are for "
              "smoke runs only)", file=sys.stderr)
    elif not quiet:
        print(f"adaln-bench: {run_device}, {what}, {shape.describe()}, {len(modes)} mode(s)"
              f"{', quick' if quick else ''}", file=sys.stderr)

    options, schedule, slots = _scheduled(request, ops)
    skipped_names = {m.name for m in skipped}
    jobs = make_jobs(selection, [m for m in modes if m.name not in skipped_names], interpreters,
                     parts=len(slots), shape=shape)
    outcomes: dict[str, ModeOutcome] = {}
    if skipped and not quiet:
        print(f"adaln-bench: not applicable on {run_device}, skipped: {', '.join(m.name for m in skipped)}",
              file=sys.stderr)
    for m in modes:
        if m.cuda_only and run_device != "cuda" and m.name not in skipped_names:
            print(f"adaln-bench: note: {m.name} only means something on CUDA; run on the {run_device} because "
                  "--mode named it", file=sys.stderr)
    started_at, t0 = _dt.datetime.now(_dt.timezone.utc), time.monotonic()
    interrupted = False
    repeats = repeat if run_device == "cuda" and not accuracy_only else 1
    if repeat > 1 and repeats == 1:
        print("adaln-bench: --repeat: device time exists on CUDA only; this CPU run measures latency once",
              file=sys.stderr)
    if r.mps and r.serial:
        print("adaln-bench: --mps with --serial: one process at a time shares nothing; no service started",
              file=sys.stderr)
    with StopSignals() as stops, multi_process_service(r.mps and run_device == "cuda" and not r.serial) as mps:
        if mps is not None and not quiet:
            print(f"adaln-bench: Multi-Process Service: {'on' if mps.on else 'off'}: {mps.why}", file=sys.stderr)
        with progress_display(jobs, quiet) as progress:
            shown = {job.key for job in jobs}  # the display has a line per job of repetition 1, not per repeat

            def on_progress(key: str, event: dict) -> None:
                if key in shown:
                    progress.update(key, event)

            runner = ModeRunner(options, slots, on_progress)
            runner.stop_cause = stops.cause

            def done(key: str, outcome: ModeOutcome) -> None:
                outcomes[key] = outcome
                progress.finish(key, outcome.run.status, outcome.run.reason)

            def repeated(rep: int, key: str, outcome: ModeOutcome) -> None:
                if not quiet:
                    why = reason_suffix(outcome.run.reason, outcome.run.status != "ok")
                    print(f"adaln-bench: {key}: latency repetition {rep}/{repeats} {outcome.run.status} after "
                          f"{outcome.run.wall_s or 0:.0f} s{why}", file=sys.stderr)

            # Repetition 1 in full on `runner`; each part's latency-only repetitions follow it on the same runner.
            run = RepeatedRun(options, repeats, lambda opts: runner, on_repeat=repeated)
            try:
                with stops.raising():
                    run.run(jobs, done)
            except KeyboardInterrupt:
                interrupted = True
            outcomes.update(run.outcomes)
        for job in jobs:  # every requested mode appears, also one no worker reached
            outcomes.setdefault(job.key, runner.unanswered(job))
        context = RunContext(modes=modes, outcomes={}, shape=shape, device=run_device, quick=quick,
                             started_at=started_at, wall_s=time.monotonic() - t0, argv=list(r.argv),
                             interpreters=interpreters, draw_geometry=geometry)
        reports = {operator.name: _report_of(operator, context, jobs, outcomes, runner, skipped, selection)
                   for operator in ops}
        record = schedule.as_record() if schedule else None
        if record is not None and mps is not None:
            record["mps"] = mps.record
        spent = run_time(jobs, run.first, run.repeats, record)
        written = write_run(reports, out_target, name, single_file, slots, quiet, spent)
    signal_code = stops.exit_code or (exit_status.INTERRUPTED if interrupted else None)
    return exit_status.closing(reports, written.failed, strict, signal_code, stops.cause() if stops.name else None,
                               stops.name or "SIGINT")


def run_config(request: RunRequest):
    """The run's configuration, as the runner, every child and every cold-start check receive it."""
    from adaln_bench.harness.measurement.parts import Parts
    from adaln_bench.harness.processes.protocol import RunConfig

    r = request
    return RunConfig(device=r.run_device, shape=r.shape, quick=r.quick, timeout_s=r.timeout,
                     modes_file=str(r.modes_file) if r.modes_file else None,
                     megatron_src=str(r.megatron_src) if r.megatron_src else None,
                     parts=Parts(probes=not (r.latency_only or r.accuracy_only), accuracy=not r.latency_only,
                                 latency=not r.accuracy_only),
                     cold_start=r.cold_start and not r.accuracy_only,
                     draw_geometry=r.geometry.name, serial=r.serial, probe_graphs=r.probe_graphs)


def _scheduled(request: RunRequest, ops):
    """The run's configuration with how its children share each GPU, the schedule (None on a CPU) and the worker
    slots, one per child at once (harness/assembly/schedule.py)."""
    from adaln_bench.harness.assembly.schedule import schedule_for_run, worker_slots

    r = request
    options, schedule = run_config(request), None
    if r.run_device == "cuda":
        schedule = schedule_for_run(ops, r.shape, r.quick, r.slots, r.serial)
        options = options.model_copy(update={"serial": schedule.serial, "cold_start_pool": schedule.cold_start_pool,
                                             "cold_start_beside": schedule.checks_beside,
                                             "memory_budget_bytes": schedule.memory_budget_bytes})
        if not r.quiet:
            print(f"adaln-bench: schedule: {schedule.why}", file=sys.stderr)
    return options, schedule, worker_slots(r.run_device, r.slots, len(ops), schedule, r.serial)


def _report_of(operator, context, jobs, outcomes, runner, skipped, selection):
    """One operator's report: from each mode the part that measured it (harness/processes/claims.py), and the
    modes skipped here as not applicable."""
    from adaln_bench.harness.assembly.assemble import assemble_report
    from adaln_bench.harness.processes.claims import answering

    per_mode = {}
    for m in context.modes:
        found = answering(operator.name, [j for j in jobs if j.mode.name == m.name], outcomes, runner.not_reached)
        if found is not None:
            per_mode[m.name] = found
    for m in skipped:
        per_mode[m.name] = runner.not_applicable(_job_of(m, operator, selection))
    names = {m.name: selection.report_names(operator.name, m.name) for m in context.modes}
    return assemble_report(operator, replace(context, outcomes=per_mode), names)


def _job_of(mode, operator, selection):
    from adaln_bench.harness.processes.protocol import OpWork
    from adaln_bench.harness.processes.runner import ModeJob

    return ModeJob(mode, (OpWork(op=operator.name, candidates=selection.per_op[operator.name][mode.name]),))
