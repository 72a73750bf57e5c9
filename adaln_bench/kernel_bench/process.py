"""What every `kernel-bench` child process shares: its log line on stderr, and its config-in, result-out main."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Callable


def log(*parts: object) -> None:
    print(" ".join(str(p) for p in parts), file=sys.stderr, flush=True)


def child_main(measure: Callable[[dict], dict], argv: list[str]) -> int:
    """``CONFIG.json OUT.json``: the measurement of the config, with its wall time, written to OUT."""
    config = json.loads(Path(argv[0]).read_text())
    started = time.monotonic()
    result = measure(config)
    result["wall_s"] = round(time.monotonic() - started, 1)
    Path(argv[1]).write_text(json.dumps(result, indent=1))
    return 0
