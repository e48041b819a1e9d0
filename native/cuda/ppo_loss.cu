// PPO clipped surrogate + KL and d(loss)/d(logp) on the device. The token logic is a line by
// line copy of native/cpu/ppo_loss.cc (double precision, same branches and clamps); only the
// order of the final sums differs (per-block partials summed on the host in block order, so
// results are deterministic run to run).
#include <cmath>
#include <cstdint>
#include <vector>

#include "common.cuh"

namespace mempo {
namespace cuda {
namespace {

constexpr int kThreads = 256;

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

__global__ void __launch_bounds__(kThreads) ppo_kernel(const float* __restrict__ logp, const float* __restrict__ old_logp,
                                                      const float* __restrict__ adv, const uint8_t* __restrict__ mask,
                                                      const double* __restrict__ row_weight, int64_t rows, int64_t cols,
                                                      double lo, double hi, double clip_c,
                                                      const float* __restrict__ ref_logp, double kl_coef, int kl_type,
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
    if (kl_type != 0) {
      const double diff = double(logp[i]) - double(ref_logp[i]);
      double kld;
      if (kl_type == 1) {
        kld = diff;
        gk = 1.0;
      } else if (kl_type == 2) {
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

}  // namespace

PpoLossResult ppo_policy_loss(const float* logp, const float* old_logp, const float* adv, const uint8_t* mask,
                              int64_t rows, int64_t cols, double clip_low, double clip_high, double clip_c,
                              int agg_mode, const float* ref_logp, double kl_coef, int kl_type, float* grad) {
  PpoLossResult res{0.0, 0.0, 0.0, 0.0};
  if (rows == 0) return res;
  Session s;
  const size_t n = size_t(rows * cols);
  const bool with_ref = kl_type != 0 && ref_logp != nullptr;
  const unsigned grid = grid_for(int64_t(n), kThreads, s.sm_count());
  // Slots: 0 logp, 1 old, 2 adv, 3 mask, 4 ref, 5 grad, 6 per_row, 7 row_weight, 8 partials.
  s.reserve({sizeof(float) * n, sizeof(float) * n, sizeof(float) * n, n, with_ref ? sizeof(float) * n : 0,
             sizeof(float) * n, sizeof(long long) * size_t(rows), sizeof(double) * size_t(rows),
             sizeof(BlockPartial) * grid});
  cudaStream_t st = s.stream(0);
  float* d_logp = s.slot<float>(0);
  float* d_old = s.slot<float>(1);
  float* d_adv = s.slot<float>(2);
  uint8_t* d_mask = s.slot<uint8_t>(3);
  float* d_ref = s.slot<float>(4);
  float* d_grad = s.slot<float>(5);
  long long* d_per_row = s.slot<long long>(6);
  double* d_weight = s.slot<double>(7);
  BlockPartial* d_partials = s.slot<BlockPartial>(8);

  // Mask first: the row weights need its per-row counts while the other inputs upload.
  check(cudaMemcpyAsync(d_mask, mask, n, cudaMemcpyHostToDevice, st), "cudaMemcpyAsync (mask)");
  row_counts_kernel<<<grid_for(rows * 128, 128, s.sm_count()), 128, 0, st>>>(d_mask, rows, cols, d_per_row);
  check_launch("row_counts kernel launch");
  std::vector<long long> per_row(static_cast<size_t>(rows));
  check(cudaMemcpyAsync(per_row.data(), d_per_row, sizeof(long long) * size_t(rows), cudaMemcpyDeviceToHost, st),
        "cudaMemcpyAsync (row counts)");
  cudaStream_t up = s.stream(1);
  check(cudaMemcpyAsync(d_logp, logp, sizeof(float) * n, cudaMemcpyHostToDevice, up), "cudaMemcpyAsync (logp)");
  check(cudaMemcpyAsync(d_old, old_logp, sizeof(float) * n, cudaMemcpyHostToDevice, up), "cudaMemcpyAsync (oldLogp)");
  check(cudaMemcpyAsync(d_adv, adv, sizeof(float) * n, cudaMemcpyHostToDevice, up), "cudaMemcpyAsync (advantages)");
  if (with_ref) {
    check(cudaMemcpyAsync(d_ref, ref_logp, sizeof(float) * n, cudaMemcpyHostToDevice, up), "cudaMemcpyAsync (refLogp)");
  }
  check(cudaStreamSynchronize(st), "cudaStreamSynchronize");

  // Aggregation weights exactly as on the CPU: loss = sum over mask tokens of row_weight[r] * loss_t.
  int64_t tokens = 0, live_rows = 0;
  for (int64_t r = 0; r < rows; ++r) {
    tokens += per_row[r];
    live_rows += per_row[r] > 0;
  }
  std::vector<double> row_weight(size_t(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    if (per_row[r] == 0) continue;
    row_weight[r] = agg_mode == 0 ? 1.0 / double(tokens)
                    : agg_mode == 1 ? 1.0 / double(live_rows)
                                    : 1.0 / (double(live_rows) * double(per_row[r]));
  }
  check(cudaMemcpyAsync(d_weight, row_weight.data(), sizeof(double) * size_t(rows), cudaMemcpyHostToDevice, up),
        "cudaMemcpyAsync (row weights)");
  check(cudaStreamSynchronize(up), "cudaStreamSynchronize");

  ppo_kernel<<<grid, kThreads, 0, st>>>(d_logp, d_old, d_adv, d_mask, d_weight, rows, cols, 1.0 - clip_low,
                                        1.0 + clip_high, clip_c, with_ref ? d_ref : nullptr, kl_coef,
                                        with_ref ? kl_type : 0, d_grad, d_partials);
  check_launch("ppo_policy_loss kernel launch");
  std::vector<BlockPartial> partials(grid);
  check(cudaMemcpyAsync(partials.data(), d_partials, sizeof(BlockPartial) * grid, cudaMemcpyDeviceToHost, st),
        "cudaMemcpyAsync (partials)");
  check(cudaMemcpyAsync(grad, d_grad, sizeof(float) * n, cudaMemcpyDeviceToHost, st), "cudaMemcpyAsync (grad)");
  s.sync();

  double pg = 0.0, kl = 0.0, neg_kl = 0.0;
  long long clipped = 0;
  for (const BlockPartial& p : partials) {
    pg += p.pg;
    kl += p.kl;
    neg_kl += p.neg_kl;
    clipped += p.clipped;
  }
  res.loss = pg + kl_coef * kl;
  res.kl = kl;
  res.clip_frac = tokens == 0 ? 0.0 : double(clipped) / double(tokens);
  res.approx_kl = tokens == 0 ? 0.0 : -neg_kl / double(tokens);
  return res;
}

}  // namespace cuda
}  // namespace mempo
