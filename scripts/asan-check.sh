#!/usr/bin/env bash
# Builds the addon with AddressSanitizer + UBSan into build-asan/ and runs the kernel tests
# (bad inputs included) against it. Memory errors abort the run with a report.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf build-asan
# node-gyp has no out-of-tree build flag that survives `rebuild`; build in place, then move.
mv build build-keep 2>/dev/null || true
npx node-gyp rebuild -- -Dmempo_asan=1 >/tmp/mempo-asan-build.log 2>&1
mv build build-asan
mv build-keep build 2>/dev/null || true
export LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export MEMPO_NATIVE_BINDING="$PWD/build-asan/Release/mempo.node"
# (--selectProjects takes every word up to the next flag: keep the paths after --verbose.)
npx jest --selectProjects kernels:native --verbose test/kernels/answer-probability.test.ts test/kernels/advantage.test.ts \
  test/kernels/ppo-policy-loss.test.ts test/kernels/parity.test.ts test/kernels/backend.test.ts "$@"
