// PPO loss kernels (see ppo_loss.cu).
// Kernels and their launch arithmetic only (no runtime API): included by the .cu file and by
// the CPU emulation test in native/cuda/emu.
#pragma once
#include <cmath>
#include <cstdint>

#include "../enums.h"
#include "device.cuh"

namespace mempo {
namespace cuda {
namespace kern {

constexpr int kPpoThreads = 256;

__device__ __forceinline__ double clampd(double v, double lo, double hi) { return v < lo ? lo : (v > hi ? hi : v); }

__global__ void row_counts_kernel(const uint8_t* __restrict__ mask, int64_t rows, int64_t cols,
                                  long long* __restrict__ per_row) {
  __shared__ long long red[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    long long c = 0;
    const uint8_t* m = mask + r * cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) c += m[j] != 0;
    c = block_sum_ll(c, red);
    if (threadIdx.x == 0) per_row[r] = c;
  }
}

struct BlockPartial {
  double pg, kl, neg_kl;
  long long clipped;
};

__global__ void __launch_bounds__(kPpoThreads) ppo_kernel(const float* __restrict__ logp, const float* __restrict__ old_logp,
                                                      const float* __restrict__ adv, const uint8_t* __restrict__ mask,
                                                      const double* __restrict__ row_weight, int64_t rows, int64_t cols,
                                                      double lo, double hi, double clip_c,
                                                      const float* __restrict__ ref_logp, double kl_coef, KlType kl_type,
                                                      float* __restrict__ grad, BlockPartial* __restrict__ partials) {
  __shared__ double red[32];
  __shared__ long long red_ll[32];
  double pg = 0.0, kl = 0.0, neg_kl = 0.0;
  long long clipped = 0;
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if (mask[i] == 0) {
      grad[i] = 0.0f;
      continue;
    }
    const double w = row_weight[i / cols];
    const double a = adv[i];
    const double raw = double(logp[i]) - double(old_logp[i]);
    const double d = clampd(raw, -20.0, 20.0);
    const double ratio = exp(d);
    const double d_ratio = raw == d ? ratio : 0.0;
    neg_kl += d;
    const double pg1 = -a * ratio;
    const double pg2 = -a * clampd(ratio, lo, hi);
    double l = pg1, g = -a * d_ratio;
    if (pg2 > pg1) {
      ++clipped;
      l = pg2;
      if (ratio < lo || ratio > hi) g = 0.0;
    }
    if (a < 0.0) {
      const double pg3 = -a * clip_c;
      if (l > pg3) {
        l = pg3;
        g = 0.0;
      }
    }
    pg += w * l;
    double gk = 0.0;
    if (kl_type != kKlNone) {
      const double diff = double(logp[i]) - double(ref_logp[i]);
      double kld;
      if (kl_type == kKlK1) {
        kld = diff;
        gk = 1.0;
      } else if (kl_type == kKlK2) {
        kld = 0.5 * diff * diff;
        gk = diff;
      } else {
        const double k_raw = -diff;
        const double k = clampd(k_raw, -20.0, 20.0);
        const double e = exp(k);
        const double v = e - k - 1.0;
        kld = v > 10.0 ? 10.0 : v;
        gk = (v > 10.0 || k != k_raw) ? 0.0 : 1.0 - e;
      }
      kl += w * kld;
    }
    grad[i] = float(w * (g + kl_coef * gk));
  }
  pg = block_sum(pg, red);
  kl = block_sum(kl, red);
  neg_kl = block_sum(neg_kl, red);
  clipped = block_sum_ll(clipped, red_ll);
  if (threadIdx.x == 0) partials[blockIdx.x] = BlockPartial{pg, kl, neg_kl, clipped};
}

// Aggregation weights exactly as on the CPU (native/cpu/ppo_loss.cc): loss = sum over mask
// tokens of row_weight[r] * loss_t; global_norm > 0 replaces this call's token or sequence
// count (docs/algorithm.md §6). Host code. Returns the masked token count in *tokens.
inline void row_weights(const long long* per_row, int64_t rows, AggMode agg_mode, double global_norm,
                        double* row_weight, int64_t* tokens) {
  int64_t tok = 0, live_rows = 0;
  for (int64_t r = 0; r < rows; ++r) {
    tok += per_row[r];
    live_rows += per_row[r] > 0;
  }
  const double norm = global_norm > 0.0 ? global_norm : double(agg_mode == kAggTokenMean ? tok : live_rows);
  for (int64_t r = 0; r < rows; ++r) {
    row_weight[r] = 0.0;
    if (per_row[r] == 0) continue;
    row_weight[r] = agg_mode == kAggSeqMeanTokenMean ? 1.0 / (norm * double(per_row[r])) : 1.0 / norm;
  }
  *tokens = tok;
}

}  // namespace kern
}  // namespace cuda
}  // namespace mempo
