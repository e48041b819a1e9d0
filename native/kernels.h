// The entry points of mempo's ops, declared once for both implementations: native/cpu/<op>.cc
// defines them in mempo::cpu, native/cuda/<op>.cu in mempo::cuda (CUDA builds only), with the
// same results within 1e-5 relative. Plain C++ over host pointers (the CUDA twins copy to the
// device and back), no Node-API: native/napi checks the shapes and calls one of the two through
// MEMPO_DISPATCH (native/napi/dispatch.h); these functions trust their arguments.
#pragma once
#include <cstddef>
#include <cstdint>

#include "enums.h"

namespace mempo {

struct PpoLossResult {
  double loss, clip_frac, approx_kl, kl;
};

// mempo_advantages' arguments: a batch of `rows` trajectories (scores, groups, mask [rows, cols])
// and its m memory rewards with their groups and spans (row, start, end), as the two advantages.
struct AdvantageBatch {
  const double* scores;
  const int32_t* groups;
  int32_t group_count;
  const uint8_t* mask;
  int64_t rows, cols;
  const double* mem_rewards;
  const int32_t* mem_groups;
  int32_t mem_group_count;
  const int32_t* spans;
  int64_t m;
  double eps;
  bool norm_by_std;
  double alpha;
};

// Its three [rows, cols] results; memory_zeroed: memory arrives as zeros (as out_zeroed below).
struct AdvantageResults {
  float* outcome;
  float* memory;
  float* final;
  bool memory_zeroed;
};

}  // namespace mempo

// One list, expanded in both namespaces below, so the CPU and CUDA entry points cannot drift.
//
// gather_log_probs (gather_logprobs): out[r] = log_softmax(logits[r, :])[targets[r]]. NaN or
//   +inf anywhere in the row, or a row of only -inf, gives NaN; a -inf target logit gives -inf
//   (torch.log_softmax's rules).
// answer_probability: out[r] = exp(mean of logp[r, a] over a with mask != 0 and logp > threshold),
//   0 if none is kept (docs/algorithm.md §4).
// outcome_advantage (advantage): scores normalised within their group (mean, unbiased std,
//   singleton -> mean 0 std 1), broadcast over the row's mask tokens into out[rows, cols] (§5).
// memory_advantage (advantage): rewards normalised the same way, written over each span
//   (row, start, end) of out[rows, cols], 0 elsewhere. Spans are in bounds and do not overlap
//   within a row. out_zeroed: out arrives as zeros (else the CPU clears it; CUDA writes it all).
// mempo_advantages (advantage): outcome_advantage, memory_advantage and the final advantage
//   outcome + alpha * memory on mask tokens (0 elsewhere) in one call, each result written once:
//   the same values as the three separate steps, bit for bit on the CPU (§5).
// ppo_policy_loss (ppo_loss): verl's clipped PPO surrogate with dual clip, aggregated by
//   agg_mode, plus kl_coef * KL(kl_type) when ref_logp is given; d(loss)/d(logp) into grad (§6).
//   global_norm > 0: the mini-batch's count to divide by (mask tokens for token-mean, sequences
//   with a mask token for the seq-mean modes) instead of this call's; 0: this call's own.
#define MEMPO_DECLARE_OPS                                                                                          \
  void gather_log_probs(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab, float* out);   \
  void answer_probability(const float* logp, const uint8_t* mask, int64_t rows, int64_t cols, double threshold,  \
                          float* out);                                                                            \
  void outcome_advantage(const double* scores, const int32_t* groups, int64_t rows, int32_t group_count,         \
                         double eps, bool norm_by_std, const uint8_t* mask, int64_t cols, float* out);            \
  void memory_advantage(const double* rewards, const int32_t* groups, int64_t m, int32_t group_count, double eps, \
                        bool norm_by_std, const int32_t* spans, int64_t rows, int64_t cols, bool out_zeroed,      \
                        float* out);                                                                              \
  void mempo_advantages(const AdvantageBatch& batch, const AdvantageResults& out);                               \
  PpoLossResult ppo_policy_loss(const float* logp, const float* old_logp, const float* adv, const uint8_t* mask,  \
                                int64_t rows, int64_t cols, double clip_low, double clip_high, double clip_c,     \
                                AggMode agg_mode, const float* ref_logp, double kl_coef, KlType kl_type,          \
                                double global_norm, float* grad);

namespace mempo {
namespace cpu {
MEMPO_DECLARE_OPS
}  // namespace cpu
namespace cuda {
MEMPO_DECLARE_OPS
}  // namespace cuda
}  // namespace mempo

#undef MEMPO_DECLARE_OPS
