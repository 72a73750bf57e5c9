"""Where a run's time went, from its run index: wall, phases, GPU-exclusive seconds, waits, and per mode its
children and the most GPU memory one of them reserved. With `--trace STEPS.jsonl` (the run's
ADALN_BENCH_STEP_TRACE), the trace's span split into seconds some exclusive step held the GPU, seconds only
shared steps ran (and how many at once on average), and seconds no step ran.
`python3 tools/device/run_time.py [--trace STEPS.jsonl[.xz] [--util GPU_UTIL.csv[.xz]]] RUN_INDEX.json ...`
(GPU_UTIL.csv: tools/device/gpu_util.py's samples: the GPU's mean utilization while each kind of step ran)"""
from __future__ import annotations

import json
import lzma
import sys

GIB = 1 << 30


def show(path: str) -> None:
    index = json.load(open(path, encoding="utf-8"))
    t = index.get("time") or {}
    print(f"{path}: wall {index.get('wall_s')} s, incomplete {index.get('incomplete')}")
    schedule = t.get("schedule") or {}
    if schedule:
        print(f"  schedule: {schedule.get('why')}")
        mps = schedule.get("mps")
        if mps:
            print(f"  Multi-Process Service: {'on' if mps.get('on') else 'off'}: {mps.get('why')}")
    phases = ", ".join(f"{k} {v:.0f}" for k, v in (t.get("phases_s") or {}).items())
    print(f"  process-seconds: {phases}; GPU-exclusive {t.get('gpu_exclusive_s')} s, waited {t.get('waited_s')} s")
    for mode, m in (t.get("modes") or {}).items():
        peak = (m.get("peak_memory_bytes") or 0) / GIB
        print(f"  {mode:22s} children {m.get('children')}, {m.get('child_s')} s, exclusive "
              f"{m.get('gpu_exclusive_s')} s, peak {peak:.1f} GiB")
        by_op = m.get("peak_memory_by_op") or {}
        if by_op:
            print("    peak per operator: " + ", ".join(f"{op} {b / GIB:.1f} GiB" for op, b in by_op.items()))
        left = {op: b for op, b in (m.get("residual_memory_by_op") or {}).items() if b >= GIB // 4}
        if left:  # what a process kept after an operator, its cache emptied: memory the ledger counted as free
            print("    still reserved after: " + ", ".join(f"{op} {b / GIB:.1f} GiB" for op, b in left.items()))
    print(f"  modes: {', '.join(index.get('modes') or [])}; reports: {len(index.get('reports') or {})}")


def _events(steps: list[dict]) -> list[tuple[float, int, bool]]:
    """Each step's start (+1) and end (-1) with whether it was exclusive, in time order, ends before starts."""
    return sorted([(s["start"], 1, s["exclusive"]) for s in steps] + [(s["end"], -1, s["exclusive"]) for s in steps],
                  key=lambda e: (e[0], e[1]))


def timeline(steps: list[dict]) -> dict:
    """The trace's span (first start to last end) as exclusive, shared-only and idle seconds; `shared_overlap`: how
    many shared steps ran at once on average while no exclusive one did."""
    events = _events(steps)
    out = {"span_s": 0.0, "exclusive_s": 0.0, "shared_only_s": 0.0, "idle_s": 0.0}
    running = {True: 0, False: 0}
    shared_process_s = 0.0
    last = events[0][0] if events else 0.0
    for when, change, exclusive in events:
        gap = when - last
        if running[True]:
            out["exclusive_s"] += gap
        elif running[False]:
            out["shared_only_s"] += gap
            shared_process_s += gap * running[False]
        else:
            out["idle_s"] += gap
        running[exclusive] += change
        last = when
    out["span_s"] = (events[-1][0] - events[0][0]) if events else 0.0
    out["shared_overlap"] = shared_process_s / out["shared_only_s"] if out["shared_only_s"] else None
    return out


def kinds_at(steps: list[dict], times: list[float]) -> list[str]:
    """What ran at each time (sorted): "exclusive", "shared" (only shared steps) or "idle" (none, or outside the
    trace)."""
    events = _events(steps)
    running = {True: 0, False: 0}
    out, i = [], 0
    for t in times:
        while i < len(events) and events[i][0] <= t:
            running[events[i][2]] += events[i][1]
            i += 1
        out.append("exclusive" if running[True] else "shared" if running[False] else "idle")
    return out


def utilization(steps: list[dict], samples: list[tuple[float, float]]) -> dict:
    """The GPU's mean utilization (percent) and sample count while exclusive steps, only shared steps, or no
    step ran; `samples` are (monotonic seconds, percent)."""
    samples = sorted(samples)
    sums: dict[str, list[float]] = {}
    for kind, (_, pct) in zip(kinds_at(steps, [t for t, _ in samples]), samples):
        sums.setdefault(kind, []).append(pct)
    return {kind: {"mean_pct": sum(v) / len(v), "samples": len(v)} for kind, v in sums.items()}


def read_util(path: str, gpu: int | str = 0, column: int = 2) -> list[tuple[float, float]]:
    """gpu_util.py's samples of one GPU, or of the host (`gpu="host"`: column 2 the CPU's busy percent, 3 the
    runnable threads)."""
    out = []
    with _open_text(path) as f:
        for line in f:
            fields = line.strip().split(",")
            if len(fields) == 4 and fields[1] == str(gpu):
                out.append((float(fields[0]), float(fields[column])))
    return out


def _open_text(path: str):
    opener = lzma.open if path.endswith(".xz") else open  # a committed trace or sample file is kept compressed
    return opener(path, "rt", encoding="utf-8")


def read_trace(path: str) -> list[dict]:
    with _open_text(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def show_trace(path: str) -> None:
    steps = read_trace(path)
    t = timeline(steps)
    overlap = f"{t['shared_overlap']:.1f}" if t["shared_overlap"] else "-"
    print(f"{path}: {len(steps)} steps over {t['span_s']:.1f} s: exclusive {t['exclusive_s']:.1f} s, shared only "
          f"{t['shared_only_s']:.1f} s ({overlap} steps at once on average), idle {t['idle_s']:.1f} s")


def show_util(trace: str, path: str) -> None:
    steps = read_trace(trace)
    by_kind = utilization(steps, read_util(path))
    parts = [f"{kind} {v['mean_pct']:.0f} % ({v['samples']} samples)" for kind, v in sorted(by_kind.items())]
    print(f"{path}: the GPU's mean utilization while " + ", ".join(parts))
    busy, running = utilization(steps, read_util(path, "host")), utilization(steps, read_util(path, "host", 3))
    if busy:  # files written before the host's lines have none
        parts = [f"{kind} {v['mean_pct']:.0f} % busy, {running[kind]['mean_pct']:.1f} threads runnable"
                 for kind, v in sorted(busy.items())]
        print(f"{path}: the host's CPUs while " + "; ".join(parts))


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    util = None
    if "--util" in argv and argv.index("--util") + 1 < len(argv):
        i = argv.index("--util")
        util, argv = argv[i + 1], argv[:i] + argv[i + 2:]
    if argv and argv[0] == "--trace" and len(argv) >= 2:
        try:
            show_trace(argv[1])
            if util:
                show_util(argv[1], util)
        except (OSError, ValueError, KeyError) as exc:
            print(f"{argv[1]}: {exc}", file=sys.stderr)
        argv = argv[2:]
    for path in argv:
        try:
            show(path)
        except (OSError, ValueError) as exc:
            print(f"{path}: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
