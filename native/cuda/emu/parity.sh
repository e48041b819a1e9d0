#!/usr/bin/env bash
# The whole CUDA path without a GPU: builds the addon against the CPU emulation of the CUDA
# runtime (scripts/build-cuda.sh --emulate) and runs test/kernels/cuda-parity.test.ts on it (CUDA path
# = CPU kernels = JS twin, batching, DeviceBuffer, injected out-of-memory and no-device errors).
# About 2-3 minutes on 2 cores. Tests the host orchestration and the kernels' logic; not real
# asynchrony, not the CUDA math library, not performance.
#   native/cuda/emu/parity.sh            # emulation build
#   native/cuda/emu/parity.sh --asan     # the same under AddressSanitizer + UBSan (slower; every
#                                        # device allocation is exact-sized, so kernel overruns abort)
#   extra arguments go to jest, e.g. -t gatherLogProbs
set -euo pipefail
cd "$(dirname "$0")/../../.."
asan=0
if [ "${1:-}" = --asan ]; then asan=1; shift; fi
if [ "$asan" = 1 ]; then
  MEMPO_EMU_SANITIZE=1 scripts/build-cuda.sh --emulate
  export MEMPO_CUDA_BINDING="$PWD/build-cuda-emu-asan/Release/mempo.node"
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
  export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
else
  scripts/build-cuda.sh --emulate
  export MEMPO_CUDA_BINDING="$PWD/build-cuda-emu/Release/mempo.node"
fi
MEMPO_REQUIRE_CUDA=1 npx jest --selectProjects kernels:native --verbose test/kernels/cuda-parity.test.ts "$@"
