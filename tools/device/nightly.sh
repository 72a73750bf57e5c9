#!/usr/bin/env bash
# The whole nightly on one GPU machine, every framework real, over four calls of the device tool.
# A call carries at most 64 MiB and lasts at most 10 minutes, so the frameworks are staged over the first
# calls (the machine keeps $HOME for 30 s after a call), and the run itself goes on detached, from a copy
# of the working tree outside it, between the last two calls.
#
#   nightly.sh stage1            carry .carry/frameworks/stage1 .carry/whl .carry/night .carry/kernel-cache:
#                                vLLM's library, part 1; the wheels; SGLang with its kernels, Liger; the
#                                prebuilt kernel libraries. Then a short smoke run of the CUDA path (--quick,
#                                three operators, plain and the recipe, --repeat 2; SMOKE_S=0: none).
#   nightly.sh stage2            carry .carry/megatron: the Megatron / TE staging, installed and checked.
#   nightly.sh start CAP [WAIT]  carry .carry/frameworks/stage2: vLLM's library, part 2, joined and checked;
#                                every wheel into one site; the tree copied out; the job started detached
#                                (the nightly, then the B200-draws accuracy run, stopped by SIGTERM after CAP
#                                seconds at most: nightly_job.sh); then waits up to WAIT seconds (default 500).
#                                In one call (no vLLM): carry .carry/solo .carry/megatron .carry/kernel-cache.
#   nightly.sh wait [WAIT]       waits up to WAIT seconds (default 540) for the job and packs what it has done,
#                                leaving it running: a call between `start` and `collect` for a longer run.
#   nightly.sh collect [WAIT]    waits up to WAIT seconds (default 540) for the job, stops it if it still
#                                runs (its reports are then written as incomplete), and packs everything
#                                the job wrote into $OUT/nightly.tar.xz.
# `start` and `collect` end CALL_S seconds (default 540) after they began at the latest: give the device
# call a limit above that. Each call's output is also in $OUT/nightly.<step>.log, and `start` packs what
# the job has done so far, so that a call that is cut short still brings something back. Call `wait` or
# `collect` within 30 s of the previous call's end, or the machine and the job are gone.
#
# Environment: one site on the machine's torch for every framework (vLLM, SGLang and its kernels, diffusers,
# Liger, Transformer Engine and megatron-core from the staging, Megatron-LM main through --megatron-src);
# each report records the versions each mode imported. NIGHT (default $HOME/night) holds everything.
case "${1:-}" in -h | --help | "") awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;; esac
set -uo pipefail
export PYTHONUNBUFFERED=1
NIGHT=${NIGHT:-$HOME/night}
OUT=${OUT:-/tmp/out}
mkdir -p "$NIGHT" "$OUT"
step=$1; shift
CALL_T0=${CALL_T0:-$(date +%s)}
# Everything this call prints also goes to $OUT, which comes back even when the call runs past its limit.
exec > >(tee -a "$OUT/nightly.$step.log") 2>&1
stamp() { echo "[$(date -u +%H:%M:%S)] $*"; }

install_wheels() {  # SITE WHEEL...: unpacked as pip would, without the network or dependencies
  local site=$1; shift
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$@" \
    >> "$NIGHT/pip.log" 2>&1 || { tail -n 20 "$NIGHT/pip.log"; return 1; }
}

