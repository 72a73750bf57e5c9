"""One process of `kernel-bench`: every subject at every T, forward and forward + backward, in device time.

Run as ``python -m adaln_bench.kernel_bench.child CONFIG.json OUT.json`` by the command (one process per
repetition, so that each figure is a median over processes). At each T the subjects' graphs are replayed in
turn (`device_time.measure_interleaved`): the H200's SM clock drops by up to 25 % under sustained bf16 load,
and subjects timed one after another would each meet a different clock. Forward + backward is the harness's
step (fresh leaves, forward, backward with ones), so these figures and a report's `device_time` measure the
same thing.
"""
from __future__ import annotations

import sys
from typing import Callable, Optional

import torch

from adaln_bench.harness.measurement import plan as P
from adaln_bench.harness.measurement.device_time import DeviceTiming, StopRule, measure_interleaved
from adaln_bench.ops.adaln_projection.inputs import Params, make_params, make_temb, make_upstream
from adaln_bench.harness.measurement.measure import training_step
from adaln_bench.harness.measurement.subject import Subject as HarnessSubject
from adaln_bench.ops.adaln_projection import OPERATOR
from adaln_bench.ops.candidates import Implementation
from adaln_bench.harness.assembly.shapes import PRESETS
from adaln_bench.kernel_bench import bits
from adaln_bench.kernel_bench.process import child_main, log
from adaln_bench.kernel_bench.subjects import Subject, cublas_subject, library_subject, parse_library
from adaln_bench.datamodel.stats import median
from adaln_bench.shape import Shape

# Per T and kind, all subjects together: 0.5 % noise on each median, or the caps.
RULE = StopRule(target=0.005, min_samples=20, max_samples=300, max_seconds=8.0)


def summary(t: DeviceTiming) -> dict:
    return {"us": t.median_us, "noise": t.rel_noise, "samples": len(t.samples_us), "throttled": t.throttled,
            "sm_mhz": [t.sm_clock_mhz_before, t.sm_clock_mhz_after], "stop": t.stop_reason,
            # the dropped warm-up's median beside the kept one shows a slow spell the warm-up absorbed
            "warmup_us": median(t.warmup_samples_us) if t.warmup_samples_us else None,
            "warmup_samples": len(t.warmup_samples_us)}


def timed_together(fns: dict[str, Callable[[], object]], device: torch.device) -> dict[str, dict]:
    return {name: summary(t) for name, t in measure_interleaved(fns, device, RULE).items()}


def forward_and_step(subject: Subject, params: Params, shape: Shape, tokens: int, device: torch.device):
    temb = make_temb(tokens, shape, P.ACCURACY_SEED, device)
    ones = torch.ones((tokens, shape.out_features), dtype=torch.bfloat16, device=device)

    def forward() -> None:
        with torch.no_grad():
            subject.forward(temb, params.weight, params.bias)

    harness = HarnessSubject.for_forward(OPERATOR, Implementation(source=subject.name, has_backward=True,
                                                                  forward=subject.forward), shape)
    return forward, training_step(harness.forward, harness, {"temb": temb, **params.as_inputs()}, [ones])


def _stream(device: torch.device) -> Optional[int]:
    """The current stream at call time (a graph capture runs on a side stream); None off CUDA (tests)."""
    return torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else None


