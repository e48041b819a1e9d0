// mempoAdvantages(scores, groups, groupCount, responseMask, rows, cols, memRewards, memGroups,
// memGroupCount, spans, eps, normByStd, alpha, outcome?, memory?, final?) -> { outcome, memory,
// final }, each a Float32Array[rows * cols]: the three advantages of docs/algorithm.md §5 in one
// call, written into the caller's three arrays when given (all three or none), else new ones.
#include <vector>

#include "advantage_args.h"
#include "alloc.h"
#include "args.h"
#include "dispatch.h"
#include "exports.h"

namespace mempo {
namespace binding {

Napi::Value MempoAdvantages(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    if (!info[0].IsTypedArray()) type_error(info.Env(), "Float64Array", "scores", info[0]);
    if (!info[6].IsTypedArray()) type_error(info.Env(), "Float64Array", "memRewards", info[6]);
    const int64_t rows = size_arg(info, 4, "rows", true), cols = size_arg(info, 5, "cols", false);
    const int64_t m = info[6].As<Napi::TypedArray>().ElementLength();
    auto scores = typed_arg<double>(info, 0, "scores", napi_float64_array, rows);
    auto mask = typed_arg<uint8_t>(info, 3, "responseMask", napi_uint8_array, rows * cols);
    auto rewards = typed_arg<double>(info, 6, "memRewards", napi_float64_array, m);
    int32_t group_count = 0, mem_group_count = 0;
    const std::vector<int32_t> groups = group_ids(info, 1, "groups", "groupCount", rows, &group_count);
    const std::vector<int32_t> mem_groups = group_ids(info, 7, "memGroups", "memGroupCount", m, &mem_group_count);
    const std::vector<int32_t> spans = read_once(typed_arg<int32_t>(info, 9, "spans", napi_int32_array, 3 * m));
    check_spans(info, spans.data(), m, rows, cols);
    const double eps = number_arg(info, 10, "eps");
    const bool norm_by_std = info[11].ToBoolean().Value();
    const double alpha = number_arg(info, 12, "alpha");

    const size_t n = size_t(rows * cols);
    const bool given = !info[13].IsUndefined() || !info[14].IsUndefined() || !info[15].IsUndefined();
    const Region in_scores = region("scores", scores), in_mask = region("responseMask", mask),
                 in_rewards = region("memRewards", rewards);
    Napi::Float32Array outcome, memory, final_adv;
    bool memory_zeroed = false;  // a caller's array and pooled memory hold stale values, fresh pages are zeros
    if (given) {
      const int64_t len = rows * cols;
      outcome = out_arg(info, 13, "outcome", len, {in_scores, in_mask, in_rewards}, false);
      memory = out_arg(info, 14, "memory", len, {in_scores, in_mask, in_rewards, region("outcome", outcome)}, false);
      final_adv = out_arg(info, 15, "final", len,
                          {in_scores, in_mask, in_rewards, region("outcome", outcome), region("memory", memory)}, false);
    } else {
      bool memory_reused = false;
      outcome = mempo::new_float32(info.Env(), n, false);
      memory = mempo::new_float32(info.Env(), n, false, &memory_reused);
      final_adv = mempo::new_float32(info.Env(), n, false);
      memory_zeroed = !memory_reused;
    }
    const AdvantageBatch batch{scores.Data(), groups.data(), group_count, mask.Data(), rows, cols,
                               rewards.Data(), mem_groups.data(), mem_group_count, spans.data(), m,
                               eps, norm_by_std, alpha};
    MEMPO_DISPATCH(mempo_advantages, batch,
                   AdvantageResults{outcome.Data(), memory.Data(), final_adv.Data(), memory_zeroed});
    Napi::Object out = Napi::Object::New(info.Env());
    out.Set("outcome", outcome);
    out.Set("memory", memory);
    out.Set("final", final_adv);
    return out;
  });
}

}  // namespace binding
}  // namespace mempo
