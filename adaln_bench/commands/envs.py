"""`adaln-bench envs create|list`: one Python environment per framework, and the envs file that maps modes to them."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from adaln_bench.errors import UserError

DEFAULT_DIR = Path(".adaln-envs")
ENVS_FILE_NAME = "envs.toml"

envs_app = typer.Typer(help="One environment per framework (vllm, sglang, megatron), so that every mode runs "
                       "in one `adaln-bench run --envs-file`.", no_args_is_help=True)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@envs_app.command("create", short_help="Create or reuse the environments; write the envs file.")
def create_command(
    frameworks: List[str] = typer.Argument(None, metavar="FRAMEWORK...", help="vllm, sglang, megatron; default: all three."),
    directory: Path = typer.Option(DEFAULT_DIR, "--dir", help="Where the environments live, one folder each."),
    envs_file: Optional[Path] = typer.Option(None, "--envs-file",
                                             help="The envs file to read pins from and write; default DIR/envs.toml."),
    pin: List[str] = typer.Option([], "--pin", metavar="REQUIREMENT", help="A requirement, e.g. vllm==0.33.0, or FRAMEWORK=REQUIREMENT "
                                  "(megatron=torch==2.13.0, vllm=./wheels/vllm.whl); repeatable; "
                                  "overrides the envs file's [pins] for that project."),
    with_extra: List[str] = typer.Option(["diffusers"], "--with-extra", metavar="EXTRA",
                                         help="Extras of this checkout installed in every environment beside the "
                                         "framework's (repeatable; default: diffusers)."),
    installer: str = typer.Option("auto", help="auto (uv when it is on PATH, else venv + pip), uv or pip."),
    base_python: Optional[str] = typer.Option(None, "--base-python",
                                              help="The interpreter the environments are made from; default: this one."),
    system_site_packages: bool = typer.Option(False, "--system-site-packages",
                                              help="Let the environments see the base interpreter's packages."),
    install_arg: List[str] = typer.Option([], "--install-arg", metavar="ARG",
                                          help="An extra argument for the installer's `pip install` "
                                          "(repeatable), e.g. --install-arg=--no-index."),
    force: bool = typer.Option(False, "--force", help="Rebuild even when an environment's recipe is unchanged."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show the installer's output."),
) -> None:
    """Create (or reuse) one environment per framework from this checkout's extras; write the envs file."""
    from adaln_bench.envs.build import BuildResult, EnvPlan, build_env, choose_installer, source_checkout
    from adaln_bench.envs.file import EnvsFile, read_envs_file, write_envs_file
    from adaln_bench.modes.frameworks import FRAMEWORKS, get_framework, merge_pins, modes_of, parse_pin
    from adaln_bench.harness.processes.interpreters import InterpreterChecks, resolve_interpreter

    chosen = [get_framework(name) for name in dict.fromkeys(frameworks or list(FRAMEWORKS))]
    tool = choose_installer(installer)
    checkout = source_checkout()
    root = Path(os.path.abspath(directory))
    file_path = Path(os.path.abspath(envs_file or root / ENVS_FILE_NAME))
    current = read_envs_file(file_path) if file_path.exists() else EnvsFile()
    cli_pins: dict[str, list[str]] = {}
    for value in pin:
        fw, requirement = parse_pin(value)
        cli_pins.setdefault(fw, []).append(requirement)
    unused = [fw for fw in cli_pins if fw not in {f.name for f in chosen}]
    if unused:
        raise UserError(f"--pin for {unused[0]}, which is not among the frameworks to create")
    base = resolve_interpreter(base_python) if base_python else sys.executable
    if not os.path.exists(base):
        raise UserError(f"--base-python {base_python}: no such interpreter")

    results, checks = [], InterpreterChecks()
    for fw in chosen:
        pins = merge_pins(current.pins.get(fw.name, []), cli_pins.get(fw.name, []))
        extras = list(dict.fromkeys([fw.extra, *with_extra]))
        plan = EnvPlan(fw, root / fw.name, pins, extras, checkout, tool, base, system_site_packages, list(install_arg))
        _say(f"{fw.name}: {plan.path} ({tool}; extras {','.join(extras)}"
             f"{'; pins ' + ' '.join(pins) if pins else ''})")
        result = build_env(plan, _say, force=force, verbose=verbose)
        if result.status != "failed":
            mismatch = checks.check(str(result.python), os.environ)
            if mismatch is not None:  # built, but its modes would be refused by `run`: say so now
                result = BuildResult(fw.name, "failed", result.python, mismatch)
        _say(f"{fw.name}: {result.status}" + (f": {result.reason}" if result.reason else ""))
        results.append(result)
        current.pins[fw.name] = pins
        for mode in modes_of(fw):
            if result.status == "failed":
                current.python.pop(mode, None)
            else:
                current.python[mode] = str(result.python)
    write_envs_file(file_path, current, header=[
        "Written by `adaln-bench envs create`: which interpreter runs which mode, and each framework's pins.",
        f"Use it as: adaln-bench run --envs-file {file_path}"])
    print(f"envs file: {file_path}")
    failed = [r.framework for r in results if r.status == "failed"]
    if failed:
        _say(f"adaln-bench: no environment for {', '.join(failed)}; its modes run under the parent's interpreter")
        raise typer.Exit(1)


@envs_app.command("list", short_help="The environments that exist and what each holds.")
def list_command(
    directory: Path = typer.Option(DEFAULT_DIR, "--dir", help="Where the environments live."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document on stdout."),
) -> None:
    """The environments that exist, what each holds, and whether it runs this adaln_bench."""
    from adaln_bench.envs.build import env_python, existing_envs, installed_versions
    from adaln_bench.modes.frameworks import FRAMEWORKS, modes_of
    from adaln_bench.harness.processes.interpreters import InterpreterChecks
    from adaln_bench.reports.terminal import stdout_console

    rows, checks = [], InterpreterChecks()
    for path, stamp in existing_envs(Path(os.path.abspath(directory))):
        recipe = stamp.get("recipe", {})
        fw = FRAMEWORKS.get(recipe.get("framework", ""))
        python = env_python(path)
        names = ["torch", *(fw.packages if fw else ())]
        facts = installed_versions(python, names)
        rows.append({
            "framework": recipe.get("framework"),
            "path": str(path),
            "python": str(python),
            "python_version": facts.get("python"),
            "versions": facts.get("versions", {}),
            "requirements": recipe.get("requirements", []),
            "extras": recipe.get("extras", []),
            "installer": stamp.get("installer"),
            "created_at": stamp.get("created_at"),
            "modes": modes_of(fw) if fw else [],
            "adaln_bench": facts.get("error") or checks.check(str(python), os.environ) or "same source",
        })
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        _say(f"no environments under {directory} (adaln-bench envs create makes them)")
        return
    table = Table(title=f"environments under {directory}")
    for col in ("framework", "interpreter", "python", "installed", "pins", "modes", "adaln_bench"):
        table.add_column(col, overflow="fold")
    for r in rows:
        installed = " ".join(f"{k} {v or '—'}" for k, v in r["versions"].items())
        table.add_row(r["framework"] or "?", escape(r["python"]), r["python_version"] or "—", escape(installed),
                      escape(" ".join(r["requirements"]) or "—"), " ".join(r["modes"]), escape(r["adaln_bench"]))
    stdout_console().print(table)
