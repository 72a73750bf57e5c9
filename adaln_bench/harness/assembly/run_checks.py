"""Checks of a run made before anything runs: names that must fit in a file name, and the modes whose
environment decides what their children load."""
from __future__ import annotations

import sys

from adaln_bench.errors import UserError

# Variables that decide what a child process loads or runs before the measurement: a recipe setting one runs
# code from wherever it points (a modes file runs with the user's rights, like any script).
LOADER_VARIABLES = ("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "PATH", "PYTHONPATH", "PYTHONHOME",
                    "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONEXECUTABLE", "PYTHONINSPECT", "DYLD_INSERT_LIBRARIES",
                    "DYLD_LIBRARY_PATH")
FILE_NAME_LIMIT = 255  # bytes in one file name on Linux's and macOS's file systems


def warn_loader_variables(modes) -> None:
    """One line naming the modes whose environment sets what the child loads or runs."""
    setting = [f"{m.name} ({', '.join(k for k in m.env if k in LOADER_VARIABLES or k.startswith('LD_'))})"
               for m in modes if any(k in LOADER_VARIABLES or k.startswith("LD_") for k in m.env)]
    if setting:
        print(f"adaln-bench: warning: modes that set loader or interpreter variables, so their children run code "
              f"from where those point: {'; '.join(setting)}", file=sys.stderr)


def check_file_names(name, ops) -> None:
    """Every report's and the run index's name fits in a file name, before anything runs."""
    longest = max([name.index_file(), *(name.report_file(op.name) for op in ops)], key=len)
    if len(longest.encode("utf-8")) > FILE_NAME_LIMIT:
        raise UserError(f"the report's file name would be {len(longest.encode('utf-8'))} bytes, more than a file "
                        f"name may be ({FILE_NAME_LIMIT}): name fewer --mode (every mode is the default), or "
                        "shorter ones")
