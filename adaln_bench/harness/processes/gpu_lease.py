"""Who may use a GPU now: a reader/writer lease shared by every process of a run, on files in its work directory.

Work that only checks bits or errors (probes, accuracy, cold-start checks, start-up) takes the lease shared,
so several processes do it side by side; latency takes it exclusive, so device time is sampled with the GPU to
itself. A writer must not starve behind a stream of readers, so the lease has a turnstile (a second lock file):
a reader passes through it before taking the lease, a writer holds it from the moment it asks until it is done,
which stops new readers while the ones inside finish their step.

The locks are `fcntl.flock` on files opened anew for every acquisition, so two threads of one process (a child
and its cold-start pool) contend like two processes, and a process that dies lets go of everything it held.
A holder must leave no GPU work in flight when it lets go: harness/measurement/step_clock.py synchronizes the device
before every release.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Iterator, Optional

LEASE_SUFFIX = ".lease"
TURNSTILE_SUFFIX = ".turnstile"


def _open(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


@contextlib.contextmanager
def _locked(path: Path, how: int) -> Iterator[None]:
    fd = _open(path)
    try:
        fcntl.flock(fd, how)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases its lock


class GpuLease:
    """The lease of one GPU (`key`, e.g. "gpu0") in `folder`. `shared()` and `exclusive()` are context managers
    that block until granted."""

    def __init__(self, folder: Path, key: str):
        self.folder, self.key = Path(folder), key
        self.lease_path = self.folder / f"{key}{LEASE_SUFFIX}"
        self.turnstile_path = self.folder / f"{key}{TURNSTILE_SUFFIX}"

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        fd = _open(self.lease_path)
        try:
            with _locked(self.turnstile_path, fcntl.LOCK_EX):  # waits while a writer is waiting or working
                fcntl.flock(fd, fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with _locked(self.turnstile_path, fcntl.LOCK_EX), _locked(self.lease_path, fcntl.LOCK_EX):
            yield


def lease_for(folder: Optional[str], key: Optional[str]):
    """The lease a child uses: a GpuLease when its spec names a folder and a key, else none."""
    from adaln_bench.harness.measurement.step_clock import NoLease

    if folder is None or key is None:
        return NoLease()
    return GpuLease(Path(folder), key)
