// PPO clipped surrogate (verl compute_policy_loss + agg_loss + kl_penalty) and its gradient
// with respect to logp, rows split across threads: AVX2 eight tokens at a time when there is
// no KL term, else token by token in double precision.
#include <cmath>
#include <limits>
#include <vector>

#include "../kernels.h"
#include "parallel.h"
#include "simd.h"

namespace mempo {
namespace cpu {
namespace {

struct Partial {
  double pg = 0, kl = 0, neg_kl = 0;
  int64_t clipped = 0;
  char pad[32];  // keep workers' partials on separate cache lines
};

inline double clampd(double v, double lo, double hi) { return v < lo ? lo : (v > hi ? hi : v); }

struct TokenParams {
  double lo, hi, clip_c, kl_coef;
  KlType kl_type;
};

// One token in double precision: the reference path (KL terms, tails, CPUs without AVX2).
inline void token_scalar(const float* logp, const float* old_logp, const float* adv, const uint8_t* mask,
                         const float* ref_logp, int64_t i, double w, const TokenParams& tp, float* grad, Partial& p) {
  if (mask[i] == 0) {
    grad[i] = 0.0f;
    return;
  }
  const double a = adv[i];
  const double raw = double(logp[i]) - double(old_logp[i]);
  const double d = clampd(raw, -20.0, 20.0);
  const double ratio = std::exp(d);
  const double d_ratio = raw == d ? ratio : 0.0;
  p.neg_kl += d;
  const double pg1 = -a * ratio;
  const double pg2 = -a * clampd(ratio, tp.lo, tp.hi);
  double l = pg1, g = -a * d_ratio;
  if (pg2 > pg1) {
    ++p.clipped;
    l = pg2;
    if (ratio < tp.lo || ratio > tp.hi) g = 0.0;
  }
  if (a < 0.0) {
    const double pg3 = -a * tp.clip_c;
    if (l > pg3) {
      l = pg3;
      g = 0.0;
    }
  }
  p.pg += w * l;
  double gk = 0.0;
  if (tp.kl_type != kKlNone) {
    const double diff = double(logp[i]) - double(ref_logp[i]);
    double kld;
    if (tp.kl_type == kKlK1) {
      kld = diff;
      gk = 1.0;
    } else if (tp.kl_type == kKlK2) {
      kld = 0.5 * diff * diff;
      gk = diff;
    } else {
      const double k_raw = -diff;
      const double k = clampd(k_raw, -20.0, 20.0);
      const double e = std::exp(k);
      const double v = e - k - 1.0;
      kld = v > 10.0 ? 10.0 : v;
      gk = (v > 10.0 || k != k_raw) ? 0.0 : 1.0 - e;
    }
    p.kl += w * kld;
  }
  grad[i] = static_cast<float>(w * (g + tp.kl_coef * gk));
}

#if MEMPO_X86
// Lanes of x that are neither NaN nor infinite.
MEMPO_AVX2_TARGET inline __m256 finite_ps(__m256 x) {
  const __m256 abs = _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
  return _mm256_cmp_ps(abs, _mm256_set1_ps(std::numeric_limits<float>::infinity()), _CMP_LT_OQ);
}

// Eight tokens at a time in float (exp relative error < 2e-7), sums accumulated in double.
// Handles [b, b + 8k) of a row and returns where the scalar tail starts. KL terms stay scalar.
// A block with a NaN or infinite input, or a term that overflows float, is redone by
// token_scalar: min/max would turn a NaN into a clamp bound, and double does not overflow
// where float does, so every path gives the JS twin's result (NaN propagates, as in torch).
MEMPO_AVX2_TARGET int64_t row_avx2(const float* logp, const float* old_logp, const float* adv, const uint8_t* mask,
                                   int64_t b, int64_t e, double w, const TokenParams& tp, float* grad, Partial& p) {
  const __m256 zero = _mm256_setzero_ps(), lo = _mm256_set1_ps(float(tp.lo)), hi = _mm256_set1_ps(float(tp.hi));
  const __m256 lim_lo = _mm256_set1_ps(-20.0f), lim_hi = _mm256_set1_ps(20.0f);
  const __m256 clip_c = _mm256_set1_ps(float(tp.clip_c)), wv = _mm256_set1_ps(float(w));
  __m256d pg_acc = _mm256_setzero_pd(), kl_acc = _mm256_setzero_pd();
  int64_t clipped = 0;
  int64_t i = b;
  for (; i + 8 <= e; i += 8) {
    const __m128i mb = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mask + i));
    const __m256 live = _mm256_cmp_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mb)), zero, _CMP_NEQ_OQ);
    const __m256 a = _mm256_loadu_ps(adv + i);
    const __m256 raw = _mm256_sub_ps(_mm256_loadu_ps(logp + i), _mm256_loadu_ps(old_logp + i));
    const __m256 d = _mm256_min_ps(_mm256_max_ps(raw, lim_lo), lim_hi);
    const __m256 ratio = exp256_ps(d);
    const __m256 d_ratio = _mm256_and_ps(ratio, _mm256_cmp_ps(raw, d, _CMP_EQ_OQ));
    const __m256 neg_a = _mm256_sub_ps(zero, a);
    const __m256 pg1 = _mm256_mul_ps(neg_a, ratio);
    const __m256 pg2 = _mm256_mul_ps(neg_a, _mm256_min_ps(_mm256_max_ps(ratio, lo), hi));
    const __m256 inside = _mm256_and_ps(_mm256_cmp_ps(ratio, lo, _CMP_GE_OQ), _mm256_cmp_ps(ratio, hi, _CMP_LE_OQ));
    const __m256 took_clip = _mm256_cmp_ps(pg2, pg1, _CMP_GT_OQ);
    __m256 l = _mm256_blendv_ps(pg1, pg2, took_clip);
    __m256 g = _mm256_mul_ps(neg_a, d_ratio);
    g = _mm256_andnot_ps(_mm256_andnot_ps(inside, took_clip), g);  // clipped and outside: no gradient
    const __m256 pg3 = _mm256_mul_ps(neg_a, clip_c);
    const __m256 dual = _mm256_and_ps(_mm256_cmp_ps(a, zero, _CMP_LT_OQ), _mm256_cmp_ps(l, pg3, _CMP_GT_OQ));
    l = _mm256_blendv_ps(l, pg3, dual);
    g = _mm256_andnot_ps(dual, g);
    const __m256 ok = _mm256_and_ps(_mm256_and_ps(finite_ps(raw), finite_ps(a)), _mm256_and_ps(finite_ps(l), finite_ps(g)));
    if (_mm256_movemask_ps(_mm256_andnot_ps(ok, live)) != 0) {
      for (int64_t j = i; j < i + 8; ++j) token_scalar(logp, old_logp, adv, mask, nullptr, j, w, tp, grad, p);
      continue;
    }
    l = _mm256_and_ps(l, live);
    g = _mm256_and_ps(_mm256_mul_ps(g, wv), live);
    _mm256_storeu_ps(grad + i, g);
    pg_acc = _mm256_add_pd(pg_acc, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(l)),
                                                 _mm256_cvtps_pd(_mm256_extractf128_ps(l, 1))));
    const __m256 dm = _mm256_and_ps(d, live);
    kl_acc = _mm256_add_pd(kl_acc, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(dm)),
                                                 _mm256_cvtps_pd(_mm256_extractf128_ps(dm, 1))));
    clipped += __builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(_mm256_and_ps(took_clip, live))));
  }
  alignas(32) double tmp[4];
  _mm256_store_pd(tmp, pg_acc);
  p.pg += w * (tmp[0] + tmp[1] + tmp[2] + tmp[3]);
  _mm256_store_pd(tmp, kl_acc);
  p.neg_kl += tmp[0] + tmp[1] + tmp[2] + tmp[3];
  p.clipped += clipped;
  return i;
}
#endif

}  // namespace

