// PPO clipped surrogate + KL and d(loss)/d(logp) on the device. The token logic is a line by
// line copy of native/cpu/ppo_loss.cc (double precision, same branches and clamps); only the
// order of the final sums differs (per-block partials summed on the host in block order, so
// results are deterministic run to run).
#include <cmath>
#include <cstdint>
#include <vector>

#include "common.cuh"
#include "ppo_loss_kernels.cuh"

namespace mempo {
namespace cuda {

using namespace kern;

PpoLossResult ppo_policy_loss(const float* logp, const float* old_logp, const float* adv, const uint8_t* mask,
                              int64_t rows, int64_t cols, double clip_low, double clip_high, double clip_c,
                              AggMode agg_mode, const float* ref_logp, double kl_coef, KlType kl_type,
                              double global_norm, float* grad) {
  PpoLossResult res{0.0, 0.0, 0.0, 0.0};
  if (rows == 0) return res;
  Session s;
  const size_t n = size_t(rows * cols);
  const bool with_ref = kl_type != kKlNone && ref_logp != nullptr;
  const unsigned grid = grid_for(int64_t(n), kPpoThreads, s.sm_count());
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
  MEMPO_LAUNCH(row_counts_kernel, grid_for(rows * 128, 128, s.sm_count()), 128, st, d_mask, rows, cols, d_per_row);
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

  int64_t tokens = 0;
  std::vector<double> row_weight(static_cast<size_t>(rows), 0.0);
  row_weights(per_row.data(), rows, agg_mode, global_norm, row_weight.data(), &tokens);
  check(cudaMemcpyAsync(d_weight, row_weight.data(), sizeof(double) * size_t(rows), cudaMemcpyHostToDevice, up),
        "cudaMemcpyAsync (row weights)");
  check(cudaStreamSynchronize(up), "cudaStreamSynchronize");

  MEMPO_LAUNCH(ppo_kernel, grid, kPpoThreads, st, d_logp, d_old, d_adv, d_mask, d_weight, rows, cols, 1.0 - clip_low,
               1.0 + clip_high, clip_c, with_ref ? d_ref : nullptr, kl_coef, with_ref ? kl_type : kKlNone, d_grad,
               d_partials);
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
  res.approx_kl = tokens == 0 ? 0.0 : (0.0 - neg_kl) / double(tokens);  // +0, not -0 (as the CPU)
  return res;
}

}  // namespace cuda
}  // namespace mempo