case "$step" in
stage1)
  stamp "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
  python3 tools/slim_frameworks.py stage --carried .carry/frameworks/stage1 --to "$NIGHT/vllm-stage" || exit 1
  mkdir -p "$NIGHT/wheels" && cp .carry/whl/*.whl .carry/night/*.whl "$NIGHT/wheels/" || exit 1
  mkdir -p "$NIGHT/kernel-cache" && cp -r .carry/kernel-cache/. "$NIGHT/kernel-cache/" || exit 1
  if [ "${SMOKE_S:-200}" = 0 ]; then stamp "staged part 1, $(ls "$NIGHT/wheels" | wc -l) wheels, the kernels; no smoke run"; exit 0; fi
  install_wheels "$NIGHT/smoke-site" .carry/whl/*.whl || exit 1
  stamp "staged part 1, $(ls "$NIGHT/wheels" | wc -l) wheels, kernels $(ls "$NIGHT/kernel-cache" | tr '\n' ' '); smoke run"
  PYTHONPATH="$NIGHT/smoke-site:$PWD" ADALN_BENCH_KERNEL_CACHE="$NIGHT/kernel-cache" \
    ADALN_BENCH_CUTLASS_INCLUDE="$NIGHT/smoke-site/cutlass_library/source/include" \
    ADALN_BENCH_STEP_TRACE="$OUT/smoke.steps.jsonl" \
    timeout --signal=TERM "${SMOKE_S:-200}" python3 -m adaln_bench run --device cuda --quick --op timestep_mlp \
    --op gate_residual --op norm_modulate --mode plain --mode cublaslt_ws1 --repeat 2 --out "$OUT/smoke" \
    > "$OUT/smoke.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] && rm -f "$NIGHT/smoke.failed" || touch "$NIGHT/smoke.failed"
  grep "schedule:" "$OUT/smoke.log"; tail -n 12 "$OUT/smoke.log"
  PYTHONPATH="$NIGHT/smoke-site:$PWD" python3 tools/device/run_time.py "$OUT"/smoke/runs/*.json
  stamp "smoke run exit $rc"
  ;;
stage2)
  python3 tools/stage_megatron.py install --tarball .carry/megatron/megatron-stage.tar.xz --dest "$NIGHT/megatron" \
    > "$NIGHT/megatron-exports.sh" 2> "$NIGHT/megatron-install.log"
  rc=$?; tail -n 5 "$NIGHT/megatron-install.log"
  [ $rc -eq 0 ] || { stamp "megatron install failed (exit $rc)"; exit 1; }
  stamp "megatron staged"
  # After a failed smoke run, hold the machine (and what is staged on it) for a fix: `start` re-sends the tree.
  if [ -e "$NIGHT/smoke.failed" ]; then stamp "the smoke run failed: holding ${HOLD_S:-150} s"; sleep "${HOLD_S:-150}"; fi
  ;;
start)
  cap=${1:?start CAP [WAIT]: the most seconds the nightly may run}; wait_s=${2:-500}
  site=$NIGHT/site
  # Whatever this call carries or earlier calls staged: stage2's wheels, stage1's, or .carry/solo's (every
  # wheel but vLLM's, for one call that also carries .carry/megatron and .carry/kernel-cache).
  # One wheel per distribution, the first found in this order (pick_wheels.py); SGLang with its two AdaLN
  # kernels, a superset of the mode's slimmed install, comes last and goes in on its own, over it.
  mapfile -t wheels < <(python3 tools/device/pick_wheels.py .carry/frameworks/stage2/whl "$NIGHT/wheels" .carry/solo)
  [ "${#wheels[@]}" -gt 0 ] || { stamp "no wheels carried or staged"; exit 1; }
  kernels_wheel=""
  case "${wheels[-1]}" in *0slimkernels*) kernels_wheel=${wheels[-1]}; unset 'wheels[-1]' ;; esac
  install_wheels "$site" "${wheels[@]}" || exit 1
  if [ -n "$kernels_wheel" ]; then install_wheels "$site" "$kernels_wheel" || exit 1; fi
  if [ -f .carry/megatron/megatron-stage.tar.xz ] && [ ! -s "$NIGHT/megatron-exports.sh" ]; then
    python3 tools/stage_megatron.py install --tarball .carry/megatron/megatron-stage.tar.xz --dest "$NIGHT/megatron" \
      > "$NIGHT/megatron-exports.sh" 2> "$NIGHT/megatron-install.log" \
      || { tail -n 5 "$NIGHT/megatron-install.log"; : > "$NIGHT/megatron-exports.sh"; stamp "WARNING: no Megatron staging"; }
  fi
  if [ -d .carry/kernel-cache ]; then mkdir -p "$NIGHT/kernel-cache" && cp -r .carry/kernel-cache/. "$NIGHT/kernel-cache/"; fi
  # A framework that fails its check is left unavailable in the reports, with the reason; the run goes on.
  if [ -d "$NIGHT/vllm-stage" ]; then
    python3 tools/slim_frameworks.py join --staged "$NIGHT/vllm-stage" --carried .carry/frameworks/stage2 --site "$site" \
      || stamp "WARNING: vLLM's library did not join: the vllm mode will be unavailable"
  fi
  python3 tools/slim_frameworks.py kernels verify --site "$site" \
    || stamp "WARNING: SGLang's kernel set did not verify"
  tree=$NIGHT/tree
  rm -rf "$tree" && mkdir -p "$tree"
  tar cf - --exclude=./.carry . | tar xf - -C "$tree" || exit 1  # .git too: the reports name the commit
  cp tools/device/nightly_job.sh "$NIGHT/job.sh"
  git rev-parse --short HEAD > "$NIGHT/commit.txt" 2>/dev/null || true
  stamp "site ready ($(ls "$site" | wc -l) entries, megatron $( [ -s "$NIGHT/megatron-exports.sh" ] && echo yes || echo no)); starting the job (cap $cap s)"
  # Redirected as a whole: a shell between this one and the job that kept this call's output open would keep
  # the device call waiting for the job, up to the call's limit.
  (cd "$tree" && NIGHT="$NIGHT" CAP="$cap" SKIP_DRAWS="${SKIP_DRAWS:-}" exec setsid nohup bash "$NIGHT/job.sh") \
    > "$NIGHT/job.log" 2>&1 < /dev/null &
  sleep 2
  CALL_T0=$CALL_T0 bash "$0" wait "$wait_s"
  ;;
wait | collect)
  # Waits for the job, at most WAIT seconds and never past CALL_S seconds (default 540) after this call
  # began, so that the call ends, with what it has, before the device tool's own limit.
  wait_s=${1:-540}
  deadline=$(( CALL_T0 + ${CALL_S:-540} - 30 ))
  t0=$(date +%s)
  [ $(( t0 + wait_s )) -lt "$deadline" ] && deadline=$(( t0 + wait_s ))
  pack() { tar -C "$NIGHT" -cJf "$OUT/nightly.tar.xz" out job.log commit.txt megatron/manifest.json 2>/dev/null; }
  polls=0
  while [ ! -e "$NIGHT/job.done" ] && [ "$(date +%s)" -lt "$deadline" ]; do
    sleep 10
    cp "$NIGHT/job.log" "$OUT/job.log" 2>/dev/null
    polls=$(( polls + 1 )); [ $(( polls % 6 )) -eq 0 ] && pack  # a call cut short still brings back a minute-old archive
  done
  grep -h "phase\|done\|exit" "$NIGHT/job.log" | tail -n 8
  if [ "$step" = collect ] && [ ! -e "$NIGHT/job.done" ]; then
    stamp "still running: stopping it (its reports are written as incomplete)"
    pkill -TERM -f "adaln_bench run"; t1=$(date +%s)
    while [ ! -e "$NIGHT/job.done" ] && [ $(( $(date +%s) - t1 )) -lt 40 ]; do sleep 2; done
  fi
  # Packed every time, so that a call that ends early still brings back what is done so far.
  pack
  ls -la "$OUT/nightly.tar.xz"
  ;;
*) echo "nightly.sh: unknown step '$step' (stage1, stage2, start, wait, collect)" >&2; exit 2 ;;
esac