PpoLossResult ppo_policy_loss(const float* logp, const float* old_logp, const float* adv, const uint8_t* mask,
                              int64_t rows, int64_t cols, double clip_low, double clip_high, double clip_c,
                              AggMode agg_mode, const float* ref_logp, double kl_coef, KlType kl_type,
                              double global_norm, float* grad) {
  // Aggregation weights: loss = sum over mask tokens of row_weight[r] * loss_t. A global_norm
  // replaces this call's token or sequence count (docs/algorithm.md §6, across micro-batches).
  std::vector<int64_t> per_row(rows, 0);
  // Counting is cheap (~1M mask bytes per 50 µs, a pool worker's wake-up): threads only for large batches.
  parallel_for(rows, std::max<int64_t>(1, (int64_t{1} << 20) / cols), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t c = 0;
      const uint8_t* m = mask + r * cols;
      for (int64_t j = 0; j < cols; ++j) c += m[j] != 0;
      per_row[r] = c;
    }
  });
  int64_t tokens = 0, live_rows = 0;
  for (int64_t r = 0; r < rows; ++r) {
    tokens += per_row[r];
    live_rows += per_row[r] > 0;
  }
  const double norm = global_norm > 0.0 ? global_norm : double(agg_mode == kAggTokenMean ? tokens : live_rows);
  std::vector<double> row_weight(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    if (per_row[r] == 0) continue;
    row_weight[r] = agg_mode == kAggSeqMeanTokenMean ? 1.0 / (norm * double(per_row[r])) : 1.0 / norm;
  }

  const TokenParams tp{1.0 - clip_low, 1.0 + clip_high, clip_c, kl_coef, kl_type};
  [[maybe_unused]] const bool avx2 = cpu_has_avx2() && kl_type == kKlNone;  // read only on x86
  std::vector<Partial> partial(configured_threads());
  // 64k tokens (~130 µs) per thread at least: well above a worker's ~50 µs wake-up.
  parallel_for(rows, std::max<int64_t>(1, (int64_t{1} << 16) / cols), [&](int64_t r0, int64_t r1, int worker) {
    Partial p;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r * cols, e = b + cols;
#if MEMPO_X86
      const int64_t done = avx2 ? row_avx2(logp, old_logp, adv, mask, b, e, row_weight[r], tp, grad, p) : b;
#else
      const int64_t done = b;
#endif
      for (int64_t i = done; i < e; ++i) token_scalar(logp, old_logp, adv, mask, ref_logp, i, row_weight[r], tp, grad, p);
    }
    partial[worker] = p;
  });
  Partial total;
  for (const Partial& p : partial) {
    total.pg += p.pg;
    total.kl += p.kl;
    total.neg_kl += p.neg_kl;
    total.clipped += p.clipped;
  }
  PpoLossResult res;
  res.loss = total.pg + kl_coef * total.kl;
  res.kl = total.kl;
  res.clip_frac = tokens == 0 ? 0.0 : double(total.clipped) / double(tokens);
  res.approx_kl = tokens == 0 ? 0.0 : (0.0 - total.neg_kl) / double(tokens);  // +0, not -0
  return res;
}

}  // namespace cpu
}  // namespace mempo
