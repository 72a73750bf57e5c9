"""The `adaln-bench` command line. Each command's arguments live in its own module; this file only wires them.

A user's mistake (UserError) is one line on stderr and exit code 2; anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

import sys
import warnings

import typer

# numpy is optional: torch warns at import when it is missing, which would only be noise here.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

from adaln_bench.commands.compare import compare_command  # noqa: E402
from adaln_bench.commands.diff import diff_command  # noqa: E402
from adaln_bench.commands.fidelity import fidelity_command  # noqa: E402
from adaln_bench.commands.kernel_bench import kernel_bench_command  # noqa: E402
from adaln_bench.commands.listing import candidates_command, env_command, modes_command, ops_command  # noqa: E402
from adaln_bench.commands.plot import plot_command  # noqa: E402
from adaln_bench.commands.publish import publish_command  # noqa: E402
from adaln_bench.commands.report import report_command  # noqa: E402
from adaln_bench.commands.run import run_command  # noqa: E402
from adaln_bench.commands.summary import summary_command  # noqa: E402
from adaln_bench.errors import UserError  # noqa: E402

try:  # typer >= 0.29 raises the errors of its bundled copy of click, older releases click's own
    from typer._click import exceptions as _click_errors
except ImportError:
    from click import exceptions as _click_errors

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Is each AdaLN operator of a diffusion transformer batch-invariant, how accurate against FP64, and how "
    "fast, under each framework's batch-invariant mode?",
    pretty_exceptions_enable=False,
    # No rich markup in help text: it would take `[plot]`, `[python]`, `[pins]` for style tags and drop them.
    rich_markup_mode=None,
)

# One line each in the top-level --help (click would cut each docstring's first sentence with "…");
# `adaln-bench COMMAND --help` gives the whole story.
COMMANDS = (
    ("run", run_command, "Measure invariance, accuracy and speed; a report per operator."),
    ("report", report_command, "Show one report as a table or Markdown."),
    ("diff", diff_command, "Compare two reports: a verdict per mode and candidate."),
    ("compare", compare_command, "Diff each operator of a run against its committed baseline."),
    ("fidelity", fidelity_command, "Compare reports of two GPUs: verdicts, times, errors."),
    ("kernel-bench", kernel_bench_command, "Time bundled kernels against cuBLAS or their stock path (GPU)."),
    ("plot", plot_command, "Plot latency, errors and probes of up to four reports."),
    ("publish", publish_command, "Build a static site of the history of reports."),
    ("summary", summary_command, "Write results/README.md from the current reports."),
    ("modes", modes_command, "Every mode and whether it switches on here."),
    ("ops", ops_command, "Every operator: sizes, modes and candidates."),
    ("candidates", candidates_command, "Every candidate and whether it can run here."),
    ("env", env_command, "The environment a report would record (JSON)."),
)
for _name, _command, _short in COMMANDS:
    app.command(_name, short_help=_short)(_command)

from adaln_bench.commands.envs import envs_app  # noqa: E402  (a group of commands: create, list)

app.add_typer(envs_app, name="envs", short_help="Make one environment per framework (vllm, sglang, megatron).")

from adaln_bench.commands.help_text import quiet_list_argument_types  # noqa: E402

quiet_list_argument_types()


def _click_exception_types() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """Usage and other click errors, of typer's bundled click and of click itself where both are installed."""
    modules = [_click_errors]
    try:
        from click import exceptions as plain_click
    except ImportError:
        plain_click = _click_errors
    if plain_click is not _click_errors:
        modules.append(plain_click)
    return tuple(m.UsageError for m in modules), tuple(m.ClickException for m in modules)


_CLICK_USAGE, _CLICK_OTHER = _click_exception_types()


def main(argv: list[str] | None = None) -> None:
    try:
        # Without standalone mode click returns a command's typer.Exit code instead of exiting.
        code = app(args=argv, standalone_mode=False)
    except UserError as exc:
        print(f"adaln-bench: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        print("adaln-bench: interrupted", file=sys.stderr)
        sys.exit(130)
    except _CLICK_USAGE as exc:  # a usage mistake (unknown option, missing argument) is the user's too
        message = exc.format_message()
        if type(exc).__name__ == "NoArgsIsHelpError":  # a bare `adaln-bench`: its message is the help itself
            print(message)
            sys.exit(2)
        if message:  # a bare `adaln-bench` has printed its help already and has nothing to add
            print(f"adaln-bench: {message}", file=sys.stderr)
        sys.exit(2)
    except _CLICK_OTHER as exc:
        exc.show()
        sys.exit(exc.exit_code)
    if isinstance(code, int) and code != 0:
        sys.exit(code)
