// Device helpers shared by the kernels (and the host-side launch arithmetic). No CUDA runtime
// API here: the kernel headers (*_kernels.cuh) and this file also compile as plain C++ under
// the CPU emulation in native/cuda/emu, which is how their logic is tested without a GPU.
#pragma once
#include <cstdint>

namespace mempo {
namespace cuda {

inline unsigned grid_for(int64_t n, int threads, int sm_count, int waves = 8) {
  int64_t blocks = (n + threads - 1) / threads;
  const int64_t cap = int64_t(sm_count > 0 ? sm_count : 1) * waves * 4;
  if (blocks > cap) blocks = cap;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

// Sum of a double over a block (blockDim.x a multiple of 32, at most 1024); valid in thread 0.
__device__ inline double block_sum(double v, double* shared32) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // shared32 may still be read by a previous call
  if (lane == 0) shared32[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = int(threadIdx.x) < warps ? shared32[threadIdx.x] : 0.0;
  if (warp == 0) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  }
  return v;
}

__device__ inline long long block_sum_ll(long long v, long long* shared32) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) shared32[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = int(threadIdx.x) < warps ? shared32[threadIdx.x] : 0LL;
  if (warp == 0) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  }
  return v;
}

}  // namespace cuda
}  // namespace mempo
