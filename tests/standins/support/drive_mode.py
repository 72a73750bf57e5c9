"""Switch one mode on in this process, as the harness child does, and print what happened as JSON.

    python tests/standins/support/drive_mode.py MODE [MEGATRON_SRC]

The caller sets PYTHONPATH to the stand-ins and the mode's variables, as the harness parent does.
Prints {"error": type, "message": ...} when enable raises; otherwise the switch, the observation, and
the overrides left after switch.off() and after switch.on().
"""
import json
import sys

import torch  # noqa: F401  # imported first, as in the child

from adaln_bench.modes.observe import changed_entries, dispatch_snapshot, observe
from adaln_bench.modes.registry import ModeOptions, all_modes


def main() -> None:
    mode = all_modes()[sys.argv[1]]
    options = ModeOptions(megatron_src=sys.argv[2] if len(sys.argv) > 2 else None)
    before = dispatch_snapshot()
    try:
        switch = mode.enable(options)
    except Exception as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc), "exc_name": getattr(exc, "name", None)}))
        return
    result = {
        "path": switch.path,
        "library": switch.library,
        "library_version": switch.library_version,
        "notes": switch.notes,
        "has_off": switch.off is not None,
        "has_on": switch.on is not None,
        "observed": observe(mode, before, switch).model_dump(),
    }
    if switch.off is not None:
        switch.off()
        result["overrides_after_off"] = changed_entries(before, dispatch_snapshot())
        switch.on()
        result["overrides_after_on"] = changed_entries(before, dispatch_snapshot())
    print(json.dumps(result))


if __name__ == "__main__":
    main()
