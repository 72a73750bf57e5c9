#!/usr/bin/env bash
# One device call for the bundled timestep MLP (issue 43): the carried wheels and the prebuilt library (set up by
# tools/device/setup.sh: .carry/whl, .carry/kernel-cache), then the steps the environment asks for, each with its
# log under $OUT (the device tool brings back at most 8 files: the logs are packed into $OUT/logs.tgz at the end).
# Usage (on the GPU machine, from the repo root): CHECK=1 TESTS=1 bash tools/device/timestep_mlp.sh
#   CHECK=1   tools/device/timestep_mlp_check.py: errors against FP64 beside the stock path's, bitwise rows across
#             T and tile configurations, repeatable weight gradients, paired device times (CHECK_ARGS: its options;
#             CHECK_ARGS="--fusion 1,3,4 --fusion-only": only what fusing timestep_sinusoid into the MLP could save)
#   CHECK_ALT=DEF1,DEF2  the same check on the library built with those defines (an experiment; prebuilt and carried)
#   TESTS=1   pytest tests/gpu/test_timestep_mlp_gpu.py (TESTS_TIMEOUT seconds, default 240)
#   REPORT=1  adaln-bench run --op timestep_mlp --mode plain: the full report, $OUT/timestep_mlp.<gpu>.<commit>.h3.plain.json
#             (ADALN_BENCH_COMMIT: the commit to record; the copy there may have no usable .git)
#   KB=1      adaln-bench kernel-bench --op timestep_mlp, 3 timed processes and one that checks bits, as
#             $OUT/kernel_bench.timestep_mlp.<commit>.{json,md} (KB_ARGS: more options; KB_TIMEOUT seconds, default 300)
case "${1:-}" in -h | --help) awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;; esac
set -uo pipefail
source "$(dirname "$0")/setup.sh"
mkdir -p "$OUT/logs"
rc=0
step() {  # name, timeout, command...: runs it, logs to $OUT/logs/name.log, prints its exit and the log's tail
  local name=$1 limit=$2 start
  shift 2
  start=$(date +%s)
  timeout "$limit" "$@" > "$OUT/logs/$name.log" 2>&1
  local r=$?
  echo "== $name exit $r after $(( $(date +%s) - start )) s"
  [ $r -ne 0 ] && rc=$r
  return $r
}
if [ -n "${CHECK:-}" ]; then
  step check 500 python3 tools/device/timestep_mlp_check.py --json "$OUT/check.json" ${CHECK_ARGS:-}
  grep '^fusion' "$OUT/logs/check.log"
  sed -n '/^    T out/,$p' "$OUT/logs/check.log" | grep -v " True$"
fi
if [ -n "${CHECK_ALT:-}" ]; then  # the same check on an experiment build (its defines, comma-separated, carried prebuilt)
  step check_alt 500 python3 tools/device/timestep_mlp_check.py --json "$OUT/check_alt.json" --defines "$CHECK_ALT" \
    ${CHECK_ARGS:-}
  sed -n '/^    T out/,$p' "$OUT/logs/check_alt.log" | grep -v " True$"
fi
if [ -n "${TESTS:-}" ]; then
  step tests "${TESTS_TIMEOUT:-240}" python3 -m pytest -q -p no:cacheprovider tests/gpu/test_timestep_mlp_gpu.py
  tail -n 8 "$OUT/logs/tests.log"
fi
if [ -n "${REPORT:-}" ]; then
  gpu=$(python3 -c "import torch; from adaln_bench.reports.current import gpu_slug; print(gpu_slug(torch.cuda.get_device_name(0)))")
  name="timestep_mlp.${gpu:-unknown}.${ADALN_BENCH_COMMIT:-unknown}.h3.plain"
  step report 500 python3 -m adaln_bench run --device cuda --op timestep_mlp --mode plain --out "$OUT/$name.json"
  grep -v '^\[' "$OUT/logs/report.log" | tail -c 2000
fi
if [ -n "${KB:-}" ]; then  # per-process logs stay in logs.tgz; the document (json + md) comes back beside it
  mkdir -p "$OUT/logs/kb"
  step kernel_bench "${KB_TIMEOUT:-300}" python3 -m adaln_bench kernel-bench --op timestep_mlp --processes 3 \
    --name "kernel_bench.timestep_mlp.${ADALN_BENCH_COMMIT:-nocommit}" --out "$OUT/logs/kb" ${KB_ARGS:-}
  cp "$OUT"/logs/kb/kernel_bench.timestep_mlp.*.json "$OUT"/logs/kb/kernel_bench.timestep_mlp.*.md "$OUT"/ 2>/dev/null
  sed -n '/^| operator | candidate/,/^$/p' "$OUT"/logs/kb/kernel_bench.timestep_mlp.*.md
  grep -E "^Every error|^Targets:|FAILED" "$OUT"/logs/kb/kernel_bench.timestep_mlp.*.md
fi
tar czf "$OUT/logs.tgz" -C "$OUT" --remove-files logs
exit $rc
