"""CUDA's Multi-Process Service for a run's processes (`run --mps`).

Without it a GPU runs one process's context at a time and switches between them, so children that probe side by side
share the GPU by turns; the service runs every client's work in one context. Measured on an H100
(results/h100/evidence/mps/022885c/), it did not shorten the shared steps and made device times read up to 8 %
higher, so it is an option, off in the nightly; a report measured through it says so (environment.mps).
The run starts a control daemon of its own (its pipe and log folders in a fresh temporary folder, so it never meets
another daemon), checks that a CUDA process can work through it, hands its folders to every process the run starts
(the environment), and stops it when the run ends. Nothing of the GPU's settings changes: the compute mode stays as
it is.

Where the daemon is missing or does not work, the run goes on without it and says why (`MpsState.record`). Under
the service a fatal GPU error in one process reaches every process on that GPU (the server then refuses new ones
until they have all ended).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

CONTROL = "nvidia-cuda-mps-control"
PIPE_VAR, LOG_VAR = "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"
TIMEOUT_S = 60.0
# A client's first CUDA call through the daemon: it starts the server, so a broken service fails here.
_CHECK = "import torch; torch.ones(1, device='cuda').add_(1).sum().item()"


@dataclass(frozen=True)
class MpsState:
    """Whether the run's processes go through the service, and why (or why not)."""

    on: bool
    why: str

    @property
    def record(self) -> dict:
        return {"on": self.on, "why": self.why}


def _tail(text: str) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"


@contextmanager
def multi_process_service(wanted: bool, which: Callable[[str], Optional[str]] = shutil.which,
                          run: Callable = subprocess.run) -> Iterator[Optional[MpsState]]:
    """While inside, the run's processes use a daemon of their own where `wanted` and it works (the variables
    set in os.environ, which every child and check inherits); None where not wanted."""
    if not wanted:
        yield None
        return
    control = which(CONTROL)
    if control is None:
        yield MpsState(False, f"{CONTROL} is not on PATH")
        return
    folder = Path(tempfile.mkdtemp(prefix="adaln-mps-"))  # short: the daemon's socket path has a length limit
    env_vars = {PIPE_VAR: str(folder / "pipe"), LOG_VAR: str(folder / "log")}
    for path in env_vars.values():
        Path(path).mkdir()
    env = {**os.environ, **env_vars}
    state: Optional[MpsState] = None
    started = False
    try:
        try:
            proc = run([control, "-d"], env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
                       stdin=subprocess.DEVNULL)
            started = proc.returncode == 0
            if not started:
                state = MpsState(False, f"{CONTROL} -d exited {proc.returncode}: {_tail(proc.stderr)}")
            else:
                check = run([sys.executable, "-c", _CHECK], env=env, capture_output=True, text=True,
                            timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
                if check.returncode != 0:
                    state = MpsState(False, f"a CUDA process failed through the daemon: {_tail(check.stderr)}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            state = MpsState(False, f"{CONTROL}: {type(exc).__name__}: {exc}")
        if state is not None:
            yield state
            return
        saved = {name: os.environ.get(name) for name in env_vars}
        os.environ.update(env_vars)
        try:
            yield MpsState(True, f"a daemon of the run's own ({CONTROL})")
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    finally:
        if started:
            try:  # every client has ended by now: the daemon stops its server and itself
                run([control], input="quit\n", env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
            except (OSError, subprocess.TimeoutExpired):
                pass
        shutil.rmtree(folder, ignore_errors=True)
