// CUDA twins of the kernels in native/cpu/kernels.h: same arguments (host pointers in, host
// pointers out), same results within 1e-5 relative. Each call copies its inputs to the device,
// computes there and copies the results back. Plain C++ on this side (no CUDA types), so that
// native/binding.cc compiles with the host compiler; the .cu files implement it.
//
// Every function throws mempo::cuda::CudaError (a std::runtime_error whose what() carries the
// CUDA error text, e.g. "CUDA error in cudaMalloc(...): out of memory (cudaErrorMemoryAllocation)")
// and never aborts; binding.cc turns that into a JS exception. Calls are serialised by one
// process-wide mutex (worker threads may share the addon).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "../cpu/kernels.h"

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

void gather_log_probs(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab, float* out);
void gather_log_probs_resident(const DeviceArray& logits, const int32_t* targets, int64_t rows, int64_t vocab,
                               float* out);

void answer_probability(const float* logp, const uint8_t* mask, int64_t rows, int64_t cols, double threshold,
                        float* out);

// grpoOutcomeAdvantage: group_normalize(scores) then broadcast_rows, both on the device.
void outcome_advantage(const double* scores, const int32_t* groups, int64_t rows, int32_t group_count, double eps,
                       bool norm_by_std, const uint8_t* mask, int64_t cols, float* out);

// memoryAdvantage: group_normalize(rewards) then write_spans, both on the device.
// Spans must already be validated (in bounds, non-overlapping within a row).
void memory_advantage(const double* rewards, const int32_t* groups, int64_t m, int32_t group_count, double eps,
                      bool norm_by_std, const int32_t* spans, int64_t rows, int64_t cols, float* out);

PpoLossResult ppo_policy_loss(const float* logp, const float* old_logp, const float* adv, const uint8_t* mask,
                              int64_t rows, int64_t cols, double clip_low, double clip_high, double clip_c,
                              int agg_mode, const float* ref_logp, double kl_coef, int kl_type, float* grad);

}  // namespace cuda
}  // namespace mempo
