// log_softmax gather over large vocabularies (docs/algorithm.md §4: the scorer's log-probs).
// Each row is read from memory once: it is walked in L1-sized blocks, first for the block max
// (rescaling the running sum when the max grows), then for the sum of exp(x - max) while the
// block is still in L1, prefetching the next block meanwhile so that the memory reads overlap
// the exp work. Paths: AVX-512 (F/BW/DQ/VL), AVX2+FMA, scalar, chosen at run time (simd.h).
// Rows are split across threads; with few rows, each row's vocabulary is too (merged states).
#include <cmath>
#include <limits>
#include <vector>

#include "../kernels.h"
#include "parallel.h"
#include "simd.h"

namespace mempo {
namespace cpu {
namespace {

constexpr int64_t kBlock = 2048;          // floats: 8 KiB, well inside L1d (with the next one prefetched)
constexpr int64_t kMinSegment = 1 << 15;  // floats: the smallest slice of a row given to a worker
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// What a slice of a row contributes: its max, sum of exp(x - max), whether it held a NaN.
struct RowState {
  float max = -kInf;
  double sum = 0.0;
  bool nan = false;
};

// Raise the running max to block_max, rescaling the sum accumulated so far.
inline void raise_max(RowState& st, float block_max) {
  if (block_max > st.max) {
    st.sum = st.max == -kInf ? 0.0 : st.sum * std::exp(double(st.max) - double(block_max));
    st.max = block_max;
  }
}

// The state of two slices of one row; a +inf max stays +inf (the row is NaN either way).
inline RowState merge(RowState a, const RowState& b) {
  a.nan = a.nan || b.nan;
  if (b.max == -kInf) return a;
  raise_max(a, b.max);
  a.sum += b.max == a.max ? b.sum : b.sum * std::exp(double(b.max) - double(a.max));
  return a;
}

inline float finish(const RowState& st, float target_logit) {
  if (st.nan || std::isinf(st.max)) return static_cast<float>(kNaN);
  return static_cast<float>(double(target_logit) - double(st.max) - std::log(st.sum));
}

// One block's passes. `next`/`ahead`: the following block, to prefetch during the exp pass.
struct Scalar {
  static float max(const float* x, int64_t n, bool* nan) {
    float bm = -kInf;
    for (int64_t i = 0; i < n; ++i) {
      if (x[i] != x[i]) *nan = true;
      bm = x[i] > bm ? x[i] : bm;
    }
    return bm;
  }
  static double sum(const float* x, int64_t n, float mx, const float*, int64_t) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += std::exp(double(x[i]) - double(mx));
    return s;
  }
};

#if MEMPO_X86
struct Avx2 {
  MEMPO_AVX2_TARGET static float max(const float* x, int64_t n, bool* nan) {
    const __m256 neg_inf = _mm256_set1_ps(-kInf);
    const int64_t n16 = n & ~int64_t{15};
    __m256 m0 = neg_inf, m1 = neg_inf, bad = _mm256_setzero_ps();
    for (int64_t i = 0; i < n16; i += 16) {
      __m256 a = _mm256_loadu_ps(x + i), c = _mm256_loadu_ps(x + i + 8);
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, c, _CMP_UNORD_Q));
      m0 = _mm256_max_ps(m0, a);
      m1 = _mm256_max_ps(m1, c);
    }
    if (_mm256_movemask_ps(bad)) *nan = true;
    float bm = hmax256(_mm256_max_ps(m0, m1));
    for (int64_t i = n16; i < n; ++i) {
      if (x[i] != x[i]) *nan = true;
      bm = x[i] > bm ? x[i] : bm;
    }
    return bm;
  }
  MEMPO_AVX2_TARGET static double sum(const float* x, int64_t n, float max, const float* next, int64_t ahead) {
    const __m256 mx = _mm256_set1_ps(max);
    const int64_t n16 = n & ~int64_t{15};
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    for (int64_t i = 0; i < n16; i += 16) {
      if (i < ahead) _mm_prefetch(reinterpret_cast<const char*>(next + i), _MM_HINT_T0);
      s0 = _mm256_add_ps(s0, exp256_nonpos_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mx)));
      s1 = _mm256_add_ps(s1, exp256_nonpos_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mx)));
    }
    double s = hsum256_pd(_mm256_add_ps(s0, s1));
    for (int64_t i = n16; i < n; ++i) s += std::exp(double(x[i]) - double(max));
    return s;
  }
};