def entry_points(lib, shape: Shape, params: Params, tokens: int, device: torch.device) -> dict[str, Callable[[], None]]:
    """Each C entry point alone on preallocated buffers: where a library's time goes."""
    d, n = shape.dim, shape.out_features
    temb = make_temb(tokens, shape, P.ACCURACY_SEED, device)
    dy = make_upstream((tokens, n), torch.bfloat16, P.ACCURACY_UPSTREAM_SEED, device)
    act = torch.empty(tokens, d, dtype=torch.bfloat16, device=device)
    y = torch.empty(tokens, n, dtype=torch.bfloat16, device=device)
    dtemb = torch.empty(tokens, d, device=device)
    dw = torch.empty(n, d, dtype=torch.bfloat16, device=device)
    db = torch.empty(n, dtype=torch.bfloat16, device=device)
    scratch_bytes = max(lib.dtemb_scratch_bytes(tokens, d, n), lib.gemm_ws_bytes)
    scratch = torch.empty(scratch_bytes, dtype=torch.uint8, device=device)
    index = device.index or 0

    def ptr(t: Optional[torch.Tensor]) -> Optional[int]:
        return None if t is None else t.data_ptr()

    def backward(out_dtemb, out_dw, out_db) -> Callable[[], None]:
        return lambda: lib.backward(ptr(dy), ptr(params.weight), ptr(temb), ptr(act), ptr(out_dtemb), ptr(out_dw),
                                    ptr(out_db), tokens, d, n, ptr(scratch), scratch_bytes, index, _stream(device))

    def forward() -> None:
        lib.forward(ptr(temb), ptr(params.weight), ptr(params.bias), ptr(act), ptr(y), tokens, d, n, ptr(scratch),
                    lib.gemm_ws_bytes, index, _stream(device))

    forward()  # act for the backward entries
    return {"fwd": forward, "d_temb": backward(dtemb, None, None), "dW": backward(None, dw, None),
            "db": backward(None, None, db)}


def measure(config: dict) -> dict:
    device = torch.device("cuda", 0)
    shape = PRESETS[config["shape"]] if config["shape"] in PRESETS else Shape(*config["shape"])
    params = make_params(shape, device)
    subjects = [cublas_subject()] + [library_subject(parse_library(s), device, log=log) for s in config["libraries"]]
    out: dict = {"subjects": {s.name: s.info for s in subjects}, "times": {}, "entries": {}, "errors": {}}
    for tokens in config["sizes"]:
        closures = {}
        for s in subjects:
            try:
                forward, step = forward_and_step(s, params, shape, tokens, device)
                forward()
                step()  # a subject that fails here is recorded and left out of the interleaved timing
                closures[s.name] = (forward, step)
            except Exception as exc:  # noqa: BLE001
                out["errors"][f"{s.name}@{tokens}"] = f"{type(exc).__name__}: {exc}"
                log(f"[error] {s.name}@{tokens}: {out['errors'][f'{s.name}@{tokens}']}")
        fwd = timed_together({n: c[0] for n, c in closures.items()}, device)
        fwd_bwd = timed_together({n: c[1] for n, c in closures.items()}, device)
        for name in closures:
            out["times"].setdefault(name, {})[str(tokens)] = {"fwd": fwd[name], "fwd_bwd": fwd_bwd[name]}
            log(f"[time] T={tokens} {name}: fwd {fwd[name]['us']:.1f} fwd+bwd {fwd_bwd[name]['us']:.1f} µs")
        del closures
        torch.cuda.empty_cache()
        if config.get("entries"):  # every library's entry points at this T, interleaved together
            calls: dict[str, Callable[[], None]] = {}
            for s in (s for s in subjects if s.library is not None):
                try:
                    for part, f in entry_points(s.library, shape, params, tokens, device).items():
                        f()  # one that fails is recorded and left out, as in the timing above
                        calls[f"{s.name}\t{part}"] = f
                except Exception as exc:  # noqa: BLE001
                    out["errors"][f"{s.name}@{tokens}:entries"] = f"{type(exc).__name__}: {exc}"
            for key, fig in timed_together(calls, device).items():
                name, part = key.split("\t")
                out["entries"].setdefault(name, {}).setdefault(str(tokens), {})[part] = fig
            del calls
            torch.cuda.empty_cache()
    if config.get("bits"):
        bundled = [s for s in subjects if s.library is not None]
        out["bits"] = bits.check(bundled, params, shape, device, log=log)
        out["accuracy"] = bits.accuracy(subjects, params, shape, device, config.get("accuracy_sizes", []))
    return out


if __name__ == "__main__":
    sys.exit(child_main(measure, sys.argv[1:]))
