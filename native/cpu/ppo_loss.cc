// PPO clipped surrogate (verl compute_policy_loss + agg_loss + kl_penalty) and its gradient
// with respect to logp, token by token in double precision, rows split across threads.
#include <cmath>
#include <vector>

#include "kernels.h"
#include "parallel.h"

namespace mempo {
namespace {

struct Partial {
  double pg = 0, kl = 0, neg_kl = 0;
  int64_t clipped = 0;
  char pad[32];  // keep workers' partials on separate cache lines
};

inline double clampd(double v, double lo, double hi) { return v < lo ? lo : (v > hi ? hi : v); }

}  // namespace

PpoLossResult ppo_policy_loss(const float* logp, const float* old_logp, const float* adv, const uint8_t* mask,
                              int64_t rows, int64_t cols, double clip_low, double clip_high, double clip_c,
                              int agg_mode, const float* ref_logp, double kl_coef, int kl_type, float* grad) {
  // Aggregation weights: loss = sum over mask tokens of row_weight[r] * loss_t.
  std::vector<int64_t> per_row(rows, 0);
  parallel_for(rows, std::max<int64_t>(1, (int64_t{1} << 18) / cols), [&](int64_t r0, int64_t r1, int) {
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
  std::vector<double> row_weight(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    if (per_row[r] == 0) continue;
    row_weight[r] = agg_mode == 0 ? 1.0 / double(tokens)
                    : agg_mode == 1 ? 1.0 / double(live_rows)
                                    : 1.0 / (double(live_rows) * double(per_row[r]));
  }

  const double lo = 1.0 - clip_low, hi = 1.0 + clip_high;
  std::vector<Partial> partial(configured_threads());
  parallel_for(rows, std::max<int64_t>(1, (int64_t{1} << 16) / cols), [&](int64_t r0, int64_t r1, int worker) {
    Partial p;
    for (int64_t r = r0; r < r1; ++r) {
      const double w = row_weight[r];
      for (int64_t i = r * cols; i < (r + 1) * cols; ++i) {
        if (mask[i] == 0) {
          grad[i] = 0.0f;
          continue;
        }
        const double a = adv[i];
        const double raw = double(logp[i]) - double(old_logp[i]);
        const double d = clampd(raw, -20.0, 20.0);
        const double ratio = std::exp(d);
        const double d_ratio = raw == d ? ratio : 0.0;
        p.neg_kl += d;
        const double pg1 = -a * ratio;
        const double pg2 = -a * clampd(ratio, lo, hi);
        double l = pg1, g = -a * d_ratio;
        if (pg2 > pg1) {
          ++p.clipped;
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
        p.pg += w * l;
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
            const double e = std::exp(k);
            const double v = e - k - 1.0;
            kld = v > 10.0 ? 10.0 : v;
            gk = (v > 10.0 || k != k_raw) ? 0.0 : 1.0 - e;
          }
          p.kl += w * kld;
        }
        grad[i] = static_cast<float>(w * (g + kl_coef * gk));
      }
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

}  // namespace mempo
