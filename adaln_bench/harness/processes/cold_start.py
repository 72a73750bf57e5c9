"""The cold-start check: a candidate's first forward + backward in a fresh process, as a training job meets it.

A warmed process hides a whole class of faults. Autograd runs a CUDA backward in a device thread of its own;
a kernel that calls the driver there before any runtime call can find no current context, and a kernel
launched after such a failed setup can kill the process (seen: the bundled kernel's first backward died with
"illegal instruction" while every warm probe passed). So the mode's child runs, per candidate, a grandchild
`python -m adaln_bench.harness.processes.cold_start SPEC.json` in the mode's environment with the mode switched on (on a
CPU, a fork of a process that has only imported torch: harness/processes/fork_server.py):

1. first_step: the process's first forward on the main thread, then one backward with torch's default
   (multithreaded) autograd;
2. foreign_thread: forward and backward again from a threading.Thread that has never touched CUDA.

Both are checked against the operator's formula recomputed in fp32 (loosely: garbage, not rounding) and the second must repeat the
first bitwise. The grandchild prints a marker before each step, so a crash is attributed to its step.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Optional

from pydantic import ConfigDict

from adaln_bench.harness.processes.fork_server import Launch, Launched, read_text
from adaln_bench.harness.processes.launcher import (Child, ProtocolSpec, child_command, child_main, describe_exit,
                                                    read_result, write_spec)
from adaln_bench.harness.processes.protocol import RunConfig
from adaln_bench.datamodel.io import write_text_atomic
from adaln_bench.datamodel.schema import ColdStart

STEP_PREFIX = "@@adaln-bench-cold-start "
STEPS = ("first_step", "foreign_thread")
TOKENS = 2  # a failing size of the bundled kernel's old d_act GEMM; any small T serves
INPUT_SEED = 11
# An fp32 recomputation differs from a bf16 kernel by rounding (~1e-2 at most); garbage is far beyond.
SANITY_REL_ERR = 5e-2
TIMEOUT_S = 300.0
STDERR_TAIL_CHARS = 3000


class ColdStartSpec(ProtocolSpec):
    model_config = ConfigDict(extra="forbid")

    config: RunConfig  # the run's: device, shape, draws, the modes file and Megatron's source
    mode: str
    op: str
    candidate: str
    # The GPU's lease (harness/processes/gpu_lease.py), taken from the first CUDA call to the end; None: none
    # (a CPU run).
    lease_dir: Optional[str] = None
    lease_key: Optional[str] = None


def times_path(result_path: str) -> Path:
    """Where the check leaves its step times (harness/measurement/step_clock.py) for the child that started it."""
    path = Path(result_path)
    return path.with_name(path.stem + ".time.json")


# --- the mode's child: start the grandchild and read what it left -------------------------------------


MODULE = "adaln_bench.harness.processes.cold_start"


def in_new_interpreter(spec_path: str, timeout_s: float) -> Launched:
    """`python -m adaln_bench.harness.processes.cold_start SPEC.json`: a process that imports everything itself.

    Its stdout and stderr go to files beside its spec, as a fork's do (harness/processes/fork_server.py). It stays
    in the mode's child's session, so that stopping that child stops the check too."""
    out, err = spec_path + ".stdout", spec_path + ".stderr"
    child = Child(child_command(MODULE, spec_path), Path(err), out=Path(out), new_session=False)
    try:
        ended = child.wait(timeout_s)
    finally:
        child.close()
    return Launched(read_text(out), read_text(err), None if ended.timed_out else ended.code, ended.timed_out)


def check_cold_start(spec: ColdStartSpec, timeout_s: float = TIMEOUT_S,
                     launch: Launch = in_new_interpreter) -> ColdStart:
    """Run the check in a fresh process (the caller's environment, so the mode's variables) and classify it:
    a new interpreter, or on a CPU a fork of one that has imported torch and nothing more
    (harness/processes/fork_server.py).

    The grandchild's spec is written beside its result file, which the caller names in a folder of its own.
    """
    result_path = Path(spec.result_path)
    spec_path = result_path.with_name(result_path.name + ".spec.json")
    write_spec(spec, spec_path, result_path)
    started = time.monotonic()
    launched = launch(str(spec_path), timeout_s)
    result = _classify(launched, result_path, timeout_s)
    result.wall_s = round(time.monotonic() - started, 3)
    result.process = launched.process
    return result


def _classify(launched: Launched, result_path: Path, timeout_s: float) -> ColdStart:
    """The grandchild's result file where it ended well; else which step it died or hung in."""
    stdout, stderr, code, timed_out = launched.stdout, launched.stderr, launched.code, launched.timed_out
    steps = [ln[len(STEP_PREFIX):].strip() for ln in stdout.splitlines() if ln.startswith(STEP_PREFIX)]
    tail = stderr[-STDERR_TAIL_CHARS:] or None
    result, problem = read_result(result_path, ColdStart) if not timed_out and code == 0 else (None, None)
    if result is not None:
        return result
    last = steps[-1] if steps else "start-up"
    passed = steps[:-1]
    if timed_out:
        return ColdStart(status="timeout", steps_passed=passed, failed_step=last, stderr_tail=tail,
                         reason=f"no result within {timeout_s:g} s")
    how = problem if code == 0 else f"the process died during {last}: {describe_exit(code)}"
    return ColdStart(status="crashed", steps_passed=passed, failed_step=last, stderr_tail=tail, reason=how)


