// Stand-in for <cuda_runtime.h> in the CPU emulation build (CMake -DMEMPO_CUDA_EMULATION=ON,
// scripts/build-cuda.sh --emulate): the subset of the runtime API that native/cuda uses,
// implemented on host memory, synchronously, with kernel launches run by cuda_emu.h. It lets
// the whole CUDA path (native/napi dispatch, DeviceBuffer, scratch slots, batching, error
// handling) run under the jest parity tests on a machine without a GPU.
//
// Fault injection through the environment (read at each call):
//   MEMPO_EMU_NO_DEVICE=1           cudaGetDeviceCount fails (cudaErrorNoDevice)
//   MEMPO_EMU_MALLOC_LIMIT=<bytes>  cudaMalloc of more than this fails (cudaErrorMemoryAllocation)
//   MEMPO_EMU_SM_COUNT=<n>          multiProcessorCount reported (default 4)
// Device allocations are exact-sized malloc()s (no rounding in Session::reserve under
// emulation), so an AddressSanitizer build catches any out-of-bounds kernel access.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../cuda_emu.h"

#ifndef MEMPO_CUDA_EMULATION
#define MEMPO_CUDA_EMULATION 1
#endif
#define MEMPO_LAUNCH(kernel, grid, block, stream, ...) \
  (::emu_runtime::last_error = ::emu_runtime::launch_ok(grid, block), ::emu::launch((grid), (block), kernel, __VA_ARGS__))

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorNoDevice = 100,
};
typedef cudaError_t cudaError;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
};

struct CUstream_st {};
typedef CUstream_st* cudaStream_t;
#define cudaStreamNonBlocking 0x01

struct cudaDeviceProp {
  char name[256];
  int multiProcessorCount;
};

namespace emu_runtime {
inline cudaError_t last_error = cudaSuccess;
inline CUstream_st streams[8];
inline int next_stream = 0;
inline cudaError_t launch_ok(unsigned grid, unsigned block) {
  return (grid == 0 || block == 0 || block > 1024 || block % 32 != 0) ? cudaErrorInvalidConfiguration : cudaSuccess;
}
inline bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "1") == 0;
}
}  // namespace emu_runtime

inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
  }
  return "unrecognized error code";
}
inline const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
  }
  return "cudaErrorUnknown";
}

inline cudaError_t cudaGetLastError() {
  const cudaError_t e = emu_runtime::last_error;
  emu_runtime::last_error = cudaSuccess;
  return e;
}

inline cudaError_t cudaGetDeviceCount(int* count) {
  if (emu_runtime::env_on("MEMPO_EMU_NO_DEVICE")) {
    *count = 0;
    return emu_runtime::last_error = cudaErrorNoDevice;
  }
  *count = 1;
  return cudaSuccess;
}

inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return emu_runtime::last_error = cudaErrorInvalidValue;
  std::strcpy(prop->name, "mempo CPU emulation of CUDA (not a GPU)");
  const char* sm = std::getenv("MEMPO_EMU_SM_COUNT");
  prop->multiProcessorCount = sm ? std::atoi(sm) : 4;
  if (prop->multiProcessorCount < 1) prop->multiProcessorCount = 1;
  return cudaSuccess;
}

inline cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : (emu_runtime::last_error = cudaErrorInvalidValue); }

inline cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (const char* lim = std::getenv("MEMPO_EMU_MALLOC_LIMIT")) {
    if (bytes > size_t(std::strtoull(lim, nullptr, 10))) {
      *p = nullptr;
      return emu_runtime::last_error = cudaErrorMemoryAllocation;
    }
  }
  *p = std::malloc(bytes ? bytes : 1);
  if (!*p) return emu_runtime::last_error = cudaErrorMemoryAllocation;
  std::memset(*p, 0xA5, bytes);  // device memory is not zeroed: make reliance on it visible
  return cudaSuccess;
}
template <typename T>
inline cudaError_t cudaMalloc(T** p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}

inline cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}

inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t s) {
  if (s == nullptr) return emu_runtime::last_error = cudaErrorInvalidValue;  // mempo always names a stream
  if (bytes) std::memcpy(dst, src, bytes);
  return cudaSuccess;
}

inline cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t s) {
  if (s == nullptr) return emu_runtime::last_error = cudaErrorInvalidValue;
  std::memset(dst, value, bytes);
  return cudaSuccess;
}

inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  *s = &emu_runtime::streams[emu_runtime::next_stream++ % 8];
  return cudaSuccess;
}

inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
