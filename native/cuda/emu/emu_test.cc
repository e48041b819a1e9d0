// Runs the CUDA kernels of native/cuda under the CPU emulation (cuda_emu.h) with the same
// launch arithmetic as the .cu host code, and compares them with the CPU kernels of
// native/cpu: 1e-5 relative (+1e-5 absolute) on floats, NaN/inf positions exact. Small grids
// are used on purpose so every grid-stride loop runs more than once. No GPU needed:
//   native/cuda/emu/run.sh
#include "cuda_emu.h"
// clang-format off: the emulation must come first
#include "../advantage_kernels.cuh"
#include "../answer_probability_kernels.cuh"
#include "../gather_logprobs_kernels.cuh"
#include "../ppo_loss_kernels.cuh"
#include "../../cpu/advantage.h"
#include "../../kernels.h"
// clang-format on

#include <cstdio>
#include <limits>
#include <random>
#include <string>

using namespace mempo::cuda::kern;
using mempo::cuda::grid_for;

namespace {

int failures = 0;

bool close(double a, double b, double tol = 1e-5) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (a == b) return true;  // also equal infinities
  return std::fabs(a - b) <= tol + tol * std::fabs(b);
}

template <typename A, typename B>
void expect_close(const char* what, const A* got, const B* want, int64_t n, double tol = 1e-5) {
  for (int64_t i = 0; i < n; ++i) {
    if (!close(double(got[i]), double(want[i]), tol)) {
      std::printf("FAIL %s: [%lld] emulated %.9g vs cpu %.9g\n", what, (long long)i, double(got[i]), double(want[i]));
      ++failures;
      return;
    }
  }
  std::printf("ok   %s (%lld values)\n", what, (long long)n);
}

// ---- gather_log_probs: the launch of gather_logprobs.cu (launch()), grid optionally capped.
void emu_gather(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab, int sm_count,
                unsigned grid_cap, float* out) {
  const int chunks = chunks_for(rows, vocab, sm_count);
  const int64_t piece = piece_for(vocab, chunks);
  const int64_t total = rows * chunks;
  std::vector<Part> parts(static_cast<size_t>(total));
  const unsigned grid = unsigned(std::min<int64_t>(total, grid_cap));
  emu::launch(grid, kGatherThreads, lse_parts, logits, rows, vocab, chunks, piece, parts.data());
  emu::launch(std::min(grid_for(rows, 128, sm_count), 2u), 128, lse_finish, logits, targets, rows, vocab, chunks,
              (const Part*)parts.data(), out);
}

void test_gather(const std::string& name, int64_t rows, int64_t vocab, int sm_count, unsigned grid_cap, bool misalign,
                 bool specials, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-30.f, 30.f);
  std::vector<float> storage(size_t(rows * vocab) + 1);
  float* logits = storage.data() + (misalign ? 1 : 0);  // rows start off a 16-byte boundary
  for (int64_t i = 0; i < rows * vocab; ++i) logits[i] = u(rng);
  std::vector<int32_t> targets(static_cast<size_t>(rows));
  for (auto& t : targets) t = int32_t(rng() % uint32_t(vocab));
  const float inf = std::numeric_limits<float>::infinity();
  if (specials && rows >= 7) {
    logits[0 * vocab + vocab / 2] = std::numeric_limits<float>::quiet_NaN();  // NaN row
    logits[1 * vocab + vocab - 1] = inf;                                       // +inf row
    std::fill(logits + 2 * vocab, logits + 3 * vocab, -inf);                   // all -inf
    logits[3 * vocab + targets[3]] = -inf;                                     // -inf target
    std::fill(logits + 4 * vocab, logits + 4 * vocab + vocab / 2, -inf);       // leading -inf
    logits[5 * vocab + 3] = 1e30f;                                             // one huge logit
    logits[5 * vocab + 4] = 1e30f;
    std::fill(logits + 6 * vocab, logits + 7 * vocab, 1.5f);                   // flat row
  }
  std::vector<float> got(static_cast<size_t>(rows)), want(static_cast<size_t>(rows));
  emu_gather(logits, targets.data(), rows, vocab, sm_count, grid_cap, got.data());
  mempo::cpu::gather_log_probs(logits, targets.data(), rows, vocab, want.data());
  const int chunks = chunks_for(rows, vocab, sm_count);
  expect_close(("gather " + name + " (chunks " + std::to_string(chunks) + ")").c_str(), got.data(), want.data(), rows);
}

