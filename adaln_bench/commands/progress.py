"""The live progress display of `adaln-bench run`: one bar per mode, fed by its child's progress lines."""
from __future__ import annotations

import threading

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class RunProgress:
    def __init__(self, jobs, disabled: bool):
        self.disabled = disabled
        self._lock = threading.Lock()
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=Console(stderr=True), disable=disabled, transient=False,
        )
        self._tasks = {job.mode.name: self._progress.add_task(f"{job.mode.name}: waiting", total=None)
                       for job in jobs}

    def __enter__(self) -> "RunProgress":
        self._progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.__exit__(*exc)

    def update(self, mode: str, event: dict) -> None:
        phase = event.get("phase")
        with self._lock:
            task = self._tasks[mode]
            fields = {"completed": event.get("done", 0), "total": event.get("total") or None}
            if phase:
                fields["description"] = f"{mode} · {event.get('candidate')} · {phase}"
            self._progress.update(task, **fields)

    def finish(self, mode: str, status: str) -> None:
        with self._lock:
            task = self._tasks[mode]
            total = self._progress.tasks[task].total or 1
            self._progress.update(task, description=f"{mode}: {status}", completed=total, total=total)
