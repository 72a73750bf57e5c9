"""Putting the children's results together: one report per operator (docs/spec.md#9-the-report)."""
from __future__ import annotations

import datetime as _dt
import sys
from dataclasses import dataclass
from typing import Optional

from adaln_bench import __version__
from adaln_bench.harness.measurement.environment import rl_kernel_commit, tool_git_state, torch_environment
from adaln_bench.harness.processes.mode_environment import attach_environment
from adaln_bench.harness.processes.runner import ModeOutcome
from adaln_bench.modes.registry import Mode
from adaln_bench.ops.spec import Operator
from adaln_bench.datamodel.mode_environments import modes_with_other_inputs
from adaln_bench.datamodel.schema import (SCHEMA_VERSION, REPORT_KIND, CandidateUnavailable, DrawGeometryRecord,
                                        Environment, ModeRun,
                                        Report, Shape as ShapeModel, ToolInfo)
from adaln_bench.shape import Shape

RFC = "RL-Align/RL-Kernel#420"


def shape_record(op: Operator, shape: Shape) -> ShapeModel:
    """The sizes the operator reads, as its report records them (the projection's with N written out)."""
    values = {name: getattr(shape, name) for name in op.size_names}
    if any("N" in str(d).split("*") for t in op.tensors for d in t.dims):
        values["out_features"] = shape.out_features
    return ShapeModel(**values, preset=shape.preset)


@dataclass(frozen=True)
class RunContext:
    """What every report of one run shares."""

    modes: list[Mode]
    outcomes: dict[str, ModeOutcome]
    shape: Shape
    device: str
    quick: bool
    started_at: _dt.datetime
    wall_s: float
    argv: list[str]
    interpreters: dict[str, str]
    draw_geometry: Optional[object] = None  # adaln_bench.draws.DrawGeometry; None or native: torch's own


def _parent_environment(outcomes: dict[str, ModeOutcome], interpreters: dict[str, str], device: str) -> Environment:
    """The top-level environment: that of the parent's interpreter, as one of its children read it."""
    own = (o for name, o in outcomes.items() if name not in interpreters)
    env = next((o.child.environment for o in own if o.child and o.child.environment), None)
    if env is None:  # no child of this interpreter read its device: describe this process instead
        env = torch_environment("cpu")
        env.device = device
        # The GPU is the machine's, whichever interpreter looked at it.
        other = next((o.child.environment for o in outcomes.values() if o.child and o.child.environment), None)
        if other is not None:
            env.gpu, env.capability, env.device = other.gpu, other.capability, other.device
    env = env.model_copy(deep=True)
    env.interpreter = sys.executable
    return env


def skipped_run(op: Operator, mode: str) -> tuple[ModeRun, str]:
    reason = f"not run for {op.name}: {op.modes.skipped_reason or op.modes.why}"
    return ModeRun(status="unavailable", reason=reason), reason


def assemble_report(op: Operator, run: RunContext, candidates: dict[str, list[str]]) -> Report:
    """One operator's report. `candidates`: per mode, the candidates' report names the run asked for, so that
    a mode the operator does not run under is recorded with the reason, not left out."""
    commit, dirty = tool_git_state()
    outcomes = run.outcomes
    for name, outcome in outcomes.items():
        attach_environment(outcome, run.interpreters.get(name, sys.executable))
    env = _parent_environment(outcomes, run.interpreters, run.device)
    env.mode_environment = {m.name: dict(m.env) for m in run.modes}
    megatron = next((o.child.environment.megatron_source_commit for o in outcomes.values()
                     if o.child and o.child.environment and o.child.environment.megatron_source_commit), None)
    env.megatron_source_commit = megatron  # always written: the reference report has the key
    staging = next((o.child.environment.megatron_staging for o in outcomes.values()
                    if o.child and o.child.environment and o.child.environment.megatron_staging), None)
    if staging is not None:
        env.megatron_staging = staging
    sglang_paths = {o.run.observed.matmul_path for o in outcomes.values()
                    if o.run.observed and o.run.observed.library == "sglang" and o.run.observed.matmul_path}
    if sglang_paths:  # one value, or both joined if the two SGLang modes saw different paths
        env.sglang_matmul_path = "/".join(sorted(sglang_paths))
    results: dict[str, dict] = {}
    mode_runs: dict[str, ModeRun] = {}
    for m in run.modes:
        if not op.runs_under(m.name):
            mode_runs[m.name], reason = skipped_run(op, m.name)
            results[m.name] = {c: CandidateUnavailable(unavailable=reason, status="unavailable")
                               for c in candidates.get(m.name, [])}
            continue
        outcome = outcomes.get(m.name)
        if outcome is None:
            continue
        mode_run = outcome.run.model_copy()
        if outcome.child is not None and op.name in outcome.child.inputs:
            mode_run.inputs = outcome.child.inputs[op.name]
        mode_runs[m.name] = mode_run
        results[m.name] = outcome.results.get(op.name, {})
    ordered = [m.name for m in run.modes if m.name in mode_runs]
    incomplete = any(mode_runs[name].status == "interrupted" for name in ordered) or len(ordered) < len(run.modes)
    return Report(
        kind=REPORT_KIND,
        rfc=RFC,
        op=op.name,
        rl_kernel_commit=rl_kernel_commit(),
        tracked_tree_dirty=dirty,
        environment=env,
        quick=run.quick,
        results={name: results[name] for name in ordered},
        schema_version=SCHEMA_VERSION,
        tool=ToolInfo(name="adaln-bench", version=__version__, commit=commit, dirty=dirty, argv=list(run.argv)),
        shape=shape_record(op, run.shape),
        device=run.device,
        modes=mode_runs,
        incomplete=incomplete,
        started_at=run.started_at.isoformat(timespec="seconds"),
        wall_s=round(run.wall_s, 3),
        inputs_differ=modes_with_other_inputs(mode_runs, sys.executable),
        draw_geometry=_geometry_record(run),
    )


def _geometry_record(run: RunContext) -> Optional[DrawGeometryRecord]:
    geom = run.draw_geometry
    if geom is None or run.device != "cuda":
        return None
    return DrawGeometryRecord(name=geom.name, sms=geom.sms)
