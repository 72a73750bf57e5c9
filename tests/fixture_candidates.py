"""User candidates (`fixture_candidates:NAME`) that misbehave on purpose, for the runner's failure tests.

Each misbehaves only in the plain mode (no CUBLASLT_WORKSPACE_SIZE in its environment) unless told
otherwise, so a test can show that the other modes still run.
"""
import os
import signal
import threading
import time
from pathlib import Path

import torch
import torch.nn.functional as F


def _misbehave_here() -> bool:
    target = os.environ.get("FIXTURE_MISBEHAVE_IN", "plain")
    in_recipe = "CUBLASLT_WORKSPACE_SIZE" in os.environ
    return (target == "cublaslt_ws1") == in_recipe


def _linear(temb, w, b):
    return F.linear(F.silu(temb).to(w.dtype), w, b)


def crash(temb, w, b):
    if _misbehave_here():
        os.kill(os.getpid(), signal.SIGSEGV)
    return _linear(temb, w, b)


def hang(temb, w, b):
    if _misbehave_here():
        marker = os.environ.get("FIXTURE_MARKER")
        if marker:
            Path(marker).write_text("hanging")
        time.sleep(3600)
    return _linear(temb, w, b)


def raises(temb, w, b):
    if _misbehave_here():
        raise RuntimeError("deliberate failure inside the candidate")
    return _linear(temb, w, b)


def barrier(temb, w, b):
    """Waits until every mode named in FIXTURE_BARRIER_MODES has reached it: passes only if they run at once."""
    folder = Path(os.environ["FIXTURE_BARRIER_DIR"])
    me = "cublaslt_ws1" if "CUBLASLT_WORKSPACE_SIZE" in os.environ else "plain"
    (folder / me).write_text(os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    deadline = time.monotonic() + 120
    while not all((folder / m).exists() for m in os.environ["FIXTURE_BARRIER_MODES"].split(",")):
        if time.monotonic() > deadline:
            raise TimeoutError("the other mode never arrived: modes did not run concurrently")
        time.sleep(0.1)
    return _linear(temb, w, b)


# --- faults only the cold-start check and the random probe can see -----------------------------------------

_THREADS_WITH_CONTEXT = {threading.get_ident()}  # like a context made current at load time


class _NeedsLoadThreadContext(torch.autograd.Function):
    """Backward 'needs a context' only the loading thread has; elsewhere it dies as a bad launch would."""

    @staticmethod
    def forward(ctx, temb, w, b):
        ctx.save_for_backward(temb, w, b)
        return _linear(temb, w, b)

    @staticmethod
    def backward(ctx, dy):
        if threading.get_ident() not in _THREADS_WITH_CONTEXT:
            os.kill(os.getpid(), signal.SIGILL)
        temb, w, b = ctx.saved_tensors
        with torch.enable_grad():
            t, wl, bl = (x.detach().requires_grad_() for x in (temb, w, b))
            return torch.autograd.grad(_linear(t, wl, bl), (t, wl, bl), dy)


def crash_in_fresh_thread(temb, w, b):
    """Right in every warm probe; its backward kills the process in a thread that did not load it."""
    return _NeedsLoadThreadContext.apply(temb, w, b)


WRONG_SIZES = range(514, 1023)  # no fixed probe uses a batch size in here


def wrong_mid_sizes(temb, w, b):
    """Every row differs (output and d_temb) when the batch has 514 to 1022 rows, and nowhere else."""
    out = _linear(temb, w, b)
    if temb.shape[0] in WRONG_SIZES:
        out = out * (1 + 2 ** -6)
    return out


def slowed_bundled(temb, w, b):
    """The bundled kernel, its forward run FIXTURE_SLOWDOWN times (default 1): a regression made on purpose."""
    from adaln_bench.kernels.bundled import candidate as bundled

    forward = bundled.make_forward(bundled.get_library(temb.device))
    for _ in range(int(os.environ.get("FIXTURE_SLOWDOWN", "1")) - 1):
        with torch.no_grad():
            forward(temb, w, b)
    return forward(temb, w, b)


def projection_subject(impl, shape):
    """A forward function of the projection as the harness measures it (inputs temb, w, b)."""
    from adaln_bench.harness.measurement.subject import Subject
    from adaln_bench.ops.adaln_projection import OPERATOR

    return Subject.for_forward(OPERATOR, impl, shape)
