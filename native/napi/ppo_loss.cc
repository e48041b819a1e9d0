// ppoPolicyLoss(logp, oldLogp, advantages, mask, rows, cols, clipLow, clipHigh, clipC, aggMode,
// refLogp | null, klCoef, klType[, globalNorm]) -> { loss, grad, clipFrac, approxKl, kl }. aggMode
// and klType are the codes of native/enums.h; globalNorm (absent or 0: this call's own count) is
// the mini-batch's token or sequence count the loss divides by (docs/algorithm.md §6).
#include <string>

#include "../enums.h"
#include "alloc.h"
#include "args.h"
#include "dispatch.h"
#include "exports.h"

namespace mempo {
namespace binding {

// The range messages below list the codes of native/enums.h; keep them in step with it.
static_assert(kAggModeCount == 3 && kKlTypeCount == 4, "update the aggMode / klType messages");

Napi::Value PpoPolicyLoss(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    Napi::Env env = info.Env();
    const int64_t rows = size_arg(info, 4, "rows", true), cols = size_arg(info, 5, "cols", false);
    const int64_t n = rows * cols;
    auto logp = typed_arg<float>(info, 0, "logp", napi_float32_array, n);
    auto old_logp = typed_arg<float>(info, 1, "oldLogp", napi_float32_array, n);
    auto adv = typed_arg<float>(info, 2, "advantages", napi_float32_array, n);
    auto mask = typed_arg<uint8_t>(info, 3, "mask", napi_uint8_array, n);
    const double clip_low = number_arg(info, 6, "clipLow"), clip_high = number_arg(info, 7, "clipHigh");
    const double clip_c = number_arg(info, 8, "clipC");
    const int agg = code_arg(info, 9, "aggMode", kAggModeCount, "0, 1 or 2");
    auto ref = typed_arg<float>(info, 10, "refLogp", napi_float32_array, n, true);
    const double kl_coef = number_arg(info, 11, "klCoef");
    const int kl = code_arg(info, 12, "klType", kKlTypeCount, "0, 1, 2 or 3");
    const KlType kl_type = ref.IsEmpty() ? kKlNone : static_cast<KlType>(kl);
    const double global_norm = info.Length() > 13 && !info[13].IsUndefined() ? number_arg(info, 13, "globalNorm") : 0.0;
    if (!(global_norm >= 0.0 && global_norm < 9007199254740992.0)) {
      range_error(env, "a finite number >= 0", "globalNorm", std::to_string(global_norm));
    }
    auto grad = mempo::new_float32(env, size_t(n), false);
    const PpoLossResult r = MEMPO_DISPATCH(ppo_policy_loss, logp.Data(), old_logp.Data(), adv.Data(), mask.Data(),
                                           rows, cols, clip_low, clip_high, clip_c, static_cast<AggMode>(agg),
                                           ref.IsEmpty() ? nullptr : ref.Data(), kl_coef, kl_type, global_norm,
                                           grad.Data());
    Napi::Object res = Napi::Object::New(env);
    res.Set("loss", r.loss);
    res.Set("grad", grad);
    res.Set("clipFrac", r.clip_frac);
    res.Set("approxKl", r.approx_kl);
    res.Set("kl", r.kl);
    return res;
  });
}

}  // namespace binding
}  // namespace mempo
