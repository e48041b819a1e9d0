#!/usr/bin/env bash
# On a machine with an NVIDIA GPU (driver + nvcc + cmake; node_modules installed): build the
# CUDA addon, run the CUDA/CPU/JS parity tests (test/kernels/cuda-parity.test.ts, where a skip is a
# failure here) and the CUDA vs CPU vs JS benchmark (bench/cuda.mjs). Budget: about 5 minutes
# (each step has its own timeout). Exit status non-zero on any failure.
#
#   scripts/gpu-check.sh                 # everything
#   MEMPO_GPU_CHECK_NO_JS=1 scripts/gpu-check.sh   # benchmark without the (slow) JS twin
#   OUT=/some/dir scripts/gpu-check.sh   # also writes bench-cuda.json and logs there
#   scripts/gpu-check.sh --without-gpu   # rehearsal on a machine without a GPU: same steps,
#                                        # parity skips instead of failing, bench is CPU/JS only
set -euo pipefail
require_gpu=1
for arg in "$@"; do
  case "$arg" in
    --without-gpu) require_gpu=0 ;;
    *) echo "gpu-check.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
root=$(pwd)
out=${OUT:-$root/build-cuda/gpu-check}
mkdir -p "$out" build-cuda
[ -f build-cuda/.gitignore ] || printf '*\n' >build-cuda/.gitignore
start=$(date +%s)
step() { echo; echo "=== gpu-check [$(( $(date +%s) - start ))s]: $*"; }

step "machine"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv || nvidia-smi || true
else
  echo "gpu-check: nvidia-smi not found; is there an NVIDIA driver?" >&2
fi
node --version
# Needed: node-addon-api + node-api-headers (build; cmake-js optional, plain cmake otherwise),
# jest + ts-jest + typescript (parity test, dist/ for the benchmark). Node alone runs them: no npm/npx,
# which a GPU machine may lack.
for m in node-addon-api node-api-headers jest ts-jest typescript; do
  [ -d "node_modules/$m" ] || { echo "gpu-check: node_modules/$m is missing; run npm ci first" >&2; exit 1; }
done

step "build the CUDA addon (scripts/build-cuda.sh)"
# The CPU emulation is for machines without a GPU; here the real device is tested below.
MEMPO_SKIP_EMU=1 MEMPO_BUILD_JOBS=${MEMPO_BUILD_JOBS:-$(nproc)} timeout 240 scripts/build-cuda.sh 2>&1 | tee "$out/build.log"
MEMPO_REQUIRE_CUDA=$require_gpu node -e "
const a = require('./build-cuda/Release/mempo.node'); const i = a.info(); console.log(JSON.stringify(i));
if (!i.cuda && process.env.MEMPO_REQUIRE_CUDA === '1') {
  console.error('gpu-check: the CUDA addon sees no usable device: ' + i.cudaError); process.exit(1);
}"

step "TypeScript build for the benchmark (dist/)"
timeout 120 node node_modules/typescript/bin/tsc -p tsconfig.build.json
node scripts/write-esm-entry.js

step "parity: CUDA = CPU = JS (test/kernels/cuda-parity.test.ts)"
MEMPO_REQUIRE_CUDA=$require_gpu timeout 180 node node_modules/jest/bin/jest.js --selectProjects kernels:native --verbose test/kernels/cuda-parity.test.ts 2>&1 | tee "$out/parity.log"

step "benchmark: CUDA vs CPU vs JS (bench/cuda.mjs)"
bench_args=(--out "$out/bench-cuda.json")
[ "${MEMPO_GPU_CHECK_NO_JS:-0}" = 1 ] && bench_args+=(--no-js)
MEMPO_NATIVE_BINDING="$root/build-cuda/Release/mempo.node" timeout 240 node bench/cuda.mjs "${bench_args[@]}" 2>&1 | tee "$out/bench.log"

if [ "$require_gpu" = 1 ]; then
  step "done: all GPU checks passed (results in $out)"
else
  step "rehearsal done (--without-gpu: nothing ran on a GPU; results in $out)"
fi
