// The integer codes of the addon's enum arguments: the C++ half of the one table per side of
// the addon boundary. The TypeScript half is src/kernels/addon.ts; the quoted names after each
// code are its keys, and test/kernels/native-sources.test.ts checks that the two agree.
// docs/algorithm.md §6.
#pragma once

namespace mempo {

// ppoPolicyLoss aggMode: how token losses become one loss (verl agg_loss).
enum AggMode : int {
  kAggTokenMean = 0,         // 'token-mean'
  kAggSeqMeanTokenSum = 1,   // 'seq-mean-token-sum'
  kAggSeqMeanTokenMean = 2,  // 'seq-mean-token-mean'
};
constexpr int kAggModeCount = 3;

// ppoPolicyLoss klType: the KL estimator against the reference policy (verl kl_penalty).
enum KlType : int {
  kKlNone = 0,  // 'none' (no reference policy)
  kKlK1 = 1,    // 'k1'
  kKlK2 = 2,    // 'k2'
  kKlK3 = 3,    // 'k3', 'low_var_kl' (one estimator)
};
constexpr int kKlTypeCount = 4;

}  // namespace mempo
