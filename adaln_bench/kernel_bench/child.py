"""One process of `kernel-bench`: each operator's stock path and candidates (registered candidates, or bundled
libraries named on the command line: subjects.py) at each size, forward and forward + backward, in device time,
beside device-to-device copies of the same bytes (the faster is the rate); for a bundled library also each C
entry point alone.

Run as ``python -m adaln_bench.kernel_bench.child SPEC.json`` by the command (run.py, process.py), one process per
repetition. At each size the stock path, the candidates and the copies are each captured in a CUDA graph and
replayed in turn (`device_time.measure_interleaved`), so every candidate's ratio to the stock path and the faster
copy's to the candidate are paired round by round under the same clock. The row inputs and upstream gradients are
rotated over enough copies (`copies`) that consecutive calls in a graph find none of them in L2 (50 MB on an
H200): without that, S = 4097's 44 MB rows would partly be read from L2. Forward + backward is the harness's step
(fresh leaves, forward, backward with ones). The host-inclusive figure (one call between two events, the host
in the loop, `harness.measurement.timing.time_call`) is kept beside each device time. A process of its own (after the timed
ones, so that a slow check cannot cost the times) checks bits and errors against FP64 (checks.py).
"""
from __future__ import annotations

import itertools
import math
import sys
import time
from typing import Callable

import torch

from adaln_bench.harness.measurement import plan as P
from adaln_bench.harness.measurement.device_time import DeviceTiming, StopRule, measure_interleaved, median_ratio
from adaln_bench.harness.measurement.measure import training_step
from adaln_bench.harness.assembly.shapes import PRESETS
from adaln_bench.harness.measurement.subject import Subject
from adaln_bench.harness.measurement.timing import time_call
from adaln_bench.kernel_bench import checks
from adaln_bench.kernel_bench.entry_points import entry_points
from adaln_bench.harness.processes.launcher import child_main
from adaln_bench.kernel_bench.process import CHILD, ProcessResult, ProcessSpec, log
from adaln_bench.kernel_bench.subjects import library_subject, parse_library
from adaln_bench.kernel_bench.combine import COPY_KERNEL, COPY_MEMCPY
from adaln_bench.datamodel.kernel_bench import COPY, STOCK
from adaln_bench.ops.candidates import BuildContext, Implementation, candidates_of
from adaln_bench.ops.draws import draw_params, draw_rows
from adaln_bench.ops.registry import get_operator
from adaln_bench.ops.spec import Operator
from adaln_bench.datamodel.stats import median
from adaln_bench.shape import Shape

# Per size and kind, all subjects together: 1 % noise on each median, or the caps (a set of three subjects at
# the largest size takes about 2 s).
RULE = StopRule(target=0.01, min_samples=10, max_samples=200, max_seconds=1.5, batch=5, warmup_ms=100.0)
# The bundled projection's libraries, whose differences are a few per cent: 0.5 % noise, longer caps.
FINE_RULE = StopRule(target=0.005, min_samples=20, max_samples=300, max_seconds=8.0)
RULES = {"default": RULE, "fine": FINE_RULE}
ROTATE_BYTES = 200e6  # row bytes a graph's consecutive calls cycle through (4x the H200's L2)
MAX_COPIES = 16
HOST_WARMUP, HOST_SAMPLES = 3, 10


def copies(row_bytes: float, rotate_bytes: float = ROTATE_BYTES, most: int = MAX_COPIES) -> int:
    """Input sets to cycle through so that one call's rows are evicted from L2 before they are read again."""
    if row_bytes <= 0:
        return 1
    return max(1, min(most, math.ceil(rotate_bytes / row_bytes)))


def cycling(fns: list[Callable[[], object]]) -> Callable[[], None]:
    """One callable that runs the next of `fns` on each call (in a graph capture, each captured call the next)."""
    it = itertools.cycle(fns)
    return lambda: next(it)()


def stock_subject(op: Operator, sizes: Shape) -> Subject:
    impl = Implementation(source=op.stock_what, has_backward=True, forward=op.stock_for(sizes))
    return Subject.for_forward(op, impl, sizes)


def candidate_subject(op: Operator, name: str, sizes: Shape, device: torch.device) -> Subject:
    candidate = candidates_of(op.name).get(name)
    if candidate is None:
        raise KeyError(f"{op.name} has no candidate {name!r}")
    reason = candidate.availability()
    if reason:
        raise RuntimeError(f"{name} is unavailable: {reason}")
    impl = candidate.build(BuildContext(mode="plain", device=device, shape=sizes, op=op.name))
    return Subject.of(op, candidate, impl, sizes)


def summary(t: DeviceTiming) -> dict:
    return {"us": t.median_us, "noise": t.rel_noise, "samples": len(t.samples_us), "stop": t.stop_reason,
            "throttled": t.throttled, "sm_mhz": [t.sm_clock_mhz_before, t.sm_clock_mhz_after],
            # the dropped warm-up's median beside the kept one shows a slow spell the warm-up absorbed
            "warmup_us": median(t.warmup_samples_us) if getattr(t, "warmup_samples_us", None) else None,
            "warmup_samples": len(getattr(t, "warmup_samples_us", None) or ())}


