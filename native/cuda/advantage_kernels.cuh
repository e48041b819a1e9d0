// Advantage kernels (see advantage.cu).
// Kernels and their launch arithmetic only (no runtime API): included by the .cu file and by
// the CPU emulation test in native/cuda/emu.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>
#include "device.cuh"

namespace mempo {
namespace cuda {
namespace kern {

constexpr int kAdvThreads = 256;

// Block per group g: members order[offsets[g] .. offsets[g+1]).
__global__ void group_normalize_kernel(const double* __restrict__ values, const int32_t* __restrict__ order,
                                       const int32_t* __restrict__ offsets, int32_t group_count, double eps,
                                       int norm_by_std, double* __restrict__ out) {
  __shared__ double red[32];
  __shared__ double bcast;
  for (int64_t g = blockIdx.x; g < group_count; g += gridDim.x) {
    const int32_t b = offsets[g], e = offsets[g + 1];
    const double count = double(e - b);
    double s = 0.0;
    for (int32_t j = b + threadIdx.x; j < e; j += blockDim.x) s += values[order[j]];
    s = block_sum(s, red);
    if (threadIdx.x == 0) bcast = count > 1.0 ? s / count : 0.0;
    __syncthreads();
    const double mean = bcast;
    double sq = 0.0;
    for (int32_t j = b + threadIdx.x; j < e; j += blockDim.x) {
      const double d = values[order[j]] - mean;
      sq += d * d;
    }
    sq = block_sum(sq, red);
    __syncthreads();  // everyone has read bcast (mean)
    if (threadIdx.x == 0) bcast = count > 1.0 ? sqrt(sq / (count - 1.0)) : 1.0;
    __syncthreads();
    const double std_dev = bcast;
    for (int32_t j = b + threadIdx.x; j < e; j += blockDim.x) {
      const int32_t i = order[j];
      const double centred = values[i] - mean;
      out[i] = norm_by_std ? centred / (std_dev + eps) : centred;
    }
    __syncthreads();  // bcast is rewritten by the next group
  }
}

__global__ void broadcast_kernel(const double* __restrict__ row_values, const uint8_t* __restrict__ mask,
                                 int64_t rows, int64_t cols, float* __restrict__ out) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = mask[i] != 0 ? float(row_values[i / cols]) : 0.0f;
  }
}

__global__ void spans_kernel(const double* __restrict__ values, const int32_t* __restrict__ spans, int64_t m,
                             int64_t cols, float* __restrict__ out) {
  for (int64_t k = blockIdx.x; k < m; k += gridDim.x) {
    const int64_t row = spans[3 * k];
    const int32_t s = spans[3 * k + 1], e = spans[3 * k + 2];
    const float v = float(values[k]);
    float* o = out + row * cols;
    for (int32_t c = s + int32_t(threadIdx.x); c < e; c += int32_t(blockDim.x)) o[c] = v;
  }
}

// The outcome and final advantages of mempo_advantages, from the row values and the memory
// advantage already on the device: final = o + alpha * memory on mask tokens, with float
// operands and one rounding of the double sum, as native/cpu/advantage.cc.
__global__ void outcome_final_kernel(const double* __restrict__ row_values, const uint8_t* __restrict__ mask,
                                     const float* __restrict__ memory, int64_t rows, int64_t cols, double alpha,
                                     float* __restrict__ outcome, float* __restrict__ final_adv) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float o = float(row_values[i / cols]);
    const bool on = mask[i] != 0;
    outcome[i] = on ? o : 0.0f;
    final_adv[i] = on ? float(double(o) + alpha * double(memory[i])) : 0.0f;
  }
}

// Counting sort of the group ids: offsets[group_count + 1], order[n] (stable).
void member_lists(const int32_t* groups, int64_t n, int32_t group_count, std::vector<int32_t>& offsets,
                  std::vector<int32_t>& order) {
  offsets.assign(size_t(group_count) + 1, 0);
  for (int64_t i = 0; i < n; ++i) ++offsets[size_t(groups[i]) + 1];
  for (int32_t g = 0; g < group_count; ++g) offsets[g + 1] += offsets[g];
  std::vector<int32_t> fill(offsets.begin(), offsets.end() - 1);
  order.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) order[fill[groups[i]]++] = int32_t(i);
}

}  // namespace kern
}  // namespace cuda
}  // namespace mempo
