// log_softmax gather over large vocabularies. Each row is read from memory once: it is walked
// in L1-sized blocks, first for the block max (rescaling the running sum when the max grows),
// then for the sum of exp(x - max) while the block is still in cache.
#include <cmath>
#include <limits>

#include "../kernels.h"
#include "parallel.h"
#include "simd.h"

namespace mempo {
namespace cpu {
namespace {

constexpr int64_t kBlock = 2048;  // floats: 8 KiB, well inside L1d
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct RowState {
  float max = -std::numeric_limits<float>::infinity();
  double sum = 0.0;
  bool nan = false;
};

// Raise the running max to block_max, rescaling the sum accumulated so far.
inline void raise_max(RowState& st, float block_max) {
  if (block_max > st.max) {
    st.sum = st.max == -std::numeric_limits<float>::infinity() ? 0.0 : st.sum * std::exp(double(st.max) - double(block_max));
    st.max = block_max;
  }
}

inline float finish(const RowState& st, float target_logit) {
  if (st.nan || std::isinf(st.max)) return static_cast<float>(kNaN);
  return static_cast<float>(double(target_logit) - double(st.max) - std::log(st.sum));
}

float row_scalar(const float* x, int64_t vocab, int32_t target) {
  RowState st;
  for (int64_t b = 0; b < vocab; b += kBlock) {
    const int64_t e = std::min(vocab, b + kBlock);
    float bm = -std::numeric_limits<float>::infinity();
    for (int64_t i = b; i < e; ++i) {
      if (x[i] != x[i]) st.nan = true;
      bm = x[i] > bm ? x[i] : bm;
    }
    raise_max(st, bm);
    if (st.nan || std::isinf(st.max)) {
      if (st.nan || st.max > 0) break;  // NaN / +inf decide the row; all -inf so far: keep going
      continue;
    }
    double s = 0.0;
    for (int64_t i = b; i < e; ++i) s += std::exp(double(x[i]) - double(st.max));
    st.sum += s;
  }
  return finish(st, x[target]);
}

#if MEMPO_X86
MEMPO_AVX2_TARGET float row_avx2(const float* x, int64_t vocab, int32_t target) {
  RowState st;
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t b = 0; b < vocab; b += kBlock) {
    const int64_t e = std::min(vocab, b + kBlock);
    const int64_t e8 = b + ((e - b) & ~int64_t{15});
    __m256 m0 = neg_inf, m1 = neg_inf, bad = _mm256_setzero_ps();
    for (int64_t i = b; i < e8; i += 16) {
      __m256 a = _mm256_loadu_ps(x + i), c = _mm256_loadu_ps(x + i + 8);
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, c, _CMP_UNORD_Q));
      m0 = _mm256_max_ps(m0, a);
      m1 = _mm256_max_ps(m1, c);
    }
    float bm = hmax256(_mm256_max_ps(m0, m1));
    for (int64_t i = e8; i < e; ++i) {
      if (x[i] != x[i]) st.nan = true;
      bm = x[i] > bm ? x[i] : bm;
    }
    if (_mm256_movemask_ps(bad)) st.nan = true;
    raise_max(st, bm);
    if (st.nan || std::isinf(st.max)) {
      if (st.nan || st.max > 0) break;
      continue;
    }
    const __m256 mx = _mm256_set1_ps(st.max);
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    for (int64_t i = b; i < e8; i += 16) {
      s0 = _mm256_add_ps(s0, exp256_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mx)));
      s1 = _mm256_add_ps(s1, exp256_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mx)));
    }
    double s = hsum256_pd(_mm256_add_ps(s0, s1));
    for (int64_t i = e8; i < e; ++i) s += std::exp(double(x[i]) - double(st.max));
    st.sum += s;
  }
  return finish(st, x[target]);
}
#endif

}  // namespace

void gather_log_probs(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab, float* out) {
  const bool avx2 = cpu_has_avx2();
  // One worker per group of rows; a row of 150k floats is ~0.6 MB, enough to amortise a thread.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(vocab, 1));
  parallel_for(rows, grain, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* x = logits + r * vocab;
#if MEMPO_X86
      out[r] = avx2 ? row_avx2(x, vocab, targets[r]) : row_scalar(x, vocab, targets[r]);
#else
      out[r] = row_scalar(x, vocab, targets[r]);
#endif
    }
  });
}

}  // namespace cpu
}  // namespace mempo
