// The CUDA-only part of native/cuda, next to the ops of native/kernels.h (mempo::cuda): the
// device probe, the resident DeviceArray and its gather, implemented by runtime.cu (not an op)
// and gather_logprobs.cu. Each op copies its inputs to the device, computes there and copies
// the results back. Plain C++ on this side (no CUDA types), so that native/napi compiles with
// the host compiler.
//
// Every function, the ops included, throws mempo::cuda::CudaError (a std::runtime_error whose
// what() carries the CUDA error text, e.g. "CUDA error in cudaMalloc(...): out of memory
// (cudaErrorMemoryAllocation)") and never aborts; guarded() in native/napi/args.h turns that
// into a JS exception. Calls are serialised by one process-wide mutex (worker threads may
// share the addon).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "../kernels.h"

namespace mempo {
namespace cuda {

class CudaError : public std::runtime_error {
 public:
  explicit CudaError(const std::string& what) : std::runtime_error(what) {}
};

// Result of the one-time device probe (cudaGetDeviceCount + properties of device 0).
struct DeviceStatus {
  bool available = false;  // a device is present and the runtime initialised
  std::string name;        // device 0's name when available
  std::string error;       // why not, with the CUDA error text, when unavailable
  int sm_count = 0;
};

// Probes once (thread-safe); later calls return the cached result. Never throws.
const DeviceStatus& probe();

// A float array resident in device memory (the DeviceBuffer of the JS API): upload once,
// use as the logits of gather_log_probs_resident across calls. Frees its memory on
// destruction (errors at process teardown are ignored).
class DeviceArray {
 public:
  static std::unique_ptr<DeviceArray> upload(const float* host, int64_t n);
  ~DeviceArray();
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void write(const float* host, int64_t n);  // n must equal size()
  void read(float* host) const;              // copies size() floats back
  const float* data() const { return ptr_; }
  int64_t size() const { return n_; }

 private:
  DeviceArray(float* p, int64_t n) : ptr_(p), n_(n) {}
  float* ptr_;
  int64_t n_;
};

// gatherLogProbs on logits already in device memory (a DeviceBuffer); gather_logprobs.cu.
void gather_log_probs_resident(const DeviceArray& logits, const int32_t* targets, int64_t rows, int64_t vocab,
                               float* out);

}  // namespace cuda
}  // namespace mempo