// Tails are masked loads (no scalar loop): -inf fill for the max, masked adds for the sum.
struct Avx512 {
  MEMPO_AVX512_TARGET static __mmask16 tail(int64_t left) {
    return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
  }
  MEMPO_AVX512_TARGET static float max(const float* x, int64_t n, bool* nan) {
    const __m512 neg_inf = _mm512_set1_ps(-kInf);
    __m512 m0 = neg_inf, m1 = neg_inf;
    __mmask16 bad = 0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      __m512 a = _mm512_loadu_ps(x + i), c = _mm512_loadu_ps(x + i + 16);
      bad |= _mm512_cmp_ps_mask(a, c, _CMP_UNORD_Q);
      m0 = _mm512_max_ps(m0, a);
      m1 = _mm512_max_ps(m1, c);
    }
    for (; i < n; i += 16) {
      __m512 a = _mm512_mask_loadu_ps(neg_inf, tail(n - i), x + i);
      bad |= _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
      m0 = _mm512_max_ps(m0, a);
    }
    if (bad) *nan = true;
    return _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
  }
  MEMPO_AVX512_TARGET static double sum(const float* x, int64_t n, float max, const float* next, int64_t ahead) {
    const __m512 mx = _mm512_set1_ps(max);
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      if (i < ahead) {  // one 64-byte line per 16 floats
        _mm_prefetch(reinterpret_cast<const char*>(next + i), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(next + i + 16), _MM_HINT_T0);
      }
      s0 = _mm512_add_ps(s0, exp512_nonpos_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), mx)));
      s1 = _mm512_add_ps(s1, exp512_nonpos_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), mx)));
    }
    for (; i < n; i += 16) {
      const __mmask16 k = tail(n - i);
      s0 = _mm512_mask_add_ps(s0, k, s0, exp512_nonpos_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), mx)));
    }
    return hsum512_pd(_mm512_add_ps(s0, s1));
  }
};
#endif

// The state of n logits of one row, block by block.
template <typename K>
RowState walk(const float* x, int64_t n) {
  RowState st;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    bool nan = false;
    const float bm = K::max(x + b, e - b, &nan);
    st.nan = st.nan || nan;
    raise_max(st, bm);
    if (st.nan || std::isinf(st.max)) {
      if (st.nan || st.max > 0) break;  // NaN / +inf decide the row; all -inf so far: keep going
      continue;
    }
    st.sum += K::sum(x + b, e - b, st.max, x + e, std::min(n - e, kBlock));
  }
  return st;
}

enum class Path { kScalar, kAvx2, kAvx512 };

Path best_path() {
  if (cpu_has_avx512()) return Path::kAvx512;
  return cpu_has_avx2() ? Path::kAvx2 : Path::kScalar;
}

RowState walk_on(Path path, const float* x, int64_t n) {
#if MEMPO_X86
  if (path == Path::kAvx512) return walk<Avx512>(x, n);
  if (path == Path::kAvx2) return walk<Avx2>(x, n);
#endif
  (void)path;
  return walk<Scalar>(x, n);
}

}  // namespace

void gather_log_probs(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab, float* out) {
  if (rows <= 0) return;
  const Path path = best_path();
  // Fewer rows than ~8 per worker: cut each row into `parts` slices (≥ kMinSegment floats,
  // a multiple of 16) so that every worker gets an even share.
  const int64_t want = 8 * int64_t{configured_threads()};
  int64_t parts = rows >= want ? 1 : std::min((want + rows - 1) / rows, std::max<int64_t>(1, vocab / kMinSegment));
  const int64_t seg = ((vocab + parts - 1) / parts + 15) & ~int64_t{15};
  parts = (vocab + seg - 1) / seg;
  std::vector<RowState> states(static_cast<size_t>(rows * parts));
  // A slice of 150k floats is ~0.6 MB, enough to amortise a thread.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 18) / seg);
  parallel_for(rows * parts, grain, [&](int64_t s0, int64_t s1, int) {
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t r = s / parts, b = (s % parts) * seg;
      states[s] = walk_on(path, logits + r * vocab + b, std::min(seg, vocab - b));
    }
  });
  for (int64_t r = 0; r < rows; ++r) {
    RowState st = states[r * parts];
    for (int64_t p = 1; p < parts; ++p) st = merge(st, states[r * parts + p]);
    out[r] = finish(st, logits[r * vocab + targets[r]]);
  }
}

}  // namespace cpu
}  // namespace mempo
