"""Putting the children's results together into one report (SPEC §9)."""
from __future__ import annotations

import datetime as _dt
import sys
from typing import Optional

from adaln_bench import __version__
from adaln_bench.harness.environment import rl_kernel_commit, tool_git_state, torch_environment
from adaln_bench.harness.runner import ModeOutcome
from adaln_bench.harness.shapes import Shape
from adaln_bench.modes.registry import Mode
from adaln_bench.reports.schema import SCHEMA_VERSION, REPORT_KIND, Report, Shape as ShapeModel, ToolInfo

RFC = "RL-Align/RL-Kernel#420"
OP = "adaln_projection"


def shape_model(shape: Shape) -> ShapeModel:
    return ShapeModel(dim=shape.dim, hidden=shape.hidden, modalities=shape.modalities,
                      out_features=shape.out_features, preset=shape.preset)


def assemble_report(modes: list[Mode], outcomes: dict[str, ModeOutcome], shape: Shape, device: str,
                    quick: bool, started_at: _dt.datetime, wall_s: float, argv: Optional[list[str]] = None) -> Report:
    commit, dirty = tool_git_state()
    env = next((o.child.environment for o in outcomes.values() if o.child and o.child.environment), None)
    if env is None:  # no child got as far as reading its device: describe this process instead
        env = torch_environment("cpu")
        env.device = device
    env = env.model_copy(deep=True)
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
        shape=shape_model(shape),
        device=device,
        modes={name: outcomes[name].run for name in ordered},
        incomplete=incomplete,
        started_at=started_at.isoformat(timespec="seconds"),
        wall_s=round(wall_s, 3),
    )
