// Group statistics (tiny: one value per trajectory or snapshot) and the [B, T] writes that
// dominate the cost of both advantages; the writes are split across threads by rows.
#include <cmath>
#include <algorithm>
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

// o[0, n) = mask ? v : 0, and o[0, n) = v: the two row writers every [B, T] result is made of.
void masked_row_scalar(float v, const uint8_t* m, float* o, int64_t n) {
  for (int64_t c = 0; c < n; ++c) o[c] = m[c] != 0 ? v : 0.0f;
}
void fill_row_scalar(float v, float* o, int64_t n) {
  for (int64_t c = 0; c < n; ++c) o[c] = v;
}

#if MEMPO_X86
// Streaming stores for results far larger than the caches (not read back here: writing around the
// cache saves the read-for-ownership traffic); plain stores for the others, which the caller reads
// from cache next, and where short segments would leave write-combining lines half full (a span
// of 20 values streamed cost the fused stage 10x its plain-store time at B = 512, T = 1024).
// Plain stores need no alignment: a segment is whole vectors and one masked store for its tail,
// no per-element branches (the fused stage's 10-30-value spans spent most of their time there).
template <bool kStream>
MEMPO_AVX2_TARGET inline void store8(float* o, __m256 v) {
  if (kStream) {
    _mm256_stream_ps(o, v);
  } else {
    _mm256_storeu_ps(o, v);
  }
}

// Lanes [0, k) of a store, k in [1, 8).
MEMPO_AVX2_TARGET inline __m256i first_lanes(int64_t k) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(k)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// v where the 8 mask bytes at m are non-zero, else 0.
MEMPO_AVX2_TARGET inline __m256 masked8(__m256 v, uint64_t bytes) {
  const __m256i is_zero = _mm256_cmpeq_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(bytes))), _mm256_setzero_si256());
  return _mm256_andnot_ps(_mm256_castsi256_ps(is_zero), v);
}

template <bool kStream>
MEMPO_AVX2_TARGET void masked_row_avx2(float v, const uint8_t* m, float* o, int64_t n) {
  int64_t c = 0;
  if (kStream) for (; c < n && (reinterpret_cast<uintptr_t>(o + c) & 31) != 0; ++c) o[c] = m[c] != 0 ? v : 0.0f;
  const __m256 vv = _mm256_set1_ps(v);
  for (; c + 8 <= n; c += 8) {
    uint64_t bytes;
    std::memcpy(&bytes, m + c, 8);
    store8<kStream>(o + c, masked8(vv, bytes));
  }
  if (c < n) {  // the tail: its mask bytes copied (no read past the mask), one masked store
    uint64_t bytes = 0;
    std::memcpy(&bytes, m + c, size_t(n - c));
    _mm256_maskstore_ps(o + c, first_lanes(n - c), masked8(vv, bytes));
  }
}

template <bool kStream>
MEMPO_AVX2_TARGET void fill_row_avx2(float v, float* o, int64_t n) {
  int64_t c = 0;
  if (kStream) for (; c < n && (reinterpret_cast<uintptr_t>(o + c) & 31) != 0; ++c) o[c] = v;
  const __m256 vv = _mm256_set1_ps(v);
  for (; c + 8 <= n; c += 8) store8<kStream>(o + c, vv);
  if (c < n) _mm256_maskstore_ps(o + c, first_lanes(n - c), vv);
}

// The plain-store writers with AVX-512 (BW for the byte masks): 16 values a store, the mask
// bytes tested straight into a store mask, and a masked load and store for the tail (masked-off
// lanes neither fault nor write), where AVX2's vmaskmovps is slow on AMD.
MEMPO_AVX512_TARGET void masked_row_avx512(float v, const uint8_t* m, float* o, int64_t n) {
  const __m512 vv = _mm512_set1_ps(v);
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    const __m128i mb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(m + c));
    _mm512_storeu_ps(o + c, _mm512_maskz_mov_ps(_mm_test_epi8_mask(mb, mb), vv));
  }
  if (c < n) {
    const __mmask16 tail = __mmask16((1u << (n - c)) - 1);
    const __m128i mb = _mm_maskz_loadu_epi8(tail, m + c);
    _mm512_mask_storeu_ps(o + c, tail, _mm512_maskz_mov_ps(_mm_test_epi8_mask(mb, mb), vv));
  }
}

MEMPO_AVX512_TARGET void fill_row_avx512(float v, float* o, int64_t n) {
  const __m512 vv = _mm512_set1_ps(v);
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) _mm512_storeu_ps(o + c, vv);
  if (c < n) _mm512_mask_storeu_ps(o + c, __mmask16((1u << (n - c)) - 1), vv);
}
#endif

// Results of more than this many bytes in all are streamed (about an L3's share per core).
constexpr int64_t kStreamBytes = int64_t{16} << 20;

struct RowWriter {
  bool avx2 = cpu_has_avx2();
  bool stream;
  bool avx512;  // plain stores only: the streamed results are memory-bound at either width
  explicit RowWriter(int64_t result_bytes) : stream(result_bytes > kStreamBytes), avx512(!stream && cpu_has_avx512()) {}
  void masked(float v, const uint8_t* m, float* o, int64_t n) const {
#if MEMPO_X86
    if (avx512) return masked_row_avx512(v, m, o, n);
    if (avx2) return stream ? masked_row_avx2<true>(v, m, o, n) : masked_row_avx2<false>(v, m, o, n);
#endif
    masked_row_scalar(v, m, o, n);
  }
  void fill(float v, float* o, int64_t n) const {
#if MEMPO_X86
    if (avx512) return fill_row_avx512(v, o, n);
    if (avx2) return stream ? fill_row_avx2<true>(v, o, n) : fill_row_avx2<false>(v, o, n);
#endif
    fill_row_scalar(v, o, n);
  }
  void done() const {  // the streaming stores of this thread are visible before it is joined
#if MEMPO_X86
    if (avx2 && stream) _mm_sfence();
#endif
  }
};

