#!/usr/bin/env bash
# One device call that measures the probes replayed from CUDA graphs against eager probes: the GPU tests of the
# replays (tests/gpu/test_graphed_runs_gpu.py), then the same `adaln-bench run` twice, first as it is (runs
# replayed), then with --eager-probes, each with its steps traced and the GPU sampled; `adaln-bench diff` of each
# operator's two reports (eager as OLD) and the time accounting of both runs (run_time.py --trace --util).
# Usage (on the GPU machine, from the repo root): bash tools/device/probe_graphs.sh [run options…]
#   default run options: --mode plain --mode cublaslt_ws1 --op norm_modulate --op gate_residual --op timestep_mlp
#   WHEELS=dir (default .carry/whl): wheels to install into /tmp/site first
#   RUN_TIMEOUT=s (default 200): the limit of each run; TESTS=0: no GPU tests
# Under $OUT: summary.txt, and probe-graphs.tgz with graphs/ and eager/ (reports and run indexes), their logs,
# step traces and utilization samples, diff.<op>.md and diff.<op>.exit per operator, the tests' log.
case "${1:-}" in -h | --help) awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;; esac
set -uo pipefail
source "$(dirname "$0")/setup.sh"
if [ $# -eq 0 ]; then set -- --mode plain --mode cublaslt_ws1 --op norm_modulate --op gate_residual --op timestep_mlp; fi
LIMIT=${RUN_TIMEOUT:-200}
W=$(mktemp -d)
{
if [ "${TESTS:-1}" != 0 ]; then
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_graphed_runs_gpu.py > "$W/gpu-tests.log" 2>&1
  echo "GPU tests: exit $? ($(tail -n 1 "$W/gpu-tests.log"))"
fi
run() {  # run NAME [extra options…]
  local name=$1; shift
  local start=$SECONDS
  python3 tools/device/gpu_util.py "$W/$name.util.csv" "$W/$name.done" > /dev/null 2>&1 &
  ADALN_BENCH_STEP_TRACE="$W/$name.trace.jsonl" timeout "$LIMIT" python3 -m adaln_bench run --device cuda \
    --out "$W/$name" "$@" > "$W/$name.log" 2>&1
  echo "$name: exit $? after $((SECONDS - start)) s wall"
  touch "$W/$name.done"
  python3 tools/device/run_time.py --trace "$W/$name.trace.jsonl" --util "$W/$name.util.csv" "$W/$name"/runs/*.json
}
run graphs --probe-graphs "$@"
run eager --eager-probes "$@"
for eager_report in "$W"/eager/*/*.json; do
  [ "$(basename "$(dirname "$eager_report")")" = runs ] && continue
  op=$(basename "$(dirname "$eager_report")")
  python3 -m adaln_bench diff "$eager_report" "$W/graphs/$op/$(basename "$eager_report")" --markdown \
    > "$W/diff.$op.md" 2>&1
  echo $? > "$W/diff.$op.exit"
  echo "diff $op (eager -> graphs): exit $(cat "$W/diff.$op.exit")"
done
} 2>&1 | tee "$OUT/summary.txt"
tar -czf "$OUT/probe-graphs.tgz" -C "$W" .
