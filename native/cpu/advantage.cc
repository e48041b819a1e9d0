// Group statistics (tiny: one value per trajectory or snapshot) and the [B, T] writes that
// dominate the cost of both advantages; the writes are split across threads by rows.
#include <cmath>
#include <algorithm>
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
template <bool kStream>
MEMPO_AVX2_TARGET inline void store8(float* o, __m256 v) {
  if (kStream) {
    _mm256_stream_ps(o, v);
  } else {
    _mm256_store_ps(o, v);
  }
}

template <bool kStream>
MEMPO_AVX2_TARGET void masked_row_avx2(float v, const uint8_t* m, float* o, int64_t n) {
  int64_t c = 0;
  for (; c < n && (reinterpret_cast<uintptr_t>(o + c) & 31) != 0; ++c) o[c] = m[c] != 0 ? v : 0.0f;
  const __m256 vv = _mm256_set1_ps(v);
  const __m256i zero = _mm256_setzero_si256();
  for (; c + 8 <= n; c += 8) {
    const __m128i mb = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(m + c));
    const __m256i is_zero = _mm256_cmpeq_epi32(_mm256_cvtepu8_epi32(mb), zero);
    store8<kStream>(o + c, _mm256_andnot_ps(_mm256_castsi256_ps(is_zero), vv));
  }
  for (; c < n; ++c) o[c] = m[c] != 0 ? v : 0.0f;
}

template <bool kStream>
MEMPO_AVX2_TARGET void fill_row_avx2(float v, float* o, int64_t n) {
  int64_t c = 0;
  for (; c < n && (reinterpret_cast<uintptr_t>(o + c) & 31) != 0; ++c) o[c] = v;
  const __m256 vv = _mm256_set1_ps(v);
  for (; c + 8 <= n; c += 8) store8<kStream>(o + c, vv);
  for (; c < n; ++c) o[c] = v;
}
#endif

// Results of more than this many bytes in all are streamed (about an L3's share per core).
constexpr int64_t kStreamBytes = int64_t{16} << 20;

struct RowWriter {
  bool avx2 = cpu_has_avx2();
  bool stream;
  explicit RowWriter(int64_t result_bytes) : stream(result_bytes > kStreamBytes) {}
  void masked(float v, const uint8_t* m, float* o, int64_t n) const {
#if MEMPO_X86
    if (avx2) return stream ? masked_row_avx2<true>(v, m, o, n) : masked_row_avx2<false>(v, m, o, n);
#endif
    masked_row_scalar(v, m, o, n);
  }
  void fill(float v, float* o, int64_t n) const {
#if MEMPO_X86
    if (avx2 && n >= 32) return stream ? fill_row_avx2<true>(v, o, n) : fill_row_avx2<false>(v, o, n);
#endif
    fill_row_scalar(v, o, n);
  }
  void done() const {  // the streaming stores of this thread are visible before it is joined
#if MEMPO_X86
    if (avx2 && stream) _mm_sfence();
#endif
  }
};

// Rows of at least 512k values per thread (~90 µs of writes here): waking a sleeping pool worker
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

// Row r of the three results, span by span: the gaps carry (outcome, final) = (o, o + alpha*0)
// on mask tokens and memory 0; span k carries memory v_k and final o + alpha*v_k. The sums are
// those of the separate path (float operands, double arithmetic, one rounding), so -0 and NaN
// come out as there too.
void stage_row(const AdvantageBatch& in, const AdvantageResults& out, const SpansByRow& b, const double* adv_o,
               const double* adv_m, int64_t r, const RowWriter& w) {
  const int64_t cols = in.cols, base = r * cols;
  const uint8_t* mask = in.mask + base;
  const float o = to_float(adv_o[r]);
  auto segment = [&](int64_t s, int64_t e, float v, bool write_memory) {
    w.masked(o, mask + s, out.outcome + base + s, e - s);
    w.masked(to_float(double(o) + in.alpha * double(v)), mask + s, out.final + base + s, e - s);
    if (write_memory) w.fill(v, out.memory + base + s, e - s);
  };
  int64_t pos = 0;
  for (int64_t j = b.first[r]; j < b.first[r + 1]; ++j) {
    const int64_t k = b.order[j], s = in.spans[3 * k + 1], e = in.spans[3 * k + 2];
    if (s > pos) segment(pos, s, 0.0f, !out.memory_zeroed);
    segment(s, e, to_float(adv_m[k]), true);
    pos = e;
  }
  if (cols > pos) segment(pos, cols, 0.0f, !out.memory_zeroed);
}

}  // namespace

void mempo_advantages(const AdvantageBatch& in, const AdvantageResults& out) {
  std::vector<double> adv_o(size_t(in.rows)), adv_m(size_t(in.m));
  group_normalize(in.scores, in.groups, in.rows, in.group_count, in.eps, in.norm_by_std, adv_o.data());
  group_normalize(in.mem_rewards, in.mem_groups, in.m, in.mem_group_count, in.eps, in.norm_by_std, adv_m.data());
  const SpansByRow b = spans_by_row(in.spans, in.m, in.rows);
  // Three results per row: a third of the single-result grain.
  const RowWriter w(3 * in.rows * in.cols * 4);
  parallel_for(in.rows, std::max<int64_t>(1, row_grain(in.cols) / 3), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) stage_row(in, out, b, adv_o.data(), adv_m.data(), r, w);
    w.done();
  });
}

}  // namespace cpu
}  // namespace mempo
