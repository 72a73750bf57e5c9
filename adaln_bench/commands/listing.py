"""`adaln-bench modes`, `candidates` and `env`: what this machine can measure, and why not where it cannot."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from adaln_bench.commands.device import resolve_device


def modes_command(
    check: bool = typer.Option(True, "--check/--no-check",
                               help="Switch each mode on in a child process to see whether it is available."),
    device: str = typer.Option("auto", help="auto, cuda or cpu: where the check runs."),
    modes_file: Optional[Path] = typer.Option(None, help="TOML file of extra recipe modes."),
    megatron_src: Optional[Path] = typer.Option(None, help="A Megatron-LM checkout to import Megatron from."),
    timeout: float = typer.Option(300, help="Seconds one mode's check may take."),
    python: List[str] = typer.Option([], "--python", metavar="MODE=PYTHON",
                                     help="MODE=INTERPRETER (repeatable): check that mode there."),
    envs_file: Optional[Path] = typer.Option(None, "--envs-file", help="TOML file mapping modes to interpreters."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document on stdout."),
    details: bool = typer.Option(False, "--details", help="Each mode's environment, switch and description."),
) -> None:
    """Every mode: its environment, whether it switches on here, the library version, and why not."""
    from adaln_bench.envs.file import choose_interpreters
    from adaln_bench.harness.processes.protocol import RunConfig
    from adaln_bench.harness.processes.runner import ModeJob, ModeRunner
    from adaln_bench.harness.assembly.shapes import PRESETS
    from adaln_bench.modes.registry import all_modes

    modes = list(all_modes(str(modes_file) if modes_file else None).values())
    runs = {}
    if check:
        run_device = resolve_device(device)
        options = RunConfig(device=run_device, shape=PRESETS["tiny"], quick=True, timeout_s=timeout,
                               modes_file=str(modes_file) if modes_file else None,
                               megatron_src=str(megatron_src) if megatron_src else None, check_only=True)
        interpreters = choose_interpreters(python, envs_file, modes, str(modes_file) if modes_file else None)
        # As `run` does: a recipe that only means something on CUDA is not applicable elsewhere, not available.
        applicable = [m for m in modes if not (m.cuda_only and run_device != "cuda")]
        print(f"adaln-bench: checking {len(applicable)} modes on the {run_device}, each in a child process "
              "(--no-check skips this) …", file=sys.stderr, flush=True)
        with ModeRunner(options, [None], lambda mode, event: None) as runner:
            for m in modes:
                if m not in applicable:
                    runs[m.name] = runner.not_applicable(ModeJob(m, (), interpreters.get(m.name))).run
            runner.run_all([ModeJob(m, (), interpreters.get(m.name)) for m in applicable],
                           lambda name, outcome: runs.__setitem__(name, outcome.run))
    rows = []
    for m in modes:
        run = runs.get(m.name)
        observed = run.observed if run else None
        rows.append({
            "mode": m.name,
            "kind": m.kind,
            "environment": dict(m.env),
            "description": m.description,
            "available": None if run is None else run.status == "ok",
            "status": None if run is None else run.status,
            "reason": None if run is None else run.reason,
            "library": observed.library if observed else None,
            "library_version": observed.library_version if observed else None,
            "switch": observed.switch_path if observed else None,
        })
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from adaln_bench.reports.listing import modes_details, modes_table, print_listing

    print_listing(modes_details(rows) if details else modes_table(rows))


def candidates_command(
    op: List[str] = typer.Option([], "--op", metavar="OP", help="Only this operator's candidates (repeatable)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document on stdout."),
    details: bool = typer.Option(False, "--details", help="Each candidate's description beside why not."),
) -> None:
    """Every registered candidate of every operator, whether it can run here, and why not."""
    from adaln_bench.reports.listing import candidate_rows, candidates_details, candidates_table, print_listing

    rows = candidate_rows(op)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    print_listing(candidates_details(rows) if details else candidates_table(rows))


def ops_command(
    as_json: bool = typer.Option(False, "--json", help="One JSON document on stdout."),
    details: bool = typer.Option(False, "--details", help="Each operator's tensors, probes and stock path."),
) -> None:
    """Every operator: its tensors, sizes, candidates and modes."""
    from adaln_bench.reports.listing import ops_details, ops_rows, ops_table, print_listing

    rows = ops_rows()
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    print_listing(ops_details(rows) if details else [ops_table(rows)])


def env_command(
    device: str = typer.Option("auto", help="auto, cuda or cpu."),
) -> None:
    """The environment a report would record: device, torch, CUDA, Python, library versions (JSON)."""
    from adaln_bench.harness.measurement.environment import tool_git_state, torch_environment

    env = torch_environment(resolve_device(device))
    commit, dirty = tool_git_state()
    data = env.model_dump(mode="json", exclude_none=False)
    data["tool_commit"], data["tool_dirty"] = commit, dirty
    typer.echo(json.dumps(data, indent=2))
