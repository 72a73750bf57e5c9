"""`adaln-bench run`: measure every chosen (mode, candidate) and write one report."""
from __future__ import annotations

import datetime as _dt
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import List, Optional

import typer

from adaln_bench.commands.device import resolve_device
from adaln_bench.commands.run_checks import check_file_names, warn_loader_variables
from adaln_bench.errors import UserError
from adaln_bench.harness.assembly.shapes import Shape, resolve_shape


def _parse_gpus(gpus: Optional[str], device: str) -> list[Optional[int]]:
    if not gpus:
        return [None]
    if device != "cuda":
        raise UserError("--gpus needs a CUDA run")
    try:
        ids = [int(x) for x in gpus.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--gpus takes GPU indices like 0,1,2, not {gpus!r}") from None
    if not ids or len(set(ids)) != len(ids) or min(ids) < 0:
        raise UserError(f"--gpus takes distinct non-negative GPU indices, not {gpus!r}")
    import torch

    count = torch.cuda.device_count()
    if max(ids) >= count:
        raise UserError(f"--gpus {gpus}: this machine has {count} GPU(s), indices 0 to {count - 1}")
    return list(ids)


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
    from adaln_bench.harness.assembly.cpu_estimate import (CPU_LIMIT_S, describe_seconds, estimate_line, estimate_seconds,
                                                  needs_estimate)

    costly = [op for op in ops if needs_estimate(op, shape)]
    if not costly:
        return
    seconds, op = max(((estimate_seconds(op, shape, op.family.plan(quick)), op) for op in costly),
                      key=lambda pair: pair[0])
    what = (f"{shape.describe(with_n=op.name == 'adaln_projection')}{' --quick' if quick else ''} on the CPU: "
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


def _draw_geometry(text: str, device: str):
    from adaln_bench.draws import geometry

    geom = geometry(text)
    if not geom.is_native and device != "cuda":
        raise UserError(f"--draw-geometry {text}: CPU draws depend on no GPU; the option is for CUDA runs")
    return geom


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


def _projection_only_option(preset: Optional[str], dim, hidden, modalities) -> Optional[str]:
    """The first option given that only the projection has (its sizes, or the flux preset)."""
    for name, value in (("--dim", dim), ("--hidden", hidden), ("--modalities", modalities)):
        if value is not None:
            return name
    return "--preset flux" if preset == "flux" else None


def run_command(
    op: List[str] = typer.Option([], "--op", metavar="OP",
                                 help="Operator to measure (repeatable), or all; default: every operator "
                                 "(adaln-bench ops lists them)."),
    mode: List[str] = typer.Option([], "--mode", "-m", metavar="MODE", help="Mode to run (repeatable); default: every mode."),
    candidate: List[str] = typer.Option([], "--candidate", "-c", metavar="NAME",
                                        help="Candidate to measure (repeatable): a registered name or module:function."),
    device: str = typer.Option("auto", help="auto, cuda or cpu."),
    quick: bool = typer.Option(False, "--quick", help="Smoke test: smaller probes, T in (1, 3) only; flagged in the report."),
    preset: Optional[str] = typer.Option(None, help="Shape preset: h3 (GPU default), flux, small, tiny (CPU default)."),
    dim: Optional[int] = typer.Option(None, help="D, the width of temb."),
    hidden: Optional[int] = typer.Option(None, help="H, the hidden size."),
    modalities: Optional[int] = typer.Option(None, help="M, the number of modalities (N = 6·M·H)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o",
                                       help="Directory of the reports (one per operator under <out>/<op>/, and "
                                       "a run index); with one operator, a report file. Default results/<device>/."),
    timeout: Optional[float] = typer.Option(None, help="Seconds one mode may take before its child is stopped (a positive, finite number)."),
    gpus: Optional[str] = typer.Option(None, help="Comma-separated GPU indices: modes run concurrently, one child per GPU."),
    modes_file: Optional[Path] = typer.Option(None, help="TOML file of extra recipe modes."),
    megatron_src: Optional[Path] = typer.Option(None, help="A Megatron-LM checkout to import Megatron from."),
    python: List[str] = typer.Option([], "--python", metavar="MODE=PYTHON",
                                     help="MODE=INTERPRETER (repeatable): run that mode's child under another "
                                     "Python environment, e.g. vllm=.adaln-envs/vllm/bin/python."),
    envs_file: Optional[Path] = typer.Option(None, "--envs-file",
                                             help="TOML file whose [python] table maps modes to interpreters "
                                             "(written by `adaln-bench envs create`)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
    strict: bool = typer.Option(False, "--strict", help="Exit non-zero (3) also when a pair is unavailable here."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Run a shape estimated to take hours on the CPU anyway."),
    latency_only: bool = typer.Option(False, "--latency-only",
                                      help="Measure latency only: no probes, no accuracy (a report to diff "
                                      "latency against another latency-only one)."),
    accuracy_only: bool = typer.Option(False, "--accuracy-only",
                                       help="Measure the errors against FP64 only: no probes, no timing, no cold "
                                       "start (a quick fidelity check of the inputs against another GPU's report)."),
    cold_start: bool = typer.Option(True, "--cold-start/--no-cold-start",
                                    help="Check each candidate's first forward + backward in a fresh process "
                                    "(one extra process per candidate and mode). Off: no cold_start in the report."),
    draw_geometry: str = typer.Option("native", "--draw-geometry", metavar="GEOMETRY",
                                      help="CUDA runs: draw the seeded inputs as torch does on a GPU with this many "
                                      "SMs: native (this GPU's), h200 (132), b200 (148) or a number; so that "
                                      "reports of two GPUs compare on the same inputs."),
    repeat: int = typer.Option(1, "--repeat", metavar="K",
                               help="Measure each mode's latency in K fresh processes, interleaved, every sample "
                               "kept (device time); probes and accuracy run once. The nightly uses 3."),
    serial: bool = typer.Option(False, "--serial",
                                help="One step at a time: one child per GPU (one on a CPU), one cold-start check at "
                                "a time. Default on CUDA: probes, accuracy and cold-start checks of several "
                                "children side by side as the free memory allows, latency always with the GPU to "
                                "itself."),
) -> None:
    """Measure batch invariance, FP64 accuracy and latency; write one JSON report per operator."""
    from adaln_bench.commands.progress import RunProgress
    from adaln_bench.envs.file import choose_interpreters
    from adaln_bench.harness.assembly import exit_status
    from adaln_bench.harness.assembly.assemble import RunContext, assemble_report
    from adaln_bench.harness.processes.claims import answering
    from adaln_bench.harness.assembly.repeat import RepeatedRun
    from adaln_bench.harness.processes.runner import ChildOptions, ModeOutcome, ModeRunner
    from adaln_bench.harness.assembly.selection import check_candidates, choose_operators, jobs as make_jobs, select
    from adaln_bench.harness.processes.stop_signals import StopSignals
    from adaln_bench.harness.assembly.time_accounting import run_time
    from adaln_bench.datamodel.io import check_writable
    from adaln_bench.reports.run_output import write_run

    if repeat < 1:
        raise UserError(f"--repeat must be at least 1, not {repeat}")
    if accuracy_only and latency_only:
        raise UserError("--accuracy-only and --latency-only leave nothing to measure together; choose one")
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise UserError("--timeout must be a positive number of seconds")
    if megatron_src is not None and not megatron_src.is_dir():
        raise UserError(f"--megatron-src {megatron_src}: not a directory")
    run_device = resolve_device(device)
    slots = _parse_gpus(gpus, run_device)
    geometry = _draw_geometry(draw_geometry, run_device)
    shape: Shape = resolve_shape(preset, dim, hidden, modalities, on_gpu=run_device == "cuda")
    only = _projection_only_option(preset, dim, hidden, modalities) or (
        f"--out {out}" if out is not None and out.suffix == ".json" and not op else None)
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

    options = ChildOptions(device=run_device, shape=shape, quick=quick, timeout_s=timeout,
                           modes_file=str(modes_file) if modes_file else None,
                           megatron_src=str(megatron_src) if megatron_src else None,
                           probes=not (latency_only or accuracy_only), accuracy=not latency_only,
                           latency=not accuracy_only, cold_start=cold_start and not accuracy_only,
                           draw_geometry=geometry.name, serial=serial)
    skipped_names = {m.name for m in skipped}
    schedule = None
    if run_device == "cuda":
        from adaln_bench.harness.assembly.schedule import schedule_for_run

        schedule = schedule_for_run(ops, shape, quick, slots, serial)
        options = replace(options, serial=schedule.serial, cold_start_pool=schedule.cold_start_pool)
        if not quiet:
            print(f"adaln-bench: schedule: {schedule.why}", file=sys.stderr)
    from adaln_bench.harness.assembly.schedule import worker_slots

    slots = worker_slots(run_device, slots, len(ops), schedule, serial)
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
    with StopSignals() as stops:
        with RunProgress(jobs, disabled=quiet) as progress:
            def runner_of(opts, on_progress):
                made = ModeRunner(opts, slots, on_progress)
                made.stop_cause = stops.cause
                return made

            runner = runner_of(options, progress.update)

            def done(key: str, outcome: ModeOutcome) -> None:
                outcomes[key] = outcome
                progress.finish(key, outcome.run.status)

            def repeated(rep: int, key: str, outcome: ModeOutcome) -> None:
                if not quiet:
                    print(f"adaln-bench: {key}: latency repetition {rep}/{repeats} {outcome.run.status} after "
                          f"{outcome.run.wall_s or 0:.0f} s", file=sys.stderr)

            # Repetition 1 in full on `runner`, then latency-only children in fresh processes, interleaved.
            run = RepeatedRun(options, repeats, lambda opts: runner if opts is options else
                              runner_of(opts, lambda key, event: None), on_repeat=repeated)
            try:
                with stops.raising():
                    run.run(jobs, done)
            except KeyboardInterrupt:
                interrupted = True
            outcomes.update(run.outcomes)
        for job in jobs:  # every requested mode appears, also one no worker reached
            outcomes.setdefault(job.key, runner.unanswered(job))
        context = RunContext(modes=modes, outcomes={}, shape=shape, device=run_device, quick=quick,
                             started_at=started_at, wall_s=time.monotonic() - t0, argv=list(sys.argv),
                             interpreters=interpreters, draw_geometry=geometry)
        reports = {}
        for operator in ops:
            per_mode = {}
            for m in modes:  # the part of each mode that measured the operator (harness/processes/claims.py)
                found = answering(operator.name, [j for j in jobs if j.mode.name == m.name], outcomes,
                                  runner.not_reached)
                if found is not None:
                    per_mode[m.name] = found
            for m in skipped:
                per_mode[m.name] = runner.not_applicable(_job_of(m, operator, selection))
            names = {m.name: selection.report_names(operator.name, m.name) for m in modes}
            reports[operator.name] = assemble_report(operator, replace(context, outcomes=per_mode), names)
        spent = run_time(jobs, run.first, run.repeats, schedule.as_record() if schedule else None)
        written = write_run(reports, out_target, name, single_file, slots, quiet, spent)
    signal_code = stops.exit_code or (exit_status.INTERRUPTED if interrupted else None)
    code, lines = exit_status.closing(reports, written.failed, strict, signal_code, stops.cause() if stops.name else None,
                          stops.name or "SIGINT")
    for line in lines:
        print(f"adaln-bench: {line}", file=sys.stderr)
    if code:
        raise typer.Exit(code)


def _job_of(mode, operator, selection):
    from adaln_bench.harness.processes.protocol import OpWork
    from adaln_bench.harness.processes.runner import ModeJob

    return ModeJob(mode, (OpWork(op=operator.name, candidates=selection.per_op[operator.name][mode.name]),))