// ---- advantages
std::vector<double> emu_normalize(const double* values, const int32_t* groups, int64_t n, int32_t group_count,
                                  double eps, bool norm_by_std, unsigned grid_cap) {
  std::vector<int32_t> offsets, order;
  member_lists(groups, n, group_count, offsets, order);
  std::vector<double> out(size_t(n), std::numeric_limits<double>::quiet_NaN());
  emu::launch(std::min<unsigned>(unsigned(group_count), grid_cap), 128, group_normalize_kernel, values,
              (const int32_t*)order.data(), (const int32_t*)offsets.data(), group_count, eps, norm_by_std ? 1 : 0,
              out.data());
  return out;
}

void test_advantages(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  // Groups of 16, a singleton group, an empty group id, a group larger than a block (300).
  const int64_t B = 16 * 5 + 1 + 300;
  const int32_t G = 8;
  std::vector<int32_t> groups(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) groups[i] = i < 80 ? int32_t(i / 16) : (i == 80 ? 5 : 7);  // id 6 unused
  std::vector<double> scores(static_cast<size_t>(B));
  for (auto& s : scores) s = (rng() & 1) ? 1.0 : u(rng);
  for (bool norm : {true, false}) {
    const auto got = emu_normalize(scores.data(), groups.data(), B, G, 1e-6, norm, 3);
    std::vector<double> want(static_cast<size_t>(B));
    mempo::cpu::group_normalize(scores.data(), groups.data(), B, G, 1e-6, norm, want.data());
    expect_close(norm ? "group_normalize normByStd" : "group_normalize centred", got.data(), want.data(), B, 1e-9);

    // GRPO broadcast
    const int64_t T = 77;
    std::vector<uint8_t> mask(static_cast<size_t>(B * T));
    for (auto& m : mask) m = (rng() % 5) != 0;
    std::vector<float> bo(size_t(B * T), -7.f), bw(size_t(B * T));
    emu::launch(std::min(grid_for(B * T, kAdvThreads, 4), 5u), kAdvThreads, broadcast_kernel, got.data(),
                (const uint8_t*)mask.data(), B, T, bo.data());
    mempo::cpu::broadcast_rows(want.data(), mask.data(), B, T, bw.data());
    expect_close("broadcast_rows", bo.data(), bw.data(), B * T);

    // Memory advantage: up to 3 spans per row, some rows without spans.
    std::vector<int32_t> spans;
    for (int64_t r = 0; r < B; ++r) {
      if (r % 7 == 3) continue;
      spans.insert(spans.end(), {int32_t(r), 0, 5, int32_t(r), 10, 30, int32_t(r), 40, int32_t(T)});
    }
    const int64_t m = int64_t(spans.size() / 3);
    std::vector<int32_t> rg(static_cast<size_t>(m));
    std::vector<double> rewards(static_cast<size_t>(m));
    for (int64_t k = 0; k < m; ++k) {
      rg[k] = int32_t(spans[3 * k] / 16 < G ? spans[3 * k] / 16 : G - 1);
      rewards[k] = u(rng);
    }
    const auto rn = emu_normalize(rewards.data(), rg.data(), m, G, 1e-6, norm, 2);
    std::vector<double> rw(static_cast<size_t>(m));
    mempo::cpu::group_normalize(rewards.data(), rg.data(), m, G, 1e-6, norm, rw.data());
    expect_close("group_normalize (memory rewards)", rn.data(), rw.data(), m, 1e-9);
    std::vector<float> so(size_t(B * T), 0.f), sw(size_t(B * T));  // zeroed = the cudaMemsetAsync
    emu::launch(unsigned(std::min<int64_t>(m, 7)), 128, spans_kernel, rn.data(), (const int32_t*)spans.data(), m, T,
                so.data());
    mempo::cpu::write_spans(rw.data(), spans.data(), m, B, T, false, sw.data());
    expect_close("write_spans", so.data(), sw.data(), B * T);
  }
}

