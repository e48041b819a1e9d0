// CPU kernels of mempo. Plain C++ over raw pointers: no Node-API here, so the CUDA sources
// beside them (native/cuda) and the tests can share the same contracts. Shapes are checked by
// the caller (native/binding.cc); these functions trust them.
#pragma once
#include <cstddef>
#include <cstdint>

namespace mempo {

// out[r] = log_softmax(logits[r, :])[targets[r]]; one pass over each row (online max/sum).
// Non-finite rules (same as torch.log_softmax): NaN or +inf anywhere in the row, or a row of
// only -inf, gives NaN; a -inf target logit gives -inf.
void gather_log_probs(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab, float* out);

// out[r] = exp(mean of logp[r, a] over a with mask != 0 and logp > threshold), 0 if none kept.
void answer_probability(const float* logp, const uint8_t* mask, int64_t rows, int64_t cols, double threshold,
                        float* out);

// values[i] normalised within its group (mean, unbiased std, singleton -> mean 0 std 1).
void group_normalize(const double* values, const int32_t* groups, int64_t n, int32_t group_count, double eps,
                     bool norm_by_std, double* out);

// out[r, c] = row_values[r] where mask[r, c] != 0, else 0.
void broadcast_rows(const double* row_values, const uint8_t* mask, int64_t rows, int64_t cols, float* out);

// out[row, start:end] = values[m] for each span m = (row, start, end), 0 elsewhere: with
// zero_first the rows are cleared first, else out must arrive zeroed.
void write_spans(const double* values, const int32_t* spans, int64_t m, int64_t rows, int64_t cols, bool zero_first,
                 float* out);

struct PpoLossResult {
  double loss, clip_frac, approx_kl, kl;
};

// verl-compatible clipped PPO surrogate with dual clip, aggregation modes
// (0 token-mean, 1 seq-mean-token-sum, 2 seq-mean-token-mean) and KL (0 none, 1 k1, 2 k2,
// 3 k3/low_var_kl). Writes d(loss)/d(logp) into grad.
PpoLossResult ppo_policy_loss(const float* logp, const float* old_logp, const float* adv, const uint8_t* mask,
                              int64_t rows, int64_t cols, double clip_low, double clip_high, double clip_c,
                              int agg_mode, const float* ref_logp, double kl_coef, int kl_type, float* grad);

// Seconds for `repeats` sequential read passes over n floats (the machine's read bandwidth).
double read_bandwidth_seconds(const float* data, int64_t n, int repeats);

// Which SIMD path the kernels use on this CPU ("avx2" or "scalar") and the thread count.
const char* simd_path();
int thread_count();

}  // namespace mempo
