#!/usr/bin/env bash
# Builds the addon with AddressSanitizer + UBSan into build-asan/ and runs the whole kernel suite
# (test/kernels, bad and hostile inputs and the native-vs-JS fuzz included) against it, on the
# native backend. Memory errors and undefined behaviour abort the run with a report. Bounded:
# parity.test.ts runs its smaller shape set (MEMPO_PARITY_SMALL=1); a few minutes on 2 cores.
# .ci/run runs it after the lint.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf build-asan
# node-gyp has no out-of-tree build flag that survives `rebuild`; build in place, then move.
mv build build-keep 2>/dev/null || true
restore() { if [ -d build-keep ]; then rm -rf build; mv build-keep build; fi; }
trap restore EXIT  # the regular build comes back even when the sanitized one fails
log=$(mktemp -t mempo-asan-build.XXXXXX.log)
npx node-gyp rebuild -- -Dmempo_asan=1 >"$log" 2>&1 || { tail -40 "$log" >&2; exit 1; }
mv build build-asan
restore
export LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:protect_shadow_gap=0  # (the gap: CUDA maps memory there)
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export MEMPO_NATIVE_BINDING="$PWD/build-asan/Release/mempo.node"
export MEMPO_ASAN=1            # tests that need a small address-space limit skip themselves
export MEMPO_PARITY_SMALL=1    # parity.test.ts: MemPO-sized shapes scaled down
# (--selectProjects takes every word up to the next flag: keep the paths after --verbose.)
npx jest --selectProjects kernels:native --verbose test/kernels "$@"