# --- the grandchild ------------------------------------------------------------------------------------


def _announce(step: str) -> None:
    print(STEP_PREFIX + step, flush=True)


def _rel_err(x, ref) -> float:
    scale = ref.abs().max().item()
    return (x.float() - ref).abs().max().item() / scale if scale else (x.float() - ref).abs().max().item()


def _step(subject, inputs, upstream):
    """One forward + backward on fresh leaves; returns the outputs and the row gradients (None without a
    backward)."""
    import torch

    if not subject.has_backward:
        with torch.no_grad():
            return subject.forward(inputs), None
    leaves = subject.leaves(inputs)
    outs = subject.forward(leaves)
    torch.autograd.backward(outs, [u.to(o.dtype) for u, o in zip(upstream, outs)])
    device = next(iter(inputs.values())).device
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return tuple(o.detach() for o in outs), tuple(leaves[g].grad for g in subject.row_grads)


def _check_values(subject, outs, row_grads, inputs, upstream) -> Optional[str]:
    """None if the step's numbers are those of the operator (up to rounding), else what is wrong."""
    import torch

    from adaln_bench.harness.measurement.accuracy import joined, upcast
    from adaln_bench.harness.measurement.subject import as_outputs

    leaves = upcast(subject, inputs, torch.float32)
    ref = as_outputs(subject.reference(*(leaves[n] for n in subject.inputs)))
    err = _rel_err(joined(outs), joined(ref).detach())
    if not err <= SANITY_REL_ERR:
        return f"output is not the operator's: relative error {err:.3g} against an fp32 recomputation"
    if row_grads:
        wanted = [leaves[g] for g in subject.row_grads]
        refs = torch.autograd.grad(ref, wanted, [u.float() for u in upstream], allow_unused=True)
        for name, got, expect in zip(subject.row_grads, row_grads, refs):
            err = _rel_err(got, expect) if expect is not None else 0.0
            if not err <= SANITY_REL_ERR:
                return f"d_{name} is not the operator's: relative error {err:.3g} against an fp32 recomputation"
    return None


