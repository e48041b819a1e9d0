// Run-time CPU dispatch: the shipped binary is built for baseline x86-64 and enters AVX2+FMA
// (or AVX-512 F/BW/DQ/VL) code only when the CPU reports it (no -march=native anywhere).
// MEMPO_SIMD=scalar|avx2|avx512, read once per process, caps the path (never above what the
// CPU has): scalar turns off every kernel's AVX2 code, avx2 the AVX-512 code (the gather, the
// advantages' row writers).
#pragma once
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#define MEMPO_X86 1
#define MEMPO_AVX2_TARGET __attribute__((target("avx2,fma")))
#define MEMPO_AVX512_TARGET __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl")))
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
// GCC 12's AVX-512 intrinsics warn about their own _mm512_undefined_* (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#else
#define MEMPO_X86 0
#define MEMPO_AVX2_TARGET
#define MEMPO_AVX512_TARGET
#endif

namespace mempo {

// 0 scalar, 1 AVX2, 2 AVX-512: the highest path MEMPO_SIMD allows (unset or unknown: all).
inline int simd_cap() {
  static const int cap = [] {
    const char* env = std::getenv("MEMPO_SIMD");
    if (env && std::strcmp(env, "scalar") == 0) return 0;
    if (env && std::strcmp(env, "avx2") == 0) return 1;
    return 2;
  }();
  return cap;
}

inline bool cpu_has_avx2() {
#if MEMPO_X86
  static const bool ok = [] {
    __builtin_cpu_init();
    return simd_cap() >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return ok;
#else
  return false;
#endif
}

// libgcc's check includes the OS saving the zmm state (XGETBV), not just the CPUID bits.
inline bool cpu_has_avx512() {
#if MEMPO_X86
  static const bool ok = [] {
    __builtin_cpu_init();
    return simd_cap() >= 2 && cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  }();
  return ok;
#else
  return false;
#endif
}

#if MEMPO_X86
// exp(x) for 8 floats, x <= 0 expected (clamped below at -87.3 so exp(-inf) -> ~1e-38, not NaN).
// Cephes-style range reduction and a degree-5 polynomial: relative error below 2e-7.
MEMPO_AVX2_TARGET inline __m256 exp256_ps(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.3f), hi = _mm256_set1_ps(88.3f);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
  __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // x - fx*ln2 in two steps for accuracy.
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = _mm256_set1_ps(1.9875691500E-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507E-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073E-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894E-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459E-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201E-1f));
  __m256 x2 = _mm256_mul_ps(x, x);
  y = _mm256_fmadd_ps(y, x2, _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

MEMPO_AVX2_TARGET inline float hmax256(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

MEMPO_AVX2_TARGET inline double hsum256_pd(__m256 v) {
  __m256d a = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

// exp(x) for x <= 0, for the log-softmax sums (exp256_ps serves any sign): the same
// reduction and accuracy (relative error below 3e-7) in fewer instructions. n = round(x·log2e)
// comes from adding 1.5·2^23 (its low mantissa bits then hold n, so bits << 23 is n's exponent
// field), the polynomial is one Horner chain of FMAs (degree 6, Taylor/Cephes coefficients).
// The clamp at -87.3 keeps exp(-inf) a normal float (~1e-38): no NaN, no denormal assists.
#define MEMPO_EXP_NONPOS(W, PS, SI)                                                        \
  x = W##_max_ps(x, W##_set1_ps(-87.3f));                                                  \
  const PS v = W##_fmadd_ps(x, W##_set1_ps(1.44269504088896341f), W##_set1_ps(12582912.0f)); \
  const PS fx = W##_sub_ps(v, W##_set1_ps(12582912.0f));                                   \
  x = W##_fnmadd_ps(fx, W##_set1_ps(0.693359375f), x);                                     \
  x = W##_fnmadd_ps(fx, W##_set1_ps(-2.12194440e-4f), x);                                  \
  PS y = W##_set1_ps(1.9875691500E-4f);                                                    \
  y = W##_fmadd_ps(y, x, W##_set1_ps(1.3981999507E-3f));                                   \
  y = W##_fmadd_ps(y, x, W##_set1_ps(8.3334519073E-3f));                                   \
  y = W##_fmadd_ps(y, x, W##_set1_ps(4.1665795894E-2f));                                   \
  y = W##_fmadd_ps(y, x, W##_set1_ps(1.6666665459E-1f));                                   \
  y = W##_fmadd_ps(y, x, W##_set1_ps(5.0000001201E-1f));                                   \
  y = W##_fmadd_ps(y, x, W##_set1_ps(1.0f));                                               \
  y = W##_fmadd_ps(y, x, W##_set1_ps(1.0f));                                               \
  return W##_castsi##SI##_ps(W##_add_epi32(W##_castps_si##SI(y), W##_slli_epi32(W##_castps_si##SI(v), 23)));

MEMPO_AVX2_TARGET inline __m256 exp256_nonpos_ps(__m256 x) { MEMPO_EXP_NONPOS(_mm256, __m256, 256) }
MEMPO_AVX512_TARGET inline __m512 exp512_nonpos_ps(__m512 x) { MEMPO_EXP_NONPOS(_mm512, __m512, 512) }
#undef MEMPO_EXP_NONPOS

// Sum of 16 floats in double (the row sums are kept in double, as on the other paths).
MEMPO_AVX512_TARGET inline double hsum512_pd(__m512 v) {
  const __m512d a = _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
  return _mm512_reduce_add_pd(a);
}
#endif

}  // namespace mempo
