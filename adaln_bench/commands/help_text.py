"""How `--help` shows a list argument: by its metavar alone (`FRAMEWORK...`), not with `<list[str]>` beside it.

Recent typer prints every argument's Python type next to its name; for a list that is `<list[str]>`, which
says nothing a user types. Options take their metavar instead of the type already; arguments do not, so a
list argument that has a metavar is shown by it. Older typer releases have no such method and are left alone.
"""
from __future__ import annotations


def quiet_list_argument_types() -> None:
    try:
        from typer.core import TyperArgument
    except ImportError:  # pragma: no cover - every typer this project supports has it
        return
    shown = getattr(TyperArgument, "display_type_rich", None)
    if shown is None or getattr(shown, "_adaln_quiet", False):
        return

    def display_type_rich(self, ctx):
        if self.metavar is not None and self.nargs != 1:
            return None
        return shown(self, ctx)

    display_type_rich._adaln_quiet = True
    TyperArgument.display_type_rich = display_type_rich