void test_answer_probability(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(1e-6f, 1.f);
  for (int64_t cols : {1, 16, 45}) {
    const int64_t rows = 77;
    std::vector<float> logp(static_cast<size_t>(rows * cols));
    std::vector<uint8_t> mask(static_cast<size_t>(rows * cols));
    for (auto& v : logp) v = std::log(u(rng));
    for (auto& m : mask) m = (rng() % 10) < 7;
    logp[3] = std::numeric_limits<float>::quiet_NaN();
    for (double thr : {std::log(0.5), -std::numeric_limits<double>::infinity(), -0.1}) {
      std::vector<float> got(static_cast<size_t>(rows)), want(static_cast<size_t>(rows));
      emu::launch(std::min(grid_for(rows * 32, kAnswerThreads, 4), 3u), kAnswerThreads, answer_prob_kernel,
                  (const float*)logp.data(), (const uint8_t*)mask.data(), rows, cols, thr, got.data());
      mempo::cpu::answer_probability(logp.data(), mask.data(), rows, cols, thr, want.data());
      expect_close(("answer_probability cols=" + std::to_string(cols)).c_str(), got.data(), want.data(), rows);
    }
  }
}

// Random PPO inputs: log-probs, old / reference log-probs near them, advantages, and a mask with
// `keep` of the tokens on.
void fill_ppo_inputs(std::mt19937& rng, float keep, std::vector<float>& logp, std::vector<float>& old,
                     std::vector<float>& adv, std::vector<float>& ref, std::vector<uint8_t>& mask) {
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (size_t i = 0; i < logp.size(); ++i) {
    logp[i] = -3.f * u(rng);
    old[i] = logp[i] + (u(rng) - 0.5f) * 0.8f;
    adv[i] = (u(rng) - 0.5f) * 3.f;
    ref[i] = logp[i] + (u(rng) - 0.5f) * 0.4f;
    mask[i] = u(rng) < keep;
  }
}

void test_ppo(uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t rows = 23, cols = 301, n = rows * cols;
  std::vector<float> logp(n), old(n), adv(n), ref(n), grad_got(n), grad_want(n);
  std::vector<uint8_t> mask(n);
  fill_ppo_inputs(rng, 0.8f, logp, old, adv, ref, mask);
  std::fill(mask.begin() + 5 * cols, mask.begin() + 6 * cols, 0);  // an empty row
  old[7] = logp[7] + 30.f;                                           // ratio clamp (raw < -20)
  old[8] = logp[8] - 25.f;                                           // raw > 20
  ref[9] = logp[9] + 40.f;                                           // k3 clamp
  mask[7] = mask[8] = mask[9] = 1;
  // global_norm 0 (this call's counts) and a mini-batch's larger count (docs/algorithm.md §6).
  for (int a = 0; a < 2 * mempo::kAggModeCount; ++a) {
    for (int k = 0; k < mempo::kKlTypeCount; ++k) {
      const auto agg = static_cast<mempo::AggMode>(a % mempo::kAggModeCount);
      const double global_norm = a < mempo::kAggModeCount ? 0.0 : (agg == mempo::kAggTokenMean ? 9001.0 : 37.0);
      const auto kl = static_cast<mempo::KlType>(k);
      std::vector<long long> per_row(rows);
      emu::launch(3u, 128, row_counts_kernel, (const uint8_t*)mask.data(), rows, cols, per_row.data());
      int64_t tokens = 0;
      std::vector<double> w(rows);
      row_weights(per_row.data(), rows, agg, global_norm, w.data(), &tokens);
      const unsigned grid = 5;
      std::vector<BlockPartial> parts(grid);
      emu::launch(grid, kPpoThreads, ppo_kernel, (const float*)logp.data(), (const float*)old.data(),
                  (const float*)adv.data(), (const uint8_t*)mask.data(), (const double*)w.data(), rows, cols, 0.8, 1.28,
                  3.0, kl ? (const float*)ref.data() : (const float*)nullptr, 0.05, kl, grad_got.data(), parts.data());
      double pg = 0, kls = 0, neg = 0;
      long long clipped = 0;
      for (const auto& p : parts) {
        pg += p.pg;
        kls += p.kl;
        neg += p.neg_kl;
        clipped += p.clipped;
      }
      const double loss = pg + 0.05 * kls, clip_frac = double(clipped) / double(tokens),
                   approx_kl = (0.0 - neg) / double(tokens);
      const mempo::PpoLossResult want = mempo::cpu::ppo_policy_loss(
          logp.data(), old.data(), adv.data(), mask.data(), rows, cols, 0.2, 0.28, 3.0, agg, kl ? ref.data() : nullptr,
          0.05, kl, global_norm, grad_want.data());
      const std::string tag = "ppo agg=" + std::to_string(agg) + " kl=" + std::to_string(kl) +
                              " global=" + std::to_string(int(global_norm));
      expect_close((tag + " grad").c_str(), grad_got.data(), grad_want.data(), n);
      const double got4[4] = {loss, clip_frac, approx_kl, kls}, want4[4] = {want.loss, want.clip_frac, want.approx_kl, want.kl};
      // 1e-6: without KL the CPU takes its AVX2 path (float exp, < 2e-7 relative per token).
      expect_close((tag + " loss/clipFrac/approxKl/kl").c_str(), got4, want4, 4, kl ? 1e-9 : 1e-6);
    }
  }
}

