// What the host offers the CPU kernels (native/machine.cc): the SIMD path, the thread count
// (info()) and the read bandwidth the benchmark compares the kernels with (readBandwidth).
#pragma once
#include <cstdint>

namespace mempo {

// "avx2" or "scalar", and the worker count (MEMPO_THREADS, else the hardware's, at most 64).
const char* simd_path();
int thread_count();

// Seconds for `repeats` sequential read passes over n floats, every worker streaming its own
// contiguous slice once, as gather_log_probs reads.
double read_bandwidth_seconds(const float* data, int64_t n, int repeats);

}  // namespace mempo
