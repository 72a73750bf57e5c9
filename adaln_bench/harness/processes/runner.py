"""The parent side of a run: one child process per mode, each on its own GPU when several are given.

Every child gets `{**os.environ, **mode.env}`, is started through the one child protocol
(harness/processes/launcher.py) and writes its result to a file the parent names; the parent validates that file
with the same model the child wrote. A crash, a hang past the timeout and a failing
switch-on each become their own status for that mode, with the reason and the tail of its stderr; the
other modes still run. Ctrl-C stops the children and keeps the finished modes.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional

from adaln_bench.harness.processes.claims import CLAIMS_SUFFIX, claimed_by, is_claimed
from adaln_bench.harness.processes.interpreters import InterpreterChecks, is_this_interpreter
from adaln_bench.harness.processes.job_queue import JobQueue
from adaln_bench.harness.processes.launcher import Child, ChildFiles, Ended, child_command, finish, write_spec
from adaln_bench.harness.processes.protocol import (PROGRESS_PREFIX, SWITCHED_ON, ChildResult, ChildSpec, OpWork,
                                                    RunConfig)
from adaln_bench.modes.registry import Mode
from adaln_bench.datamodel.schema import CandidateEntry, CandidateUnavailable, ModeRun
from adaln_bench.shape import Shape

CHILD_MODULE = "adaln_bench.harness.processes.child"
CPU_THREADS = "1"


@dataclass(frozen=True)
class ModeJob:
    """One mode's child: every operator of the run in that mode, each with its candidates."""

    mode: Mode
    work: tuple[OpWork, ...]
    python: Optional[str] = None  # the interpreter of the mode's child; None: this one
    part: Optional[int] = None  # set when one mode's operators are split over several children
    # The parts of a split mode share one list and each measures the operators it claims (harness/processes/claims.py).
    shared: bool = False
    # `--repeat`: which of the K processes this is (harness/assembly/repeat.py), and the configuration its child
    # gets where it is not the run's (a latency-only repetition's).
    repetition: int = 1
    config: Optional[RunConfig] = None

    @property
    def base_key(self) -> str:
        """The mode's name, with the part when the mode is split (`plain.1`)."""
        return self.mode.name if self.part is None else f"{self.mode.name}.{self.part}"

    @property
    def key(self) -> str:
        """The job's name: `base_key`, with the repetition after the first (`plain.1.rep2`)."""
        return self.base_key if self.repetition == 1 else f"{self.base_key}.rep{self.repetition}"

    def report_names(self) -> list[tuple[str, str]]:
        """(operator, the candidate's name in the report) for every candidate of the job."""
        from adaln_bench.ops.candidates import get

        return [(w.op, get(c, w.op).report_name(self.mode.name)) for w in self.work for c in w.candidates]


@dataclass
class ModeOutcome:
    run: ModeRun
    child: Optional[ChildResult]
    # Per operator, keyed by the candidate's name in the report.
    results: dict[str, dict[str, CandidateEntry]] = field(default_factory=dict)
    # A part of a shared mode that reached the claims: the operators it claimed, which it answers for. None:
    # it answers for every operator of its job.
    ops: Optional[frozenset[str]] = None


ProgressFn = Callable[[str, dict], None]  # (mode, event) -> None


def lease_of(config: RunConfig, workdir: Path, gpu: Optional[int]) -> tuple[Optional[str], Optional[str]]:
    """The lease (folder, key) of a child on `gpu`: one per GPU of a CUDA run, none on a CPU."""
    if not (config.device == "cuda" if config.lease is None else config.lease):
        return None, None
    return str(workdir), f"gpu{0 if gpu is None else gpu}"


WORKDIR_PREFIX = "adaln-bench-"
OWNER_FILE = "adaln-bench-owner.pid"  # in each work directory: the pid of the parent that made it


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    except OSError:
        return True
    return True


