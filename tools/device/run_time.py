"""Where a run's time went, from its run index: wall, phases, GPU-exclusive seconds, waits, and per mode its
children and the most GPU memory one of them reserved. `python3 tools/device/run_time.py RUN_INDEX.json ...`"""
from __future__ import annotations

import json
import sys

GIB = 1 << 30


def show(path: str) -> None:
    index = json.load(open(path, encoding="utf-8"))
    t = index.get("time") or {}
    print(f"{path}: wall {index.get('wall_s')} s, incomplete {index.get('incomplete')}")
    schedule = t.get("schedule") or {}
    if schedule:
        print(f"  schedule: {schedule.get('why')}")
    phases = ", ".join(f"{k} {v:.0f}" for k, v in (t.get("phases_s") or {}).items())
    print(f"  process-seconds: {phases}; GPU-exclusive {t.get('gpu_exclusive_s')} s, waited {t.get('waited_s')} s")
    for mode, m in (t.get("modes") or {}).items():
        peak = (m.get("peak_memory_bytes") or 0) / GIB
        print(f"  {mode:22s} children {m.get('children')}, {m.get('child_s')} s, exclusive "
              f"{m.get('gpu_exclusive_s')} s, peak {peak:.1f} GiB")
    print(f"  modes: {', '.join(index.get('modes') or [])}; reports: {len(index.get('reports') or {})}")


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    for path in argv:
        try:
            show(path)
        except (OSError, ValueError) as exc:
            print(f"{path}: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
