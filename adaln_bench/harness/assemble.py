"""Putting the children's results together into one report (docs/spec.md#9-the-report)."""
from __future__ import annotations

import datetime as _dt
import sys
from typing import Optional

from adaln_bench import __version__
from adaln_bench.harness.environment import rl_kernel_commit, tool_git_state, torch_environment
from adaln_bench.harness.mode_environment import attach_environment
from adaln_bench.harness.runner import ModeOutcome
from adaln_bench.shape import Shape
from adaln_bench.modes.registry import Mode
from adaln_bench.reports.mode_environments import modes_with_other_inputs
from adaln_bench.reports.schema import (SCHEMA_VERSION, REPORT_KIND, Environment, Report, Shape as ShapeModel,
                                        ToolInfo)

RFC = "RL-Align/RL-Kernel#420"
OP = "adaln_projection"


def shape_record(shape: Shape) -> ShapeModel:
    """The shape as the report records it, with N written out."""
    return ShapeModel(dim=shape.dim, hidden=shape.hidden, modalities=shape.modalities,
                      out_features=shape.out_features, preset=shape.preset)


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


def assemble_report(modes: list[Mode], outcomes: dict[str, ModeOutcome], shape: Shape, device: str,
                    quick: bool, started_at: _dt.datetime, wall_s: float, argv: Optional[list[str]] = None,
                    interpreters: Optional[dict[str, str]] = None) -> Report:
    """`interpreters`: the modes run under another interpreter than this one, and that interpreter."""
    commit, dirty = tool_git_state()
    interpreters = interpreters or {}
    for name, outcome in outcomes.items():
        attach_environment(outcome, interpreters.get(name, sys.executable))
    env = _parent_environment(outcomes, interpreters, device)
    env.mode_environment = {m.name: dict(m.env) for m in modes}
    megatron = next((o.child.environment.megatron_source_commit for o in outcomes.values()
                     if o.child and o.child.environment and o.child.environment.megatron_source_commit), None)
    env.megatron_source_commit = megatron  # always written: the reference report has the key
    sglang_paths = {o.run.observed.matmul_path for o in outcomes.values()
                    if o.run.observed and o.run.observed.library == "sglang" and o.run.observed.matmul_path}
    if sglang_paths:  # one value, or both joined if the two SGLang modes saw different paths
        env.sglang_matmul_path = "/".join(sorted(sglang_paths))
    ordered = [m.name for m in modes if m.name in outcomes]
    incomplete = any(outcomes[name].run.status == "interrupted" for name in ordered) or len(ordered) < len(modes)
    mode_runs = {name: outcomes[name].run for name in ordered}
    return Report(
        kind=REPORT_KIND,
        rfc=RFC,
        op=OP,
        rl_kernel_commit=rl_kernel_commit(),
        tracked_tree_dirty=dirty,
        environment=env,
        quick=quick,
        results={name: outcomes[name].candidates for name in ordered},
        schema_version=SCHEMA_VERSION,
        tool=ToolInfo(name="adaln-bench", version=__version__, commit=commit, dirty=dirty,
                      argv=list(argv if argv is not None else sys.argv)),
        shape=shape_record(shape),
        device=device,
        modes=mode_runs,
        incomplete=incomplete,
        started_at=started_at.isoformat(timespec="seconds"),
        wall_s=round(wall_s, 3),
        inputs_differ=modes_with_other_inputs(mode_runs, sys.executable),
    )
