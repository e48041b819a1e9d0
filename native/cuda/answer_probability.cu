// answerProbability on the device: one warp per row over the row's answer tokens (the filter
// of native/cpu/answer_probability.cc: mask set and logp above the threshold, NaN never kept).
#include <cstdint>

#include "common.cuh"
#include "answer_probability_kernels.cuh"

namespace mempo {
namespace cuda {

using namespace kern;

void answer_probability(const float* logp, const uint8_t* mask, int64_t rows, int64_t cols, double threshold,
                        float* out) {
  if (rows == 0) return;
  Session s;
  const size_t n = size_t(rows * cols);
  s.reserve({sizeof(float) * n, n, sizeof(float) * size_t(rows)});
  cudaStream_t st = s.stream(0);
  float* d_logp = s.slot<float>(0);
  uint8_t* d_mask = s.slot<uint8_t>(1);
  float* d_out = s.slot<float>(2);
  check(cudaMemcpyAsync(d_logp, logp, sizeof(float) * n, cudaMemcpyHostToDevice, st), "cudaMemcpyAsync (logp)");
  check(cudaMemcpyAsync(d_mask, mask, n, cudaMemcpyHostToDevice, st), "cudaMemcpyAsync (ansMask)");
  MEMPO_LAUNCH(answer_prob_kernel, grid_for(rows * 32, kAnswerThreads, s.sm_count()), kAnswerThreads, st, d_logp,
               d_mask, rows, cols, threshold, d_out);
  check_launch("answer_probability kernel launch");
  check(cudaMemcpyAsync(out, d_out, sizeof(float) * size_t(rows), cudaMemcpyDeviceToHost, st), "cudaMemcpyAsync (out)");
  s.sync();
}

}  // namespace cuda
}  // namespace mempo
