// Internal to native/cuda: error checks, the per-process context (device, streams, a cached
// scratch workspace) and small device helpers shared by the kernels.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <string>

#include "cuda_kernels.h"

namespace mempo {
namespace cuda {

// Throws CudaError with the CUDA text of e; clears the (non-sticky) last error first so the
// next call starts clean. `what` names the operation.
void check(cudaError_t e, const char* what);

// Checks the launch just made (configuration errors surface here; faults surface at the
// next synchronisation).
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

constexpr int kMaxSlots = 12;

// Everything one call needs; construction takes the process-wide lock, makes device 0
// current and (the first time) creates the streams. Destruction waits for both streams, so
// no copy into a caller's host buffer is still in flight once a call has returned or thrown.
class Session {
 public:
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  cudaStream_t stream(int i) const;
  int sm_count() const;

  // Device scratch for this call: slot i gets at least bytes[i] bytes (grown, never shrunk,
  // cached across calls). On out-of-memory every cached slot is released and the whole set is
  // allocated again once before giving up.
  void reserve(std::initializer_list<size_t> bytes);
  template <typename T>
  T* slot(int i) const {
    return static_cast<T*>(slot_ptr(i));
  }

  void sync();  // waits for both streams, throws on error

 private:
  void* slot_ptr(int i) const;
  std::unique_lock<std::mutex> lock_;
};

// Releases the cached scratch (used when a DeviceArray upload runs out of memory).
void release_scratch_locked();
std::mutex& device_mutex();

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
  v = threadIdx.x < warps ? shared32[threadIdx.x] : 0.0;
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
  v = threadIdx.x < warps ? shared32[threadIdx.x] : 0LL;
  if (warp == 0) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  }
  return v;
}

}  // namespace cuda
}  // namespace mempo