def remove_stale_workdirs(root: Optional[Path] = None) -> list[Path]:
    """Work directories left by a parent that died without cleaning up (SIGKILL, a lost machine): each one
    whose owner file names a pid that no longer runs. Ones without the file, or not ours, are left alone."""
    root = Path(root or tempfile.gettempdir())
    removed = []
    try:
        candidates = list(root.glob(WORKDIR_PREFIX + "*"))
    except OSError:
        return removed
    for path in candidates:
        owner = path / OWNER_FILE
        try:
            if not path.is_dir() or path.is_symlink() or path.stat().st_uid != os.getuid():
                continue
            pid = int(owner.read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            continue
        if pid != os.getpid() and not _pid_alive(pid):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


class ModeRunner:
    """Runs mode jobs in child processes, one at a time per slot; a GPU may have several slots, whose children
    share it under its lease in the work directory (harness/processes/gpu_lease.py)."""

    def __init__(self, options: RunConfig, slots: list[Optional[int]], on_progress: ProgressFn):
        self.options, self.slots, self.on_progress = options, slots, on_progress
        self._running: dict[str, Child] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        # What stopped the run, in the report's words: the caller knows the signal (harness/processes/stop_signals.py).
        self.stop_cause: Callable[[], str] = lambda: "interrupted"
        self._started: set[str] = set()  # jobs whose child was started
        self._threads: list[threading.Thread] = []
        self._queue: Optional[JobQueue] = None  # run_all's, so that a first part's switch lets later parts start
        remove_stale_workdirs()
        self.workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
        (self.workdir / OWNER_FILE).write_text(f"{os.getpid()}\n", encoding="utf-8")
        self.interpreter_checks = InterpreterChecks()

    def __enter__(self) -> "ModeRunner":
        return self

    def __exit__(self, *exc) -> None:
        """The children's spec, result and stderr files: what matters of them is in the report by now.

        Workers still running (the run was stopped) are stopped and waited for first, so that none writes
        into the directory after it is gone."""
        if any(t.is_alive() for t in self._threads):
            self.stop_all()
            self.join_workers()
        shutil.rmtree(self.workdir, ignore_errors=True)

    # -- one mode -------------------------------------------------------------------------------

    def run_one(self, job: ModeJob, gpu: Optional[int]) -> ModeOutcome:
        name, mode_name = job.key, job.mode.name
        files = ChildFiles.named(self.workdir, name)
        claims = self.workdir / f"{mode_name}{CLAIMS_SUFFIX}" if job.shared else None
        lease_dir, lease_key = lease_of(self.options, self.workdir, gpu)
        spec = ChildSpec(config=job.config or self.options, mode=mode_name, work=list(job.work),
                         claims_dir=str(claims) if claims else None, claimant=name if claims else None,
                         lease_dir=lease_dir, lease_key=lease_key)
        if self._stopping.is_set():  # before touching the work directory, which may be going away
            return self.not_started(job)
        if claims is not None:
            claims.mkdir(exist_ok=True)
            if job.part and all(is_claimed(claims, w.op) for w in job.work):
                return self.nothing_left(job, gpu)
        write_spec(spec, files.spec, files.result)
        env = {**os.environ, **job.mode.env}
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(gpu)
        env["PYTHONUNBUFFERED"] = "1"
        if self.options.device == "cpu":
            # One torch thread unless the user set one: the CPU shapes are small, so thread hand-offs cost more
            # than they give, and on a shared machine threads fighting for the cores made the small plain mode
            # take 5 min instead of 20 s. The child records the count (environment.cpu_threads).
            env.setdefault("OMP_NUM_THREADS", CPU_THREADS)
        started = time.monotonic()
        if not is_this_interpreter(job.python):
            # Another environment: it must import this very adaln_bench, or the mode does not run.
            mismatch = self.interpreter_checks.check(job.python, env)
            if mismatch is not None:
                return self._outcome(job, "unavailable", mismatch, None, None, None, gpu)
        with self._lock:  # stop_all() sets the flag under this lock: no child starts after it has run
            if self._stopping.is_set():
                return self.not_started(job)
            child = Child(child_command(CHILD_MODULE, files.spec, job.python), files.log, env=env,
                          read_stdout=True)
            self._running[name] = child
            self._started.add(name)
        self.on_progress(name, {"phase": "starting", "candidate": None, "done": 0, "total": None})
        reader = threading.Thread(target=self._read_progress, args=(job, child), daemon=True)
        reader.start()

        def ended() -> None:
            reader.join(timeout=5)
            with self._lock:
                self._running.pop(name, None)

        end = finish(child, files, ChildResult, self.options.timeout_s, after_exit=ended)
        wall = round(time.monotonic() - started, 3)
        result = end.result
        # A part of a shared mode that switched on answers for the operators it claimed, and only for them.
        ops = claimed_by(claims, name) if claims is not None and result is not None and \
            result.status != "unavailable" else None
        scope = job if ops is None else replace(job, work=tuple(w for w in job.work if w.op in ops))
        outcome = self._ended(scope, end, wall, gpu)
        outcome.ops = ops
        return outcome

    def _ended(self, job: ModeJob, end: Ended[ChildResult], wall: float, gpu: Optional[int]) -> ModeOutcome:
        """A child's end, classified."""
        result, code, tail = end.result, end.code, end.tail
        if self._stopping.is_set() and not (result and result.complete):
            return self._outcome(job, "interrupted", self.stop_cause(), result, wall, code, gpu, tail)
        # A complete result whose exit was slow is no timeout.
        if end.exit.timed_out and not (result and result.complete):
            return self._outcome(job, "timeout", f"no result within --timeout {self.options.timeout_s:g} s",
                                 result, wall, code, gpu, tail)
        if code != 0 or result is None or not result.complete:
            # A non-zero exit says how it ended, with the last error line of its stderr (an uncaught exception,
            # an allocation failure, say), not only the JSON's tail.
            why = end.reason() if code != 0 else "exited without a complete result file"
            return self._outcome(job, "crashed", why, result, wall, code, gpu, tail)
        if result.status == "unavailable":
            return self._outcome(job, "unavailable", result.reason, result, wall, code, gpu, tail)
        return self._outcome(job, "ok", None, result, wall, code, gpu, tail)

    def _outcome(self, job: ModeJob, status: str, reason: Optional[str], result: Optional[ChildResult],
                 wall: Optional[float], code: Optional[int], gpu: Optional[int], tail: Optional[str] = None) -> ModeOutcome:
        run = ModeRun(status=status, reason=reason, wall_s=wall, gpu_index=gpu,
                      observed=result.observed if result else None,
                      stderr_tail=tail or None, returncode=code)  # kept on success too: a warning is news
        results = {op: dict(entries) for op, entries in result.results.items()} if result else {}
        # Candidates the child never finished get an entry that says why, so nothing disappears silently.
        # What the child said stays: an entry it reported (unavailable, say) is kept as it is, and a mode it
        # reported unavailable leaves its candidates unavailable, whatever stopped the child afterwards.
        if result is not None and result.status == "unavailable" and status != "unavailable":
            status_of_missing, why = "unavailable", f"mode {job.mode.name} unavailable: {result.reason}"
        else:
            status_of_missing, why = status, f"mode {job.mode.name} {status}: {reason}"
        for op, report_name in job.report_names():
            entries = results.setdefault(op, {})
            if report_name not in entries:
                entry_status = "failed" if status_of_missing == "ok" else status_of_missing
                entries[report_name] = CandidateUnavailable(unavailable=why, status=entry_status)
        return ModeOutcome(run=run, child=result, results=results)

    def _read_progress(self, job: ModeJob, child: Child) -> None:
        for line in child.lines():
            if line.startswith(PROGRESS_PREFIX):
                try:
                    event = json.loads(line[len(PROGRESS_PREFIX):])
                except ValueError:
                    continue
                if event == SWITCHED_ON:
                    if self._queue is not None:
                        self._queue.switched_on(job.mode.name)
                    continue
                self.on_progress(job.key, event)

    # -- many modes ------------------------------------------------------------------------------

    def run_all(self, jobs: list[ModeJob], on_done: Callable[[str, ModeOutcome], None]) -> None:
        """Run every job; one worker thread per GPU slot pulls from a shared queue (harness/processes/job_queue.py: the
        later parts of a split mode wait for its first part's switch).

        Every job gets exactly one outcome, also when the run is stopped or a worker raises.
        """
        todo: JobQueue[ModeJob, ModeOutcome] = JobQueue(jobs, self._stopping)
        self._queue = todo

        def worker(gpu: Optional[int]) -> None:
            while True:
                job = todo.take()
                if job is None:
                    return
                try:
                    self._work_on(todo, job, gpu, on_done)
                finally:  # its follow-ups, if any, are queued by now
                    todo.finished(job)

        self._threads = [threading.Thread(target=worker, args=(gpu,), daemon=True) for gpu in self.slots]
        for t in self._threads:
            t.start()
        try:
            while any(t.is_alive() for t in self._threads):
                for t in self._threads:
                    t.join(timeout=0.2)
        except KeyboardInterrupt:
            self.stop_all()
            self.join_workers()
            raise
        finally:
            for job in todo.drain():  # jobs no worker took before they stopped
                on_done(job.key, self.not_started(job))

    def _work_on(self, todo: JobQueue, job: ModeJob, gpu: Optional[int],
                 on_done: Callable[[str, ModeOutcome], None]) -> None:
        verdict = todo.verdict(job)
        if verdict is not None:
            on_done(job.key, self.unavailable_as(job, verdict))
            return
        outcome = None
        try:
            outcome = self._run_guarded(job, gpu)
        finally:  # whatever happened, the later parts of its mode must not wait for ever
            todo.decide(job.mode.name, outcome if outcome is not None and
                        outcome.run.status == "unavailable" else None)
        on_done(job.key, outcome)

    def add_jobs(self, jobs: list[ModeJob]) -> None:
        """Follow-up jobs of a running `run_all` (a mode's next repetition), behind every job not yet started."""
        if self._queue is not None:
            self._queue.add(jobs)

    def _run_guarded(self, job: ModeJob, gpu: Optional[int]) -> ModeOutcome:
        """A failure in this process (starting the child, reading its files) is that mode's `failed`, with the
        message, never a thread traceback and a mode missing from the report."""
        try:
            return self.run_one(job, gpu)
        except Exception as exc:
            return self._outcome(job, "failed", f"{type(exc).__name__}: {exc}", None, None, None, gpu)

    def unavailable_as(self, job: ModeJob, first: ModeOutcome) -> ModeOutcome:
        """A later part of a mode that its first part found unavailable: that finding (the child's reason,
        what it observed, its stderr), with this part's candidates; no child is started."""
        run = first.run
        outcome = self._outcome(job, "unavailable", run.reason, first.child, run.wall_s, run.returncode,
                                run.gpu_index, run.stderr_tail)
        mine = {w.op for w in job.work}
        outcome.results = {op: entries for op, entries in outcome.results.items() if op in mine}
        return outcome

    def not_reached(self, job: ModeJob, op: str, stopped: ModeOutcome) -> ModeOutcome:
        """An operator of a shared mode that no part claimed: every part stopped first. It is reported with the
        status of `job`'s part (crashed, timeout, interrupted) and that part's reason."""
        run = stopped.run
        scope = replace(job, work=tuple(w for w in job.work if w.op == op))
        reason = f"{run.reason}; {op} was not reached" if run.reason else f"{op} was not reached"
        outcome = self._outcome(scope, run.status, reason, None, run.wall_s, run.returncode, run.gpu_index,
                                run.stderr_tail)
        outcome.run = run  # the mode's own record stays that of the part
        return outcome

    def nothing_left(self, job: ModeJob, gpu: Optional[int]) -> ModeOutcome:
        """A later part of a shared mode whose slot came up after the other parts had claimed every operator: no
        child is started (a framework's imports and a CUDA context for nothing); it answers for no operator."""
        outcome = self._outcome(replace(job, work=()), "ok", "not started: the mode's other parts claimed every "
                                "operator", None, None, None, gpu)
        outcome.ops = frozenset()
        return outcome

    def not_started(self, job: ModeJob) -> ModeOutcome:
        """The outcome of a mode that never ran because the run was stopped first."""
        return self._outcome(job, "interrupted", f"not started: {self.stop_cause()}", None, None, None, None)

    def unanswered(self, job: ModeJob) -> ModeOutcome:
        """A job without an outcome once the run stopped: never started, or its worker had not come back within
        join_workers' wait (a killed child stuck in the kernel on a swapping machine): started, then stopped."""
        if job.key in self._started:
            return self._outcome(job, "interrupted", f"{self.stop_cause()}; its child had not ended when the run "
                                 "stopped waiting for it", None, None, None, None)
        return self.not_started(job)

    def not_applicable(self, job: ModeJob) -> ModeOutcome:
        """The outcome of a mode that means nothing on this device (a cuBLAS recipe on the CPU): never started."""
        return self._outcome(job, "unavailable", f"not applicable on {self.options.device}", None, None, None, None)

    def join_workers(self, timeout: float = 60) -> None:
        """Wait for the worker threads; their children are stopped already, so this is quick."""
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))

    def stop_all(self) -> None:
        with self._lock:
            self._stopping.set()
            running = list(self._running.values())
        for child in running:
            child.stop()
