#!/usr/bin/env bash
# One device call for the gathered operators (issue 32): the carried wheels and the prebuilt gathered library
# (device_setup.sh: .carry/whl, .carry/kernel-cache), then `adaln-bench kernel-bench --op` for the four gathered
# operators against their stock paths (3 timed processes and one that checks bits and errors, S = 4097, 32768,
# 131072), output under $OUT, logs packed into $OUT/logs.tgz (the device tool brings back at most 8 files).
# Usage (on the GPU machine, from the repo root): bash scripts/device_gathered_bench.sh [kernel-bench options…]
#   extra options are added to the default ones (e.g. --name kb_gathered, --processes 5, --sizes 4097,32768)
#   CHECK=1: scripts/gathered_check.py first (smoke at small H, accuracy, bitwise, fresh process, the two norm
#     backwards side by side; CHECK_BUDGET seconds, default 90; GATHERED_CHECK_SKIP=timing,variants leaves those
#     per-size stages out, kernel-bench times the operators anyway); kernel-bench then runs the one-pass norm
#     backward (ADALN_BENCH_GATHERED_NORM_BACKWARD=2) when the smoke stage found it FP64-close at every small
#     size, else the two-pass one (=1). Without CHECK, whatever the environment says (the library's default: one).
#   PROBE=1: scripts/copy_probe.py first (the same bytes copied by memcpy and by a kernel, alone and interleaved,
#     one buffer pair and rotated: why a copy's rate depends on how it is timed; docs/kernels.md)
#   RING8=1: first a kernel-bench of norm_modulate and final_adaln_out with the one-pass kernel's 8-row ring
#     (ADALN_BENCH_GATHERED_ONEPASS_RING=8, the f51093c kernel; no bits process) into $OUT/ring8.tgz, to set
#     beside the main run's default ring (10 rows where they fit): same process count, sizes and rounds
#   GPU_TESTS=1: pytest tests/gpu/test_gathered_gpu.py afterwards (GPU_TESTS_FILTER=expr: only what -k expr selects;
#     GPU_TESTS_TIMEOUT seconds, default 200)
#   KB_TIMEOUT: seconds for the whole kernel-bench (default 500); ADALN_BENCH_COMMIT / ADALN_BENCH_DIRTY: the
#     commit to record (the copy there may have no usable .git)
set -uo pipefail
source "$(dirname "$0")/device_setup.sh"
start=$(date +%s)
if [ -n "${PROBE:-}" ]; then
  timeout 120 python3 scripts/copy_probe.py --json "$OUT/copy_probe.json" > "$OUT/copy_probe.txt" 2>&1
  echo "copy probe exit $? after $(( $(date +%s) - start )) s"; grep -v '^\[' "$OUT/copy_probe.txt"
fi
if [ -n "${CHECK:-}" ]; then
  timeout $(( ${CHECK_BUDGET:-90} + 30 )) python3 scripts/gathered_check.py --out "$OUT/check" --budget "${CHECK_BUDGET:-90}" \
    > "$OUT/check.log" 2>&1
  echo "gathered_check exit $? after $(( $(date +%s) - start )) s"
  nb=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1])).get('norm_backward', ''))" "$OUT/check/meta.json" 2>/dev/null)
  if [ "$nb" = "2" ]; then
    export ADALN_BENCH_GATHERED_NORM_BACKWARD=2
    echo "the smoke check passed the one-pass norm backward: kernel-bench runs it"
  else
    export ADALN_BENCH_GATHERED_NORM_BACKWARD=1
    echo "the smoke check refused the one-pass norm backward (or did not run): kernel-bench runs the two-pass one"
  fi
fi
if [ -n "${RING8:-}" ]; then
  r8_start=$(date +%s)
  mkdir -p "$OUT/ring8"
  ADALN_BENCH_GATHERED_ONEPASS_RING=8 timeout "${RING8_TIMEOUT:-200}" python3 -m adaln_bench kernel-bench \
    --op norm_modulate --op final_adaln_out --processes 3 --no-bits --out "$OUT/ring8" "$@" \
    > "$OUT/ring8/kernel_bench.stdout" 2> "$OUT/ring8/kernel_bench.stderr"
  echo "ring-8 kernel-bench exit $? after $(( $(date +%s) - r8_start )) s"
  sed -n '/^| operator | candidate/,/^$/p' "$OUT"/ring8/*.md
  tar czf "$OUT/ring8.tgz" -C "$OUT" --remove-files ring8
fi
kb_start=$(date +%s)
timeout "${KB_TIMEOUT:-500}" python3 -m adaln_bench kernel-bench --op adaln_row_gather --op norm_modulate \
  --op gate_residual --op final_adaln_out --processes 3 --out "$OUT" "$@" \
  > "$OUT/kernel_bench.stdout" 2> "$OUT/kernel_bench.stderr"
rc=$?
echo "kernel-bench exit $rc after $(( $(date +%s) - kb_start )) s"
tail -n 4 "$OUT/kernel_bench.stderr"
if [ -n "${GPU_TESTS:-}" ]; then
  filter=(); [ -n "${GPU_TESTS_FILTER:-}" ] && filter=(-k "$GPU_TESTS_FILTER")
  timeout "${GPU_TESTS_TIMEOUT:-200}" python3 -m pytest -q -m gpu "${filter[@]}" tests/gpu/test_gathered_gpu.py \
    > "$OUT/gpu-tests.log" 2>&1
  echo "gpu tests exit $?"; tail -n 5 "$OUT/gpu-tests.log"
fi
[ -f "$OUT/check/meta.json" ] && python3 scripts/gathered_check.py --out "$OUT/check" --table-only
# the short table last: the summary of the kernel-bench document
sed -n '/^| operator | candidate/,/^$/p' "$OUT"/*.md
( cd "$OUT" && find . -mindepth 1 -maxdepth 1 ! -name '*.json' ! -name '*.md' ! -name logs.tgz ! -name ring8.tgz -printf '%f\n' > /tmp/kb_logs \
  && tar czf logs.tgz -T /tmp/kb_logs && xargs rm -rf < /tmp/kb_logs )
exit $rc
