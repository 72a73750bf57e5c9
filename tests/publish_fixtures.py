"""Small report histories for the publish tests, made from a committed report with its timings redrawn.

`history()` writes six reports of one GPU: commits c0 … c5, a day apart. From c2 on the clock is 10 %
slower (every absolute device time, candidate's and reference's, up 10 %: the paired ratio unchanged);
from c4 on the bundled kernel is 30 % slower than the reference beside it (a real step). The plain mode's
`diffusers[plain]` is not batch-invariant (the committed report's counts), `bundled` is, and vLLM's mode
is unavailable.
"""
from __future__ import annotations

import copy
import json
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE = next((ROOT / "results").rglob("adaln_projection.h200.bd79cc3.json"))
SAMPLES = 60
DRIFT_AT, STEP_AT = 2, 4
CLOCK_DRIFT, STEP = 1.10, 1.30


def base() -> dict:
    return json.loads(BASE.read_text(encoding="utf-8"))


def _median(values: list[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def retime(dt: dict, ratio: float, clock: float, rng: random.Random) -> None:
    """Fresh samples: the reference's at its own median times `clock`, the candidate's paired with them at
    `ratio` (a little noise of their own on both)."""
    ref = dt["reference"]
    for med, samples, ratio_key in (("fwd_us", "fwd_samples", "fwd_ratio"),
                                    ("fwd_bwd_us", "fwd_bwd_samples", "fwd_bwd_ratio")):
        base_us = ref[med]
        r = [base_us * clock * (1 + rng.gauss(0, 0.004)) for _ in range(SAMPLES)]
        c = [x * ratio * (1 + rng.gauss(0, 0.002)) for x in r]
        ref[med], ref[samples] = round(_median(r), 3), [round(x, 3) for x in r]
        dt[med], dt[samples] = round(_median(c), 3), [round(x, 3) for x in c]
        ref[ratio_key] = round(_median([a / b for a, b in zip(dt[samples], ref[samples])]), 4)
    for key in ("fwd_process_medians", "fwd_bwd_process_medians"):
        dt.pop(key, None)
    dt["processes"] = 1


def make(data: dict, commit: str, day: int, clock: float, bundled_ratio: float, seed: int) -> dict:
    report = copy.deepcopy(data)
    rng = random.Random(seed)
    report["tool"]["commit"] = commit
    report["started_at"] = f"2026-12-{day:02d}T02:23:00+00:00"
    for name, result in report["results"]["plain"].items():
        for point in result["accuracy_latency"].values():
            dt = point.get("device_time")
            if dt and dt.get("reference"):
                ratio = bundled_ratio if name == "bundled" else 1.0
                retime(dt, ratio, clock, rng)
    report["results"]["vllm"] = {"diffusers[vllm]": {"unavailable": "ModuleNotFoundError: No module named 'vllm'",
                                                     "status": "unavailable"}}
    return report


def history(folder: Path, n: int = 6) -> list[Path]:
    data = base()
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        clock = CLOCK_DRIFT if i >= DRIFT_AT else 1.0
        ratio = 0.94 * (STEP if i >= STEP_AT else 1.0)
        report = make(data, f"c{i}" + "0" * 39, day=i + 1, clock=clock, bundled_ratio=ratio, seed=i)
        path = folder / f"adaln_projection.h200.c{i}.json"
        path.write_text(json.dumps(report), encoding="utf-8")
        paths.append(path)
    return paths