def input_sets(op: Operator, shape: Shape, tokens: int, params: dict, device: torch.device) -> list[tuple[dict, list]]:
    """(inputs, upstream ones) pairs: the seeded rows and clones of them, each with its own ones."""
    rows = {**draw_rows(op, shape, P.ACCURACY_SEED, tokens, device), **params}
    ones = [torch.ones(o.shape(shape, tokens), dtype=o.dtype, device=device) for o in op.outputs]
    row_bytes = sum(t.numel() * t.element_size() for n, t in rows.items() if op.tensor(n).role == "row")
    row_bytes += sum(t.numel() * t.element_size() for t in ones)
    sets = [(rows, ones)]
    for _ in range(copies(row_bytes) - 1):
        sets.append(({n: t.clone() if op.tensor(n).role == "row" else t for n, t in rows.items()},
                     [t.clone() for t in ones]))
    return sets


def closures(subject: Subject, sets: list[tuple[dict, list]]) -> tuple[Callable[[], None], Callable[[], None]]:
    """Forward (no grad) and the training step, each cycling through the input sets."""
    def forward_of(inputs: dict) -> Callable[[], None]:
        mine = {n: inputs[n] for n in subject.inputs}

        def forward() -> None:
            with torch.no_grad():
                subject.forward(mine)
        return forward

    steps = [training_step(subject.forward, subject, inputs, ones) for inputs, ones in sets]
    return cycling([forward_of(inputs) for inputs, _ in sets]), cycling(steps)


