#!/usr/bin/env bash
# One device call: Nsight Compute on the bundled kernel's entry points (tools/device/profile_entries.py), one CSV
# row per kernel with its duration, DRAM and L2 traffic and throughput against peak, under $OUT.
# Usage (on the GPU machine, from the repo root): bash tools/device/profile.sh [profile_entries.py options…]
#   WHEELS=dir (default .carry/whl); .carry/kernel-cache as for kernel_bench.sh
case "${1:-}" in -h | --help) awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;; esac
set -uo pipefail
source "$(dirname "$0")/setup.sh"
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum
metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__cluster_dim_x,launch__cluster_dim_y
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active,launch__occupancy_limit_registers,launch__registers_per_thread
# --clock-control none: the clocks the benchmarks run at, not ncu's locked base clock.
ncu --clock-control none --profile-from-start off --print-units base --metrics "$metrics" --csv \
  python3 tools/device/profile_entries.py "$@" > "$OUT/profile.csv" 2> "$OUT/profile.stderr"
echo "ncu exit $?"
tail -n 5 "$OUT/profile.stderr"
python3 - "$OUT/profile.csv" <<'EOF'
import csv, sys
from collections import defaultdict
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
print(''.join(l for l in open(sys.argv[1]) if l.startswith('profiled')), end='')
table = defaultdict(dict)
for r in csv.DictReader(rows):
    key = (r["ID"], r["Kernel Name"][:60])
    table[key][r["Metric Name"]] = r["Metric Value"]
for (i, name), m in table.items():
    def g(k):
        return float(m.get(k, "nan").replace(",", ""))
    print(f"{i:>3} {name:60s} {g('gpu__time_duration.sum')/1e3:8.1f} us  rd {g('dram__bytes_read.sum')/1e6:7.1f} MB"
          f"  wr {g('dram__bytes_write.sum')/1e6:7.1f} MB  L2 {g('lts__t_bytes.sum')/1e6:7.1f} MB"
          f"  dram% {g('dram__throughput.avg.pct_of_peak_sustained_elapsed'):5.1f}"
          f"  L2% {g('lts__throughput.avg.pct_of_peak_sustained_elapsed'):5.1f}"
          f"  grid {m.get('launch__grid_size','?')} cl {m.get('launch__cluster_dim_x','?')}x{m.get('launch__cluster_dim_y','?')}")
EOF
