#!/usr/bin/env bash
# One device call that shows side-by-side scheduling changes no answer: the same `adaln-bench run` twice, first
# side by side (the default; every step traced), then with --serial; `adaln-bench diff` of each operator's two
# reports, and scheduling_check.py (verdicts, the time accounting of both run indexes, latency overlaps).
# Usage (on the GPU machine, from the repo root): bash tools/device/scheduling.sh [run options…]
#   default run options: --op norm_modulate --mode plain --mode cublaslt_ws1 --candidate diffusers
#   WHEELS=dir (default .carry/whl): wheels to install into /tmp/site first (none: skip)
#   RUN_TIMEOUT=s (default 200): the limit of each run
#   SIDE_ARGS="--mps": options of the side-by-side run only (there: through the Multi-Process Service)
# Under $OUT: check.txt, and scheduling.tgz with side/ and serial/ (reports and run indexes),
# side.trace.jsonl, side.log, serial.log, diff.<op>.md and diff.<op>.exit per operator, check.txt.
case "${1:-}" in -h | --help) awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;; esac
set -uo pipefail
source "$(dirname "$0")/setup.sh"
if [ $# -eq 0 ]; then set -- --op norm_modulate --mode plain --mode cublaslt_ws1 --candidate diffusers; fi
LIMIT=${RUN_TIMEOUT:-200}
W=$(mktemp -d)
run() {  # run NAME [extra options…]
  local name=$1; shift
  local start=$SECONDS
  timeout "$LIMIT" python3 -m adaln_bench run --device cuda --out "$W/$name" "$@" > "$W/$name.log" 2>&1
  echo "$name: exit $? after $((SECONDS - start)) s wall"
  grep -E '^adaln-bench: (schedule|Multi-Process Service)' "$W/$name.log"
}
read -r -a side_args <<< "${SIDE_ARGS:-}"
ADALN_BENCH_STEP_TRACE="$W/side.trace.jsonl" run side "${side_args[@]}" "$@"
run serial --serial "$@"
for serial_report in "$W"/serial/*/*.json; do
  [ "$(basename "$(dirname "$serial_report")")" = runs ] && continue
  op=$(basename "$(dirname "$serial_report")")
  python3 -m adaln_bench diff "$W/side/$op/$(basename "$serial_report")" "$serial_report" --markdown \
    > "$W/diff.$op.md" 2>&1
  echo $? > "$W/diff.$op.exit"
  echo "diff $op (side by side -> serial): exit $(cat "$W/diff.$op.exit")"
done
python3 tools/device/scheduling_check.py "$W/side" "$W/serial" "$W/side.trace.jsonl" > "$W/check.txt" 2>&1
echo "check exit $?"
cat "$W/check.txt"; cp "$W/check.txt" "$OUT/check.txt"
tar -czf "$OUT/scheduling.tgz" -C "$W" .
