"""The `adaln-bench` command line. Each command's work lives in its own module; this file only wires them.

A user's mistake (UserError) is one line on stderr and exit code 2; anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

import sys
import warnings
from typing import Callable

import typer

# numpy is optional: torch warns at import when it is missing, which would only be noise here.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

from adaln_bench.errors import UserError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Is the AdaLN modulation projection batch-invariant, how accurate against FP64, and how fast, "
    "under each framework's batch-invariant mode?",
    pretty_exceptions_enable=False,
)


def _register(name: str, module: str, attr: str) -> None:
    """Attach a command defined in another module, so cli.py stays a table of contents."""
    import importlib

    fn: Callable = getattr(importlib.import_module(module), attr)
    app.command(name)(fn)


COMMANDS = (
    ("run", "adaln_bench.commands.run", "run_command"),
    ("report", "adaln_bench.commands.report", "report_command"),
    ("diff", "adaln_bench.commands.diff", "diff_command"),
    ("plot", "adaln_bench.commands.plot", "plot_command"),
    ("modes", "adaln_bench.commands.listing", "modes_command"),
    ("candidates", "adaln_bench.commands.listing", "candidates_command"),
    ("env", "adaln_bench.commands.listing", "env_command"),
)


for _name, _module, _attr in COMMANDS:
    _register(_name, _module, _attr)


def _click_exception_types() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """Usage and other click errors: typer >= 0.29 raises those of its bundled click copy, older ones click's."""
    usage: list[type] = []
    other: list[type] = []
    for module in ("typer._click.exceptions", "click.exceptions"):
        try:
            import importlib

            exceptions = importlib.import_module(module)
        except ImportError:
            continue
        usage.append(exceptions.UsageError)
        other.append(exceptions.ClickException)
    return tuple(usage), tuple(other)


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
        if message:  # a bare `adaln-bench` has printed its help already and has nothing to add
            print(f"adaln-bench: {message}", file=sys.stderr)
        sys.exit(2)
    except _CLICK_OTHER as exc:
        exc.show()
        sys.exit(exc.exit_code)
    if isinstance(code, int) and code != 0:
        sys.exit(code)
