// answerProbability kernel (see answer_probability.cu).
// Kernels and their launch arithmetic only (no runtime API): included by the .cu file and by
// the CPU emulation test in native/cuda/emu.
#pragma once
#include <cmath>
#include <cstdint>

#include "device.cuh"

namespace mempo {
namespace cuda {
namespace kern {

constexpr int kAnswerThreads = 256;

// One warp per row: kept sum in double and count, same filter as the CPU (NaN never kept).
__global__ void answer_prob_kernel(const float* __restrict__ logp, const uint8_t* __restrict__ mask, int64_t rows,
                                   int64_t cols, double threshold, float* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = (int64_t(gridDim.x) * blockDim.x) >> 5;
  for (int64_t r = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) >> 5; r < rows; r += warps) {
    double sum = 0.0;
    long long kept = 0;
    for (int64_t c = lane; c < cols; c += 32) {
      const int64_t i = r * cols + c;
      const double v = logp[i];
      if (mask[i] != 0 && v > threshold) {
        sum += v;
        ++kept;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      sum += __shfl_down_sync(0xffffffffu, sum, o);
      kept += __shfl_down_sync(0xffffffffu, kept, o);
    }
    if (lane == 0) out[r] = kept == 0 ? 0.0f : float(exp(sum / double(kept)));
  }
}

}  // namespace kern
}  // namespace cuda
}  // namespace mempo
