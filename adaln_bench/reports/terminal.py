"""The console every printing command writes to stdout through."""
from __future__ import annotations

import os
import sys

from rich.console import Console

PIPED_COLUMNS = 80  # a log or a file reads like a terminal of the usual width


def stdout_console() -> Console:
    """stdout at the terminal's width; piped, at COLUMNS where it is set, else 80 columns."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return Console(width=int(columns))
    return Console(width=None if sys.stdout.isatty() else PIPED_COLUMNS)
