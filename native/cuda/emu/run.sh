#!/usr/bin/env bash
# Builds and runs the CPU emulation of the CUDA kernels (emu_test.cc) against native/cpu.
# Needs only g++ (C++20 for std::barrier); no CUDA toolkit, no GPU. ~10 s on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${MEMPO_EMU_OUT:-$root/build-cuda/emu}
mkdir -p "$out"
[ -f "$root/build-cuda/.gitignore" ] || { mkdir -p "$root/build-cuda" && printf '*\n' >"$root/build-cuda/.gitignore"; }
"${CXX:-g++}" -std=c++20 -O2 -pthread -Wall -Wno-unknown-pragmas -o "$out/emu_test" \
  "$here/emu_test.cc" "$root"/native/cpu/gather_logprobs.cc "$root"/native/cpu/answer_probability.cc \
  "$root"/native/cpu/advantage.cc "$root"/native/cpu/ppo_loss.cc
MEMPO_THREADS=${MEMPO_THREADS:-2} "$out/emu_test"