def _in_new_thread(fn):
    """Run fn in a thread that has never touched CUDA; re-raise its exception here."""
    box: dict = {}

    def body() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            box["error"] = exc

    thread = threading.Thread(target=body, name="adaln-bench-cold-start")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def run_steps(spec: ColdStartSpec) -> ColdStart:
    import torch

    from adaln_bench.harness.measurement.subject import Subject
    from adaln_bench.modes.registry import ModeOptions, all_modes
    from adaln_bench.modes.switch import ModeSwitch
    from adaln_bench.ops import candidates
    from adaln_bench.ops.candidates import BuildContext
    from adaln_bench.ops.draws import draw_params, draw_rows, draw_upstream
    from adaln_bench.ops.registry import get_operator

    from adaln_bench.draws import geometry
    from adaln_bench.ops.draws import use_geometry

    use_geometry(geometry(spec.config.draw_geometry))
    device = torch.device(spec.config.device)
    if device.type == "cuda":
        torch.cuda.set_device(0)  # as the mode's child does: the slot's GPU is the only one visible
    mode = all_modes(spec.config.modes_file)[spec.mode]
    ModeSwitch(mode, ModeOptions(megatron_src=spec.config.megatron_src), device.type == "cuda")
    op, shape = get_operator(spec.op), spec.config.shape
    candidate = candidates.get(spec.candidate, op.name)
    impl = candidate.build(BuildContext(mode=spec.mode, device=device, shape=shape, op=op.name))
    subject = Subject.of(op, candidate, impl, shape)
    drawn = {**draw_rows(op, shape, INPUT_SEED, TOKENS, device), **draw_params(op, shape, device)}
    inputs = {n: drawn[n] for n in subject.inputs}
    upstream = draw_upstream([o.shape(shape, TOKENS) for o in op.outputs], [o.dtype for o in op.outputs],
                             INPUT_SEED, device)

    passed: list[str] = []

    def failed(step: str, reason: str) -> ColdStart:
        return ColdStart(status="failed", steps_passed=passed, failed_step=step, reason=reason)

    _announce("first_step")
    try:
        outs, row_grads = _step(subject, inputs, upstream)
    except Exception as exc:  # noqa: BLE001 - the candidate's failure is the finding
        return failed("first_step", f"{type(exc).__name__}: {exc}")
    problem = _check_values(subject, outs, row_grads, inputs, upstream)
    if problem:
        return failed("first_step", problem)
    passed.append("first_step")

    _announce("foreign_thread")
    try:
        outs2, row_grads2 = _in_new_thread(lambda: _step(subject, inputs, upstream))
    except Exception as exc:  # noqa: BLE001
        return failed("foreign_thread", f"{type(exc).__name__}: {exc}")
    same = all(torch.equal(a, b) for a, b in zip(outs2, outs)) and (
        row_grads is None or all(torch.equal(a, b) for a, b in zip(row_grads2, row_grads)))
    if not same:
        return failed("foreign_thread", "the same inputs gave other bits than the first step "
                                        "(run-to-run nondeterminism, or a setup that failed silently)")
    passed.append("foreign_thread")
    return ColdStart(status="ok", steps_passed=passed)


def _steps(spec: ColdStartSpec):
    """The check's clock: its GPU work is one step under the lease, after the imports, which take none."""
    import torch  # noqa: F401 - imported before the lease is taken

    from adaln_bench.harness.processes.gpu_lease import lease_for
    from adaln_bench.harness.measurement.step_clock import StepClock
    from adaln_bench.modes.switch import ModeSwitch  # noqa: F401
    from adaln_bench.ops import candidates  # noqa: F401

    def sync() -> None:
        if spec.config.device == "cuda" and torch.cuda.is_initialized():
            torch.cuda.synchronize()

    return StepClock(lease_for(spec.lease_dir, spec.lease_key), serial=spec.config.serial, sync=sync)


def main(argv: list[str]) -> int:
    return child_main(argv[1:], MODULE, ColdStartSpec, _check)


def _check(spec: ColdStartSpec, publish) -> None:
    from adaln_bench.harness.measurement.step_clock import COLD_START

    clock = _steps(spec)
    with clock.step(COLD_START):
        result = run_steps(spec)
    publish(result)
    write_text_atomic(clock.snapshot().model_dump_json(), str(times_path(spec.result_path)))
    if result.status != "ok":
        print(json.dumps({"cold_start": result.status, "reason": result.reason}), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
