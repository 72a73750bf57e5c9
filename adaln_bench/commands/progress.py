"""The progress of `adaln-bench run`, fed by the children's progress lines.

On a terminal: one live bar per mode, with a clock that keeps moving in every phase (rich's own stops once
the probe count is complete, which is before accuracy and latency) and an ETA while the probes run. In a
log (stderr not a terminal): one plain line per phase per mode, with the elapsed time, so that a CI log
shows where a long run is instead of nothing until the end; and during a long phase a heartbeat line at
least every HEARTBEAT_S seconds (a flux-sized latency phase ran almost 4 minutes without a line).
"""
from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn
from rich.text import Text

from adaln_bench.bounded_read import reason_suffix

PROBE_PHASE = "batch invariance"
HEARTBEAT_S = 30.0  # in a log, the longest silence while a mode runs


def clock(seconds: Optional[float]) -> str:
    if seconds is None:
        return "-:--:--"
    s = int(max(seconds, 0))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


@dataclass
class ModeState:
    """Where one mode is, on the parent's monotonic clock."""

    now: Callable[[], float]
    started: Optional[float] = None
    ended: Optional[float] = None
    phase: Optional[str] = None
    phase_started: Optional[float] = None
    phase_done0: int = 0
    done: int = 0
    total: int = 0

    def elapsed(self) -> Optional[float]:
        if self.started is None:
            return None
        return (self.ended if self.ended is not None else self.now()) - self.started

    def eta(self) -> Optional[float]:
        """Seconds left in the probes, from their rate so far; None outside them or before a rate is known."""
        if self.ended is not None or self.phase != PROBE_PHASE or not self.total or self.phase_started is None:
            return None
        made = self.done - self.phase_done0
        spent = self.now() - self.phase_started
        if made <= 0 or spent <= 0:
            return None
        return (self.total - self.done) * spent / made


class _ClockColumn(ProgressColumn):
    def render(self, task) -> Text:
        return Text(clock(task.fields["state"].elapsed()), style="progress.elapsed")


class _EtaColumn(ProgressColumn):
    def render(self, task) -> Text:
        eta = task.fields["state"].eta()
        return Text("" if eta is None else f"ETA {clock(eta)}", style="progress.remaining")


class RunProgress:
    def __init__(self, jobs, disabled: bool, stream: Optional[TextIO] = None,
                 now: Callable[[], float] = time.monotonic):
        self.stream = stream or sys.stderr
        self.now = now
        self._t0 = now()
        self._lock = threading.Lock()
        self._states = {job.key: ModeState(now) for job in jobs}
        self.live = not disabled and self.stream.isatty()
        self.lines = not disabled and not self.live
        self._beat: Optional[threading.Thread] = None  # the heartbeat thread, in a log only
        self._beating = threading.Event()
        self._last_line: Optional[float] = None  # when the last log line was printed
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), _ClockColumn(), _EtaColumn(),
            console=Console(file=self.stream), disable=not self.live, transient=False,
        )
        self._tasks = {name: self._progress.add_task(f"{name}: waiting", total=None, state=state)
                       for name, state in self._states.items()}

    def __enter__(self) -> "RunProgress":
        self._progress.__enter__()
        if self.lines:
            self._beat = threading.Thread(target=self._heartbeat_loop, name="adaln-bench-heartbeat", daemon=True)
            self._beat.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._beat is not None:
            self._beating.set()
            self._beat.join(timeout=5)
            self._beat = None
        self._progress.__exit__(*exc)

    def _heartbeat_loop(self) -> None:
        while not self._beating.wait(min(5.0, HEARTBEAT_S / 2)):
            self.heartbeat()

    def heartbeat(self) -> None:
        """In a log: one line per running mode when nothing was printed for HEARTBEAT_S seconds."""
        with self._lock:
            if not self.lines or self.now() - (self._last_line if self._last_line is not None else self._t0) \
                    < HEARTBEAT_S:
                return
            running = [(name, st) for name, st in self._states.items() if st.started is not None and st.ended is None]
            if not running:
                self._last_line = self.now()  # waiting for children to start: nothing to say yet
                return
            for name, st in running:
                where = f" · {st.phase}" if st.phase else ""
                count = f", {st.done}/{st.total}" if st.total else ""
                in_phase = f", {clock(self.now() - st.phase_started)} in this phase" \
                    if st.phase_started is not None else ""
                self._line(f"{name}{where}: still running ({clock(st.elapsed())}{in_phase}{count})")

    def _line(self, text: str) -> None:
        if self.lines:
            self._last_line = self.now()
            print(f"[{clock(self.now() - self._t0)}] {text}", file=self.stream, flush=True)

    def update(self, mode: str, event: dict) -> None:
        phase = event.get("phase")
        with self._lock:
            state = self._states[mode]
            if state.started is None:
                state.started = self.now()
                self._line(f"{mode}: started")
            state.done, state.total = event.get("done", 0) or 0, event.get("total") or 0
            fields = {"completed": state.done, "total": state.total or None}
            if phase and phase != "starting":
                state.phase, state.phase_started, state.phase_done0 = phase, self.now(), state.done
                fields["description"] = f"{mode} · {event.get('candidate')} · {phase}"
                self._line(f"{mode} · {event.get('candidate')} · {phase}")
            elif phase == "starting":
                fields["description"] = f"{mode}: starting"
            self._progress.update(self._tasks[mode], **fields)

    def finish(self, mode: str, status: str, reason: Optional[str] = None) -> None:
        """The mode's last line; a mode that did not end ok, or never started, says why there (a log may be all that
        comes back)."""
        with self._lock:
            state = self._states[mode]
            why = reason_suffix(reason, status != "ok" or state.started is None)
            state.ended = self.now()
            task = self._tasks[mode]
            total = self._progress.tasks[task].total or 1
            if state.started is None:  # never ran: interrupted before it started, or refused before its child
                word = "not started" if status == "interrupted" else status
                state.started = state.ended
                self._progress.update(task, description=f"{mode}: {word}", completed=total, total=total)
                self._line(f"{mode}: {word}{why}")
                return
            self._progress.update(task, description=f"{mode}: {status}", completed=total, total=total)
            self._line(f"{mode}: {status} after {clock(state.elapsed())}{why}")
