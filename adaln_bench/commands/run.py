"""`adaln-bench run`: measure every chosen (mode, candidate) and write one report."""
from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import List, Optional

import typer

from adaln_bench.commands.device import resolve_device
from adaln_bench.errors import UserError
from adaln_bench.harness.assembly.shapes import Shape, resolve_shape
from adaln_bench.ops import compat


def _parse_gpus(gpus: Optional[str], device: str) -> list[Optional[int]]:
    if not gpus:
        return [None]
    if device != "cuda":
        raise UserError("--gpus needs a CUDA run")
    try:
        ids = [int(x) for x in gpus.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--gpus takes GPU indices like 0,1,2, not {gpus!r}") from None
    if not ids or len(set(ids)) != len(ids) or min(ids) < 0:
        raise UserError(f"--gpus takes distinct non-negative GPU indices, not {gpus!r}")
    import torch

    count = torch.cuda.device_count()
    if max(ids) >= count:
        raise UserError(f"--gpus {gpus}: this machine has {count} GPU(s), indices 0 to {count - 1}")
    return list(ids)


def _draw_geometry(text: str, device: str):
    from adaln_bench.draws import geometry

    geom = geometry(text)
    if not geom.is_native and device != "cuda":
        raise UserError(f"--draw-geometry {text}: CPU draws depend on no GPU; the option is for CUDA runs")
    return geom


def run_command(
    op: List[str] = typer.Option([], "--op", metavar="OP",
                                 help="Operator to measure (repeatable), or all; default: every operator "
                                 "(adaln-bench ops lists them)."),
    mode: List[str] = typer.Option([], "--mode", "-m", metavar="MODE", help="Mode to run (repeatable); default: every mode."),
    candidate: List[str] = typer.Option([], "--candidate", "-c", metavar="NAME",
                                        help="Candidate to measure (repeatable): a registered name or module:function."),
    device: str = typer.Option("auto", help="auto, cuda or cpu."),
    quick: bool = typer.Option(False, "--quick", help="Smoke test: smaller probes, T in (1, 3) only; flagged in the report."),
    preset: Optional[str] = typer.Option(None, help="Shape preset: h3 (GPU default), flux, small, tiny (CPU default)."),
    dim: Optional[int] = typer.Option(None, help="D, the width of temb."),
    hidden: Optional[int] = typer.Option(None, help="H, the hidden size."),
    modalities: Optional[int] = typer.Option(None, help="M, the number of modalities (N = 6·M·H)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o",
                                       help="Directory of the reports (one per operator under <out>/<op>/, and "
                                       "a run index); with one operator, a report file. Default results/<device>/."),
    timeout: Optional[float] = typer.Option(None, help="Seconds one mode may take before its child is stopped (a positive, finite number)."),
    gpus: Optional[str] = typer.Option(None, help="Comma-separated GPU indices: modes run concurrently, one child per GPU."),
    modes_file: Optional[Path] = typer.Option(None, help="TOML file of extra recipe modes."),
    megatron_src: Optional[Path] = typer.Option(None, help="A Megatron-LM checkout to import Megatron from."),
    python: List[str] = typer.Option([], "--python", metavar="MODE=PYTHON",
                                     help="MODE=INTERPRETER (repeatable): run that mode's child under another "
                                     "Python environment, e.g. vllm=.adaln-envs/vllm/bin/python."),
    envs_file: Optional[Path] = typer.Option(None, "--envs-file",
                                             help="TOML file whose [python] table maps modes to interpreters "
                                             "(written by `adaln-bench envs create`)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
    strict: bool = typer.Option(False, "--strict", help="Exit non-zero (3) also when a pair is unavailable here."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Run a shape estimated to take hours on the CPU anyway."),
    latency_only: bool = typer.Option(False, "--latency-only",
                                      help="Measure latency only: no probes, no accuracy (a report to diff "
                                      "latency against another latency-only one)."),
    accuracy_only: bool = typer.Option(False, "--accuracy-only",
                                       help="Measure the errors against FP64 only: no probes, no timing, no cold "
                                       "start (a quick fidelity check of the inputs against another GPU's report)."),
    cold_start: bool = typer.Option(True, "--cold-start/--no-cold-start",
                                    help="Check each candidate's first forward + backward in a fresh process "
                                    "(one extra process per candidate and mode). Off: no cold_start in the report."),
    draw_geometry: str = typer.Option("native", "--draw-geometry", metavar="GEOMETRY",
                                      help="CUDA runs: draw the seeded inputs as torch does on a GPU with this many "
                                      "SMs: native (this GPU's), h200 (132), b200 (148) or a number; so that "
                                      "reports of two GPUs compare on the same inputs."),
    repeat: int = typer.Option(1, "--repeat", metavar="K",
                               help="Measure each mode's latency in K fresh processes, one after another, every sample "
                               "kept (device time); probes and accuracy run once. The nightly uses 3."),
    serial: bool = typer.Option(False, "--serial",
                                help="One step at a time: one child per GPU (one on a CPU), one cold-start check at "
                                "a time. Default on CUDA: probes, accuracy and cold-start checks of several "
                                "children side by side as the free memory allows, latency always with the GPU to "
                                "itself."),
    mps: bool = typer.Option(False, "--mps",
                             help="CUDA: the run's processes share each GPU through CUDA's Multi-Process Service, "
                             "a daemon the run starts and stops itself (nvidia-cuda-mps-control), instead of "
                             "taking turns; where it is missing or fails, the run goes on without it and says so. "
                             "Measured on an H100: no faster, and device times up to 8 % higher "
                             "(docs/running.md)."),
    probe_graphs: bool = typer.Option(False, "--probe-graphs/--eager-probes",
                                      help="CUDA: replay the probes' runs of a few rows from CUDA graphs, each size "
                                      "checked bit for bit against an eager run of the same rows first; the same "
                                      "counts without the host's launches (docs/spec.md). Not yet measured on a "
                                      "GPU, so off by default."),
) -> None:
    """Measure batch invariance, FP64 accuracy and latency; write one JSON report per operator."""
    from adaln_bench.commands.progress import RunProgress
    from adaln_bench.harness.assembly.run import RunRequest, run

    if repeat < 1:
        raise UserError(f"--repeat must be at least 1, not {repeat}")
    if accuracy_only and latency_only:
        raise UserError("--accuracy-only and --latency-only leave nothing to measure together; choose one")
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise UserError("--timeout must be a positive number of seconds")
    if megatron_src is not None and not megatron_src.is_dir():
        raise UserError(f"--megatron-src {megatron_src}: not a directory")
    run_device = resolve_device(device)
    if mps and run_device != "cuda":
        raise UserError(f"--mps shares a GPU; this run is on the {run_device}")
    slots = _parse_gpus(gpus, run_device)
    geometry = _draw_geometry(draw_geometry, run_device)
    shape: Shape = resolve_shape(preset, dim, hidden, modalities, on_gpu=run_device == "cuda")
    request = RunRequest(
        op=list(op), mode=list(mode), candidate=list(candidate), device=device, run_device=run_device, shape=shape,
        legacy_form=compat.legacy_form(preset, dim, hidden, modalities, out, op), quick=quick, out=out,
        timeout=timeout, slots=slots, modes_file=modes_file, megatron_src=megatron_src, python=list(python),
        envs_file=envs_file, quiet=quiet, strict=strict, yes=yes, latency_only=latency_only,
        accuracy_only=accuracy_only, cold_start=cold_start, geometry=geometry, repeat=repeat,
        serial=serial, mps=mps, probe_graphs=probe_graphs)
    code, lines = run(request, lambda jobs, quiet: RunProgress(jobs, disabled=quiet))
    for line in lines:
        print(f"adaln-bench: {line}", file=sys.stderr)
    if code:
        raise typer.Exit(code)