// NaN, infinities and float-overflowing terms in every input, in blocks the CPU's AVX2 body
// would take: NaN propagates on every path (torch's semantics, the JS twin's), no clamp eats it.
void test_ppo_specials(uint32_t seed) {
  std::mt19937 rng(seed);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float specials[] = {nan, inf, -inf, 3e38f, -3e38f, -0.0f};
  const int64_t rows = 7, cols = 67, n = rows * cols;
  std::vector<float> logp(n), old(n), adv(n), ref(n), grad_got(n), grad_want(n);
  std::vector<uint8_t> mask(n);
  fill_ppo_inputs(rng, 0.9f, logp, old, adv, ref, mask);
  for (int k = 0; k < 40; ++k) {  // sprinkle specials over the four inputs
    std::vector<float>* arrs[] = {&logp, &old, &adv, &ref};
    (*arrs[k % 4])[size_t(rng() % n)] = specials[rng() % 6];
  }
  adv[3 * cols + 9] = 1e30f;  // finite, but -A * ratio overflows float
  for (int k = 0; k < mempo::kKlTypeCount; ++k) {
    const auto kl = static_cast<mempo::KlType>(k);
    std::vector<long long> per_row(rows);
    emu::launch(2u, 128, row_counts_kernel, (const uint8_t*)mask.data(), rows, cols, per_row.data());
    int64_t tokens = 0;
    std::vector<double> w(rows);
    row_weights(per_row.data(), rows, mempo::kAggTokenMean, 0.0, w.data(), &tokens);
    std::vector<BlockPartial> parts(3);
    emu::launch(3u, kPpoThreads, ppo_kernel, (const float*)logp.data(), (const float*)old.data(), (const float*)adv.data(),
                (const uint8_t*)mask.data(), (const double*)w.data(), rows, cols, 0.8, 1.2, 3.0,
                kl ? (const float*)ref.data() : (const float*)nullptr, 0.05, kl, grad_got.data(), parts.data());
    double pg = 0, kls = 0, neg = 0;
    for (const auto& p : parts) pg += p.pg, kls += p.kl, neg += p.neg_kl;
    const double got2[2] = {pg + 0.05 * kls, (0.0 - neg) / double(tokens)};
    const mempo::PpoLossResult want = mempo::cpu::ppo_policy_loss(logp.data(), old.data(), adv.data(), mask.data(), rows,
                                                                  cols, 0.2, 0.2, 3.0, mempo::kAggTokenMean,
                                                                  kl ? ref.data() : nullptr, 0.05, kl, 0.0, grad_want.data());
    const double want2[2] = {want.loss, want.approx_kl};
    const std::string tag = "ppo specials kl=" + std::to_string(k);
    expect_close((tag + " grad").c_str(), grad_got.data(), grad_want.data(), n);
    expect_close((tag + " loss/approxKl").c_str(), got2, want2, 2, 1e-6);
    if (!std::isnan(want.loss)) {
      std::printf("FAIL %s: a NaN input gave the finite loss %.9g\n", tag.c_str(), want.loss);
      ++failures;
    }
  }
}

}  // namespace

int main() {
  // sm_count 132 (H100/H200) makes small row counts split each row across many blocks.
  test_gather("tiny V=5", 3, 5, 132, 1u << 30, false, false, 1);
  test_gather("V=4099 misaligned rows", 9, 4099, 132, 7, true, true, 2);
  test_gather("V=151936 R=8 split rows", 8, 151936, 132, 1u << 30, false, true, 3);
  test_gather("V=151936 R=8 misaligned, capped grid", 8, 151936, 132, 5, true, true, 4);
  test_gather("V=32003 R=40 one piece per row", 40, 32003, 2, 1u << 30, true, true, 5);
  test_answer_probability(6);
  test_advantages(7);
  test_ppo(8);
  test_ppo_specials(9);
  if (failures) {
    std::printf("%d emulated kernel check(s) FAILED\n", failures);
    return 1;
  }
  std::printf("all emulated kernel checks passed\n");
  return 0;
}
