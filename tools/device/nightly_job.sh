#!/usr/bin/env bash
# The nightly's detached job, started by `nightly.sh start` from a copy of the tree ($NIGHT/tree): SGLang's
# JIT kernel compiled once, the nightly itself (`adaln-bench run --device cuda --repeat 3`, every operator and
# mode, stopped with SIGTERM DRAWS_S seconds (default 60) before CAP), then the B200-draws accuracy reports (plain,
# --accuracy-only --draw-geometry b200) in what is left of CAP seconds since the job started: the nightly is
# the one that must not be cut short. Writes under $NIGHT/out and touches $NIGHT/job.done at the end.
# SKIP_DRAWS=1 leaves the B200-draws run out. MPS=1 runs both with --mps on CUDA (not by default: on an H100 it
# shortened nothing and raised device times, results/h100/evidence/mps/022885c/); tools/device/gpu_util.py
# samples the GPU's utilization into out/gpu-util.csv beside them. RUN_ARGS replaces the device options of both
# runs (a CPU check of this script: RUN_ARGS="--device cpu --quick").
case "${1:-}" in -h | --help) awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;; esac
set -uo pipefail
export PYTHONUNBUFFERED=1
: "${NIGHT:?NIGHT: the folder nightly.sh staged}" "${CAP:?CAP: the most seconds the job may run}"
t0=$(date +%s)
stamp() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - t0 )) s] $*"; }
out=$NIGHT/out
mkdir -p "$out"
rm -f "$NIGHT/job.done"
export PYTHONPATH="$NIGHT/site:$PWD"
if [ -s "$NIGHT/megatron-exports.sh" ]; then source "$NIGHT/megatron-exports.sh"; fi
export ADALN_BENCH_KERNEL_CACHE=$NIGHT/kernel-cache
if [ -d "$NIGHT/site/cutlass_library/source/include" ]; then
  export ADALN_BENCH_CUTLASS_INCLUDE=$NIGHT/site/cutlass_library/source/include
fi
export SGLANG_JIT_CACHE_DIR=$NIGHT/sglang-jit
read -r -a device <<< "${RUN_ARGS:---device cuda}"
# CUDA's Multi-Process Service for the run's processes only where asked for (`run --mps`, MPS=1).
case " ${device[*]} " in *" cuda "*) [ "${MPS:-0}" = 1 ] && device+=(--mps) ;; esac
megatron=(); [ -n "${ADALN_BENCH_MEGATRON_LM:-}" ] && megatron=(--megatron-src "$ADALN_BENCH_MEGATRON_LM")
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader \
  > "$out/nvidia-smi.txt" 2>&1
python3 -m adaln_bench env > "$out/env.txt" 2>&1

# The GPU's utilization beside the whole job, on the step trace's clock (run_time.py --util), until job.done.
python3 tools/device/gpu_util.py "$out/gpu-util.csv" "$NIGHT/job.done" > /dev/null 2>&1 &
sampler=$!

# SGLang's JIT kernel is compiled once, into its cache, before any process of the run may want it at once:
# beside the nightly's start, since the sglang mode's children come after plain's and the recipe's (its one GPU
# call is done in seconds, long before the first latency step).
(timeout 150 python3 tools/device/sglang_kernels_check.py kernels > "$out/sglang-jit.log" 2>&1; \
  echo "exit $?" >> "$out/sglang-jit.log") &
jit=$!

# The nightly first, with all but DRAWS_S seconds of the cap: what is left after it goes to the draws run.
left=$(( CAP - ($(date +%s) - t0) - ${DRAWS_S:-60} ))
[ "$left" -lt 60 ] && left=60
stamp "phase nightly: --repeat 3, every operator and mode, at most $left s"
ADALN_BENCH_STEP_TRACE=$out/steps.jsonl timeout --signal=TERM --kill-after=60 "$left" \
  python3 -m adaln_bench run "${device[@]}" --repeat 3 "${megatron[@]}" --out "$out/night" > "$out/night.log" 2>&1
night_rc=$?
stamp "nightly exit $night_rc"
wait "$jit"; stamp "SGLang's JIT kernels: $(tail -n 1 "$out/sglang-jit.log")"

draws_rc=skipped
if [ -z "${SKIP_DRAWS:-}" ]; then
  left=$(( CAP - ($(date +%s) - t0) ))
  [ "$left" -gt 300 ] && left=300
  [ "$left" -lt 30 ] && left=30
  stamp "phase draws: plain, accuracy only, B200 draws, at most $left s"
  timeout --signal=TERM "$left" python3 -m adaln_bench run "${device[@]}" --mode plain --accuracy-only \
    --draw-geometry b200 --out "$out/draws" > "$out/draws.log" 2>&1
  draws_rc=$?
  stamp "draws exit $draws_rc"
fi
kill "$sampler" 2> /dev/null
echo "draws $draws_rc nightly $night_rc" > "$NIGHT/job.done"
stamp "done"
