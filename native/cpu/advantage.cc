// Group statistics (tiny: one value per trajectory or snapshot) and the [B, T] writes that
// dominate the cost of both advantages; the writes are split across threads by rows.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "../kernels.h"
#include "advantage.h"
#include "parallel.h"
#include "simd.h"

namespace mempo {
namespace cpu {

void group_normalize(const double* values, const int32_t* groups, int64_t n, int32_t group_count, double eps,
                     bool norm_by_std, double* out) {
  std::vector<double> count(group_count, 0.0), sum(group_count, 0.0), mean(group_count, 0.0), sq(group_count, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    count[groups[i]] += 1.0;
    sum[groups[i]] += values[i];
  }
  for (int32_t g = 0; g < group_count; ++g) mean[g] = count[g] > 1.0 ? sum[g] / count[g] : 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = values[i] - mean[groups[i]];
    sq[groups[i]] += d * d;
  }
  for (int64_t i = 0; i < n; ++i) {
    const int32_t g = groups[i];
    const double centred = values[i] - mean[g];
    if (!norm_by_std) {
      out[i] = centred;
    } else {
      const double std_dev = count[g] > 1.0 ? std::sqrt(sq[g] / (count[g] - 1.0)) : 1.0;
      out[i] = centred / (std_dev + eps);
    }
  }
}

namespace {

// double -> float rounding as a JS Float32Array store does: ±Infinity from FLT_MAX + half an ulp
// on, where a plain conversion is undefined (the TS wrapper rejects such values; direct addon
// callers may not).
inline float to_float(double v) {
  constexpr double kOverflow = 0x1.ffffffp+127;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  return v >= kOverflow ? kInf : v <= -kOverflow ? -kInf : float(v);
}

void broadcast_row_scalar(float v, const uint8_t* m, float* o, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) o[c] = m[c] != 0 ? v : 0.0f;
}

#if MEMPO_X86
// Streaming stores: the [B, T] result is far larger than the caches and is not read back here,
// so writing around the cache saves the read-for-ownership traffic.
MEMPO_AVX2_TARGET void broadcast_row_avx2(float v, const uint8_t* m, float* o, int64_t cols) {
  int64_t c = 0;
  for (; c < cols && (reinterpret_cast<uintptr_t>(o + c) & 31) != 0; ++c) o[c] = m[c] != 0 ? v : 0.0f;
  const __m256 vv = _mm256_set1_ps(v);
  const __m256i zero = _mm256_setzero_si256();
  for (; c + 8 <= cols; c += 8) {
    const __m128i mb = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(m + c));
    const __m256i is_zero = _mm256_cmpeq_epi32(_mm256_cvtepu8_epi32(mb), zero);
    _mm256_stream_ps(o + c, _mm256_andnot_ps(_mm256_castsi256_ps(is_zero), vv));
  }
  for (; c < cols; ++c) o[c] = m[c] != 0 ? v : 0.0f;
}
#endif

}  // namespace

void broadcast_rows(const double* row_values, const uint8_t* mask, int64_t rows, int64_t cols, float* out) {
  const bool avx2 = cpu_has_avx2();
  parallel_for(rows, std::max<int64_t>(1, (int64_t{1} << 16) / cols), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const float v = to_float(row_values[r]);
#if MEMPO_X86
      if (avx2) {
        broadcast_row_avx2(v, mask + r * cols, out + r * cols, cols);
        continue;
      }
#endif
      broadcast_row_scalar(v, mask + r * cols, out + r * cols, cols);
    }
#if MEMPO_X86
    if (avx2) _mm_sfence();
#endif
  });
}

void write_spans(const double* values, const int32_t* spans, int64_t m, int64_t rows, int64_t cols, bool zero_first,
                 float* out) {
  // Bucket spans by row so each worker zeroes and fills only its own rows.
  std::vector<int64_t> first(rows + 1, 0), order(m);
  for (int64_t k = 0; k < m; ++k) ++first[spans[3 * k] + 1];
  for (int64_t r = 0; r < rows; ++r) first[r + 1] += first[r];
  std::vector<int64_t> fill(first.begin(), first.end() - 1);
  for (int64_t k = 0; k < m; ++k) order[fill[spans[3 * k]]++] = k;
  parallel_for(rows, std::max<int64_t>(1, (int64_t{1} << 16) / cols), [&](int64_t r0, int64_t r1, int) {
    if (zero_first) std::memset(out + r0 * cols, 0, sizeof(float) * size_t((r1 - r0) * cols));
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t j = first[r]; j < first[r + 1]; ++j) {
        const int64_t k = order[j];
        const float v = to_float(values[k]);
        float* o = out + r * cols;
        for (int32_t c = spans[3 * k + 1]; c < spans[3 * k + 2]; ++c) o[c] = v;
      }
    }
  });
}

void outcome_advantage(const double* scores, const int32_t* groups, int64_t rows, int32_t group_count, double eps,
                       bool norm_by_std, const uint8_t* mask, int64_t cols, float* out) {
  std::vector<double> adv(rows);
  group_normalize(scores, groups, rows, group_count, eps, norm_by_std, adv.data());
  broadcast_rows(adv.data(), mask, rows, cols, out);
}

void memory_advantage(const double* rewards, const int32_t* groups, int64_t m, int32_t group_count, double eps,
                      bool norm_by_std, const int32_t* spans, int64_t rows, int64_t cols, bool out_zeroed,
                      float* out) {
  std::vector<double> adv(m);
  group_normalize(rewards, groups, m, group_count, eps, norm_by_std, adv.data());
  write_spans(adv.data(), spans, m, rows, cols, !out_zeroed, out);
}

}  // namespace cpu
}  // namespace mempo