// Rows of at least 512k values per thread (~40-90 µs of writes here): waking a sleeping pool worker
// costs ~50 µs on a VM, and at B = 512, T = 1,024 (2^19 values) two threads measured 0.35 ms a
// call against 0.15 ms on one (bench/README.md "Per-call cost"), so such results stay on the caller.
int64_t row_grain(int64_t cols) { return std::max<int64_t>(1, (int64_t{1} << 19) / std::max<int64_t>(cols, 1)); }

}  // namespace

SpansByRow spans_by_row(const int32_t* spans, int64_t m, int64_t rows) {
  SpansByRow b;
  b.first.assign(size_t(rows) + 1, 0);
  b.order.resize(size_t(m));
  for (int64_t k = 0; k < m; ++k) ++b.first[spans[3 * k] + 1];
  for (int64_t r = 0; r < rows; ++r) b.first[r + 1] += b.first[r];
  std::vector<int64_t> fill(b.first.begin(), b.first.end() - 1);
  for (int64_t k = 0; k < m; ++k) b.order[fill[spans[3 * k]]++] = k;
  for (int64_t r = 0; r < rows; ++r) {  // by start within a row (a few spans each: insertion sort)
    for (int64_t j = b.first[r] + 1; j < b.first[r + 1]; ++j) {
      const int64_t k = b.order[j];
      int64_t i = j;
      for (; i > b.first[r] && spans[3 * b.order[i - 1] + 1] > spans[3 * k + 1]; --i) b.order[i] = b.order[i - 1];
      b.order[i] = k;
    }
  }
  return b;
}

void broadcast_rows(const double* row_values, const uint8_t* mask, int64_t rows, int64_t cols, float* out) {
  const RowWriter w(rows * cols * 4);
  parallel_for(rows, row_grain(cols), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) w.masked(to_float(row_values[r]), mask + r * cols, out + r * cols, cols);
    w.done();
  });
}

// One pass per row: zeros between the spans (unless out arrived zeroed), the value on each.
void write_spans(const double* values, const int32_t* spans, int64_t m, int64_t rows, int64_t cols, bool zero_first,
                 float* out) {
  const SpansByRow b = spans_by_row(spans, m, rows);
  const RowWriter w(rows * cols * 4);
  parallel_for(rows, row_grain(cols), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      float* o = out + r * cols;
      int64_t pos = 0;
      for (int64_t j = b.first[r]; j < b.first[r + 1]; ++j) {
        const int64_t k = b.order[j], s = spans[3 * k + 1], e = spans[3 * k + 2];
        if (zero_first) w.fill(0.0f, o + pos, s - pos);
        w.fill(to_float(values[k]), o + s, e - s);
        pos = e;
      }
      if (zero_first) w.fill(0.0f, o + pos, cols - pos);
    }
    w.done();
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

namespace {

// Row r of the three results: outcome o and final o + alpha*0 on the mask tokens of the whole
// row, memory zeros (unless it arrived zeroed), then each span k's memory v_k and final
// o + alpha*v_k over it. Whole rows rather than the segments between spans: the writes run at
// full vector width, and the spans (a few % of the row) are written twice. The sums are those of
// the separate path (float operands, double arithmetic, one rounding), so -0 and NaN come out as
// there too.
void stage_row(const AdvantageBatch& in, const AdvantageResults& out, const SpansByRow& b, const double* adv_o,
               const double* adv_m, int64_t r, const RowWriter& w) {
  const int64_t cols = in.cols, base = r * cols;
  const uint8_t* mask = in.mask + base;
  const float o = to_float(adv_o[r]);
  w.masked(o, mask, out.outcome + base, cols);
  w.masked(to_float(double(o) + in.alpha * 0.0), mask, out.final + base, cols);
  if (!out.memory_zeroed) w.fill(0.0f, out.memory + base, cols);
  for (int64_t j = b.first[r]; j < b.first[r + 1]; ++j) {
    const int64_t k = b.order[j], s = in.spans[3 * k + 1], e = in.spans[3 * k + 2];
    const float v = to_float(adv_m[k]);
    w.fill(v, out.memory + base + s, e - s);
    w.masked(to_float(double(o) + in.alpha * double(v)), mask + s, out.final + base + s, e - s);
  }
}

}  // namespace

void mempo_advantages(const AdvantageBatch& in, const AdvantageResults& out) {
  std::vector<double> adv_o(size_t(in.rows)), adv_m(size_t(in.m));
  group_normalize(in.scores, in.groups, in.rows, in.group_count, in.eps, in.norm_by_std, adv_o.data());
  group_normalize(in.mem_rewards, in.mem_groups, in.m, in.mem_group_count, in.eps, in.norm_by_std, adv_m.data());
  const SpansByRow b = spans_by_row(in.spans, in.m, in.rows);
  // The single-result grain, not a third of it: at B = 512, T = 1,024 (3 x 2 MiB) one thread took
  // 0.12-0.18 ms and two 0.42-0.70 ms with the other core busy (bench/README.md "Per-call cost").
  const RowWriter w(3 * in.rows * in.cols * 4);
  parallel_for(in.rows, row_grain(in.cols), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) stage_row(in, out, b, adv_o.data(), adv_m.data(), r, w);
    w.done();
  });
}

}  // namespace cpu
}  // namespace mempo
