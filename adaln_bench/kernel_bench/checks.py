"""What `kernel-bench`'s checking process (after the timed ones) does for each subject, through the harness: its
bits across the sizes, and its errors against FP64. A quick check beside the full probes of `adaln-bench run`,
which a candidate must pass before it ships.

Bits across sizes: the harness's `probe_prefixes` (one seeded batch of the largest size run whole; its prefixes
at every other size and three rows alone must give its output and row-gradient rows bit for bit; at every size
the parameter (table) gradients of two identical runs must be equal). Errors: the harness's measure against FP64
(inputs of seed 11) at every size, for the stock path and each candidate on the same inputs.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from adaln_bench.harness.measurement import plan as P
from adaln_bench.harness.measurement.accuracy import measure_accuracy
from adaln_bench.harness.measurement.probes import probe_prefixes
from adaln_bench.harness.measurement.subject import Subject
from adaln_bench.harness.measurement.workload import Workload
from adaln_bench.shape import Shape

SEED = P.FULL.seeds[0]


def check_subject(subject: Subject, params: dict, shape: Shape, device: torch.device, sizes: Sequence[int]) -> dict:
    """The harness's prefix probe (`probes.probe_prefixes`) on the subject's seeded runs."""
    return probe_prefixes(Workload(subject, params, shape, device), SEED, sizes)


def check(subjects: dict[str, Subject], params: dict, shape: Shape, device: torch.device, sizes: Sequence[int],
          log: Callable[..., None] = lambda *a: None) -> dict:
    result: dict = {"seed": SEED, "sizes": sorted(set(sizes)), "subjects": {}}
    for name, subject in subjects.items():
        try:
            result["subjects"][name] = check_subject(subject, params, shape, device, sizes)
        except Exception as exc:  # noqa: BLE001 - recorded; the other subjects are still checked
            result["subjects"][name] = {"error": f"{type(exc).__name__}: {exc}"}
        log(f"[bits] {name}: {result['subjects'][name]}")
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return result


def accuracy(subjects: dict[str, Subject], params: dict, shape: Shape, device: torch.device,
             sizes: Sequence[int]) -> dict:
    """{subject: {S: {"fwd": error, "grads": {name: error}}}} against FP64 (the harness's measure)."""
    out: dict = {}
    for name, subject in subjects.items():
        for s in sizes:
            try:
                err = measure_accuracy(subject, params, shape, device, s)
                entry = {"fwd": err.fwd, "grads": err.grads.errors() if err.grads is not None else {}}
            except Exception as exc:  # noqa: BLE001
                entry = {"error": f"{type(exc).__name__}: {exc}"}
            out.setdefault(name, {})[str(s)] = entry
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return out

