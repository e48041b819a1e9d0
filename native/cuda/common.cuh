// Internal to native/cuda: error checks, the per-process context (device, streams, a cached
// scratch workspace) and small device helpers shared by the kernels.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <string>

#include "runtime.h"
#include "device.cuh"

// kernel<<<grid, block, 0, stream>>>(args...), spelled as a macro so the CPU emulation build
// (MEMPO_CUDA_EMULATION, native/cuda/emu) can run the same host code with emulated launches.
#ifndef MEMPO_CUDA_EMULATION
#define MEMPO_LAUNCH(kernel, grid, block, stream, ...) kernel<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__)
#endif

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

}  // namespace cuda
}  // namespace mempo