def copy_closures(nbytes: float, device: torch.device) -> dict[str, Callable[[], None]]:
    """Two device-to-device copies that each read and write `nbytes` in all (half each way), over the same rotated
    buffers: torch's `copy_` (a cudaMemcpyAsync, a memcpy node in the graph) and an elementwise kernel on the SMs
    (`bitwise_not` over int32 views). On an H200 the memcpy moved 2.7 TB/s at every size in kernel-bench's rounds
    at f51093c but 4.2-4.3 TB/s in gathered_check's at S >= 32768 (docs/kernels.md): the faster of the two, in
    the same rounds, is the copy rate."""
    half = max(16, -(-int(nbytes // 2) // 16) * 16)  # whole int32 words, 16-byte rows
    pairs = [(torch.empty(half, dtype=torch.uint8, device=device).random_(),
              torch.empty(half, dtype=torch.uint8, device=device)) for _ in range(copies(half))]
    words = [(s.view(torch.int32), d.view(torch.int32)) for s, d in pairs]
    return {COPY_MEMCPY: cycling([lambda s=s, d=d: d.copy_(s) for s, d in pairs]),
            COPY_KERNEL: cycling([lambda s=s, d=d: torch.bitwise_not(s, out=d) for s, d in words])}


def copy_figure(timed: dict, ways: dict) -> tuple[str, dict]:
    """The faster copy's name and figure, with every way's median beside it."""
    way = min(ways, key=lambda n: timed[n].median_us)
    return way, {**summary(timed[way]), "way": way, "ways_us": {n: timed[n].median_us for n in ways}}


def measure_size(op: Operator, subjects: dict[str, Subject], params: dict, shape: Shape, tokens: int,
                 device: torch.device, errors: dict, rule: StopRule = RULE) -> dict:
    cost = op.cost(shape, tokens)
    sets = input_sets(op, shape, tokens, params, device)
    fns: dict[str, tuple[Callable, Callable]] = {}
    for name, subject in subjects.items():
        try:
            forward, step = closures(subject, sets)
            forward()
            step()  # a subject that fails here is recorded and left out of the timing
            fns[name] = (forward, step)
        except Exception as exc:  # noqa: BLE001
            errors[f"{op.name}/{name}@{tokens}"] = f"{type(exc).__name__}: {exc}"
            log(f"[error] {op.name}/{name}@{tokens}: {errors[f'{op.name}/{name}@{tokens}']}")
    entry: dict = {"bytes": {"fwd": cost.fwd_bytes, "fwd_bwd": cost.step_bytes}, "copies": len(sets)}
    for kind, nbytes, pick in (("fwd", cost.fwd_bytes, 0), ("fwd_bwd", cost.step_bytes, 1)):
        ways = copy_closures(nbytes, device)
        timed = measure_interleaved({**{n: f[pick] for n, f in fns.items()}, **ways}, device, rule)
        way, copy_fig = copy_figure(timed, ways)
        figs = {name: summary(timed[name]) for name in fns}
        figs[COPY] = copy_fig
        for name in fns:
            figs[name]["vs_stock"] = median_ratio(timed[name].samples_us, timed[STOCK].samples_us) \
                if STOCK in timed else None
            figs[name]["of_copy"] = median_ratio(timed[way].samples_us, timed[name].samples_us)
            host, _ = time_call(fns[name][pick], device, HOST_WARMUP, HOST_SAMPLES)
            figs[name]["host_us"] = host.median
            log(f"[time] {op.name} S={tokens} {kind} {name}: {figs[name]['us']:.1f} µs (host {host.median:.1f}), "
                f"x{figs[name]['vs_stock']} stock, {figs[name]['of_copy']} of copy ({way})")
        log(f"[time] {op.name} S={tokens} {kind} copies: " + ", ".join(
            f"{n} {us:.1f} µs ({nbytes / us / 1e6:.2f} TB/s)" for n, us in copy_fig["ways_us"].items()))
        del ways
        entry[kind] = figs
    del fns, sets
    torch.cuda.empty_cache()
    return entry


def build_subjects(op: Operator, config: dict, shape: Shape, device: torch.device,
                   errors: dict) -> tuple[dict[str, Subject], dict[str, str], dict[str, object]]:
    """The stock path, the registered candidates and the libraries named: subjects, what each is, and the C
    library behind each bundled library (for its entry points)."""
    subjects: dict[str, Subject] = {STOCK: stock_subject(op, shape)}
    info = {STOCK: op.stock_what}
    libraries: dict[str, object] = {}
    for name in config.get("candidates", []):
        try:
            subjects[name] = candidate_subject(op, name, shape, device)
            impl = subjects[name].impl
            shown = {k: v for k, v in impl.details.items() if k not in ("path", "library")}  # e.g. its norm backward
            info[name] = impl.source + "".join(f"; {k}: {v}" for k, v in shown.items())
        except Exception as exc:  # noqa: BLE001 - recorded; the stock path and the others are still measured
            errors[f"{op.name}/{name}"] = f"{type(exc).__name__}: {exc}"
    for text in config.get("libraries", []):
        spec = parse_library(text)
        try:
            subjects[spec.name], libraries[spec.name], info[spec.name] = library_subject(op, spec, shape, device, log)
        except Exception as exc:  # noqa: BLE001
            errors[f"{op.name}/{spec.name}"] = f"{type(exc).__name__}: {exc}"
    return subjects, info, libraries


def measure_entries(op: Operator, libraries: dict[str, object], params: dict, shape: Shape, tokens: int,
                    device: torch.device, errors: dict, rule: StopRule) -> dict:
    """Every library's C entry points at one size, interleaved together: where a library's time goes."""
    calls: dict[str, Callable[[], None]] = {}
    for name, lib in libraries.items():
        try:
            for part, f in entry_points(lib, shape, params, tokens, device).items():
                f()  # one that fails is recorded and left out
                calls[f"{name}\t{part}"] = f
        except Exception as exc:  # noqa: BLE001
            errors[f"{op.name}/{name}@{tokens}:entries"] = f"{type(exc).__name__}: {exc}"
    out: dict = {}
    for key, t in (measure_interleaved(calls, device, rule).items() if calls else ()):
        name, part = key.split("\t")
        out.setdefault(name, {}).setdefault(str(tokens), {})[part] = t.median_us
    del calls
    torch.cuda.empty_cache()
    return out


def measure_op(op: Operator, config: dict, shape: Shape, device: torch.device, out: dict) -> None:
    params = draw_params(op, shape, device)
    subjects, info, libraries = build_subjects(op, config, shape, device, out["errors"])
    rule = RULES[config.get("rule", "default")]
    result: dict = {"subjects": info, "sizes": {}}
    sizes = config["sizes"][op.name]
    for tokens in sizes if config.get("timing", True) else ():
        result["sizes"][str(tokens)] = measure_size(op, subjects, params, shape, tokens, device, out["errors"], rule)
        if config.get("entries") and libraries:
            for name, by_s in measure_entries(op, libraries, params, shape, tokens, device, out["errors"],
                                              rule).items():
                result.setdefault("entries", {}).setdefault(name, {}).update(by_s)
    if config.get("bits"):
        bits_sizes = config.get("bits_sizes", {}).get(op.name) or sizes
        result["bits"] = checks.check(subjects, params, shape, device, bits_sizes, log=log)
        accuracy_sizes = config.get("accuracy_sizes", {}).get(op.name) or sizes
        result["accuracy"] = checks.accuracy(subjects, params, shape, device, accuracy_sizes)
    out["ops"][op.name] = result


def measure(config: dict) -> dict:
    device = torch.device("cuda", 0)
    shape = PRESETS[config["shape"]]
    out: dict = {"ops": {}, "errors": {}}
    for name in config["ops"]:
        measure_op(get_operator(name), config, shape, device, out)
    return out


def run(spec: ProcessSpec, publish: Callable[[ProcessResult], None]) -> None:
    """The spec's measurement, with its wall time, published once it is whole."""
    started = time.monotonic()
    out = measure(spec.model_dump())
    publish(ProcessResult(**out, wall_s=round(time.monotonic() - started, 1)))


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:], CHILD, ProcessSpec, run))
