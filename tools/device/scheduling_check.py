"""Compare a side-by-side run with a serial one of the same operators and modes (scheduling.sh).

Usage: python3 tools/device/scheduling_check.py SIDE_DIR SERIAL_DIR [STEP_TRACE]

Each DIR is a run's --out directory (reports under <op>/, the run index under runs/). Prints, per (operator,
mode, candidate), whether the invariance verdict, the full probe counts, the fingerprint and the errors against
FP64 are equal; then both runs' wall times and their run index's time accounting; then, from a step trace
(ADALN_BENCH_STEP_TRACE of the side-by-side run), any latency step that overlapped another step of its GPU.
Exit 0 when every verdict is equal and no latency step overlapped, 1 otherwise, 2 on bad input.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def _index(run: Path) -> dict:
    found = sorted((run / "runs").glob("*.json"))
    if len(found) != 1:
        raise SystemExit(f"scheduling_check: {run}/runs/ holds {len(found)} run indexes, not one")
    return json.loads(found[0].read_text(encoding="utf-8"))


def _reports(run: Path, index: dict) -> dict[str, dict]:
    base = run / "runs"
    return {op: json.loads((base / rel).read_text(encoding="utf-8")) for op, rel in index["reports"].items()}


def _same(a, b, key: str) -> bool:
    return json.dumps(a.get(key), sort_keys=True) == json.dumps(b.get(key), sort_keys=True)


def _error_diff(a: dict, b: dict) -> str:
    """"same", or which errors against FP64 differ ("DIFF: grad sh, grad sc")."""
    differ = set()
    points_a, points_b = a.get("accuracy_latency") or {}, b.get("accuracy_latency") or {}
    for t in set(points_a) | set(points_b):
        pa, pb = points_a.get(t) or {}, points_b.get(t) or {}
        if pa.get("fwd_rel_err") != pb.get("fwd_rel_err"):
            differ.add("fwd")
        grads_a, grads_b = pa.get("grad_rel_err") or {}, pb.get("grad_rel_err") or {}
        differ |= {f"grad {g}" for g in set(grads_a) | set(grads_b) if grads_a.get(g) != grads_b.get(g)}
    return "same" if not differ else "DIFF: " + ", ".join(sorted(differ))


def compare(side: dict[str, dict], serial: dict[str, dict]) -> tuple[list[str], bool]:
    lines, ok = [], True
    lines.append(f"{'operator/mode/candidate':54} {'verdict':>16} probes fingerprint errors")
    for op in sorted(set(side) | set(serial)):
        a_results, b_results = side.get(op, {}).get("results", {}), serial.get(op, {}).get("results", {})
        for mode in sorted(set(a_results) | set(b_results)):
            for name in sorted(set(a_results.get(mode, {})) | set(b_results.get(mode, {}))):
                a, b = a_results.get(mode, {}).get(name, {}), b_results.get(mode, {}).get(name, {})
                va = (a.get("batch_invariance") or {}).get("batch_invariant")
                vb = (b.get("batch_invariance") or {}).get("batch_invariant")
                same_verdict = va == vb and va is not None
                ok &= same_verdict
                lines.append(f"{op + '/' + mode + '/' + name:54} {str(va) + ' / ' + str(vb):>16} "
                             f"{'same' if _same(a, b, 'batch_invariance') else 'DIFF':6} "
                             f"{'same' if _same(a, b, 'fingerprint') else 'DIFF':11} "
                             f"{_error_diff(a, b)}")
    return lines, ok


def accounting(name: str, index: dict) -> list[str]:
    t = index.get("time") or {}
    lines = [f"{name}: wall {index.get('wall_s', 0):.1f} s; GPU-exclusive {t.get('gpu_exclusive_s', 0):.1f} s; "
             f"waited for the lease {t.get('waited_s', 0):.1f} s"]
    schedule = t.get("schedule") or {}
    lines.append(f"  schedule: {schedule.get('why')}")
    phases = ", ".join(f"{k} {v:.1f}" for k, v in (t.get("phases_s") or {}).items())
    lines.append(f"  phases (process-seconds): {phases}")
    for mode, m in (t.get("modes") or {}).items():
        peak = m.get("peak_memory_bytes")
        peak_text = f"peak {peak / 2**30:.2f} GiB; " if peak else ""
        lines.append(f"  {mode}: {m['children']} child(ren), {m['child_s']:.1f} s; exclusive "
                     f"{m['gpu_exclusive_s']:.1f} s; {peak_text}"
                     + ", ".join(f"{k} {v:.1f}" for k, v in m["phases_s"].items()))
    return lines


def overlaps(trace: Path) -> list[str]:
    from adaln_bench.harness.measurement.step_clock import overlapping_exclusive

    steps = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines() if line.strip()]
    found = overlapping_exclusive(steps)
    shared = [s for s in steps if not s["exclusive"]]
    side_by_side = sum(1 for i, a in enumerate(shared) for b in shared[i + 1:]
                       if a["pid"] != b["pid"] and a["start"] < b["end"] and b["start"] < a["end"])
    lines = [f"step trace: {len(steps)} steps, {sum(s['exclusive'] for s in steps)} exclusive; "
             f"{side_by_side} pairs of shared steps of two processes overlapped; "
             f"{len(found)} latency step(s) overlapped another step"]
    lines += [f"  OVERLAP: {a['phase']} of {a['pid']} with {b['phase']} of {b['pid']}" for a, b in found[:10]]
    return lines


def main(argv: list[str]) -> int:
    if len(argv) in (2, 3, 4) and argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    if len(argv) not in (3, 4):
        print("usage: scheduling_check.py SIDE_DIR SERIAL_DIR [STEP_TRACE]", file=sys.stderr)
        return 2
    side_dir, serial_dir = Path(argv[1]), Path(argv[2])
    side_index, serial_index = _index(side_dir), _index(serial_dir)
    lines, ok = compare(_reports(side_dir, side_index), _reports(serial_dir, serial_index))
    lines += accounting("side by side", side_index) + accounting("serial", serial_index)
    if len(argv) == 4:
        trace_lines = overlaps(Path(argv[3]))
        ok &= trace_lines[0].endswith(" 0 latency step(s) overlapped another step")
        lines += trace_lines
    print("\n".join(lines))
    print("verdicts equal, latency alone" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
