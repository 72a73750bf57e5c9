"""A child for tests/test_launcher.py: `python -m tests.launcher_child SPEC.json`, which does what its spec's
first `ops` entry says (a kernel-bench spec has that field too, so kernel-bench's loop can start it)."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from pydantic import BaseModel

from adaln_bench.harness.processes.launcher import ProtocolSpec, child_main

MODULE = "tests.launcher_child"


class Act(ProtocolSpec):
    ops: list[str]


class Done(BaseModel):
    ops: dict[str, dict]
    errors: dict[str, str]
    wall_s: float


def act(spec: Act, publish) -> None:
    what = spec.ops[0]
    print(f"acting: {what}", file=sys.stderr, flush=True)
    if what == "write":
        publish(Done(ops={"x": {"us": 1.5}}, errors={}, wall_s=0.1))
    elif what == "raise":
        raise RuntimeError("deliberate failure")
    elif what == "malformed":
        Path(spec.result_path).write_text('{"ops": 3, "errors": {}}', encoding="utf-8")
    elif what == "hang":  # a process of its own beside it, whose pid the test checks is ended too
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        Path(spec.result_path + ".grandchild").write_text(str(grandchild.pid), encoding="utf-8")
        time.sleep(120)
    elif what != "silent":
        raise SystemExit(f"unknown act {what}")


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:], MODULE, Act, act))
