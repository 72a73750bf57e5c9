#!/bin/sh
# Copy what scripts/gathered_check.py needs into a folder that travels to the GPU machine (default
# /work/main/.carry/gathered, git-ignored there), with the sm_90a library prebuilt into its kcache/.
# Then on the device: cd .carry/gathered && PYTHONUNBUFFERED=1 python3 gathered_check.py 2>&1 | tee $OUT/log.txt
set -e
src=$(cd "$(dirname "$0")/.." && pwd)
dst=${1:-/work/main/.carry/gathered}
rm -rf "$dst/adaln_bench" "$dst/gathered_check.py"
mkdir -p "$dst/adaln_bench/kernels/bundled" "$dst/adaln_bench/kernels/gathered"
cp "$src/adaln_bench/__init__.py" "$dst/adaln_bench/"
cp "$src/adaln_bench/kernels/__init__.py" "$dst/adaln_bench/kernels/"
cp "$src/adaln_bench/kernels/bundled/__init__.py" "$src/adaln_bench/kernels/bundled/build.py" "$dst/adaln_bench/kernels/bundled/"
cp "$src/adaln_bench/kernels/gathered/"*.py "$src/adaln_bench/kernels/gathered/"*.cu "$src/adaln_bench/kernels/gathered/"*.cuh "$dst/adaln_bench/kernels/gathered/"
cp "$src/scripts/gathered_check.py" "$dst/"
cd "$dst" && ADALN_BENCH_KERNEL_CACHE="$dst/kcache" nice -n 10 python3 -m adaln_bench.kernels.gathered.build --arch sm_90a
