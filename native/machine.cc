// The host side of info() and readBandwidth: the SIMD path, the thread count and a single-pass
// read bandwidth measured the way gather_log_probs reads (the benchmark divides bytes by this
// time to get GB/s). Not an op: there is no CUDA twin.
#include "machine.h"

#include <chrono>
#include <vector>

#include "cpu/parallel.h"
#include "cpu/simd.h"

namespace mempo {
namespace {

float sum_scalar(const float* x, int64_t n) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += x[i];
    s1 += x[i + 1];
    s2 += x[i + 2];
    s3 += x[i + 3];
  }
  for (; i < n; ++i) s0 += x[i];
  return s0 + s1 + s2 + s3;
}

#if MEMPO_X86
MEMPO_AVX2_TARGET float sum_avx2(const float* x, int64_t n) {
  __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps(), c = _mm256_setzero_ps(), d = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a = _mm256_add_ps(a, _mm256_loadu_ps(x + i));
    b = _mm256_add_ps(b, _mm256_loadu_ps(x + i + 8));
    c = _mm256_add_ps(c, _mm256_loadu_ps(x + i + 16));
    d = _mm256_add_ps(d, _mm256_loadu_ps(x + i + 24));
  }
  float s = static_cast<float>(hsum256_pd(_mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d))));
  for (; i < n; ++i) s += x[i];
  return s;
}
#endif

}  // namespace

// The best path gatherLogProbs takes (the other kernels stop at AVX2); MEMPO_SIMD caps it.
const char* simd_path() { return cpu_has_avx512() ? "avx512" : cpu_has_avx2() ? "avx2" : "scalar"; }
int thread_count() { return configured_threads(); }

double read_bandwidth_seconds(const float* data, int64_t n, int repeats) {
  std::vector<float> sink(configured_threads(), 0.0f);
  const auto t0 = std::chrono::steady_clock::now();
  for (int rep = 0; rep < repeats; ++rep) {
    parallel_for(n, int64_t{1} << 18, [&](int64_t b, int64_t e, int w) {
#if MEMPO_X86
      float s = cpu_has_avx2() ? sum_avx2(data + b, e - b) : sum_scalar(data + b, e - b);
#else
      float s = sum_scalar(data + b, e - b);
#endif
      sink[w] += s;
    });
  }
  const auto t1 = std::chrono::steady_clock::now();
  volatile float keep = 0;  // the sums must stay observable or the reads could be elided
  for (float v : sink) keep = keep + v;
  return std::chrono::duration<double>(t1 - t0).count();
}

}  // namespace mempo
