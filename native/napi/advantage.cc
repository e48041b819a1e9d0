// grpoOutcomeAdvantage(scores, groups, groupCount, responseMask, rows, cols, eps, normByStd, out?)
// and memoryAdvantage(memRewards, groups, groupCount, spans, rows, cols, eps, normByStd, out?),
// both -> Float32Array[rows * cols]: out when given (overwritten whole), else a new array.
#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "advantage_args.h"
#include "alloc.h"
#include "args.h"
#include "dispatch.h"
#include "exports.h"

namespace mempo {
namespace binding {

namespace {

// Shared by both advantages: the checked group arguments (groups, groupCount, eps, normByStd).
struct GroupArgs {
  std::vector<int32_t> groups;  // read once (args.h), then checked
  int32_t group_count;
  double eps;
  bool norm_by_std;
};

GroupArgs group_args(const Napi::CallbackInfo& info, int64_t n) {
  int32_t group_count = 0;
  std::vector<int32_t> groups = group_ids(info, 1, "groups", "groupCount", n, &group_count);
  const double eps = number_arg(info, 6, "eps");
  const bool norm_by_std = info[7].ToBoolean().Value();
  return GroupArgs{std::move(groups), group_count, eps, norm_by_std};
}

}  // namespace

std::vector<int32_t> group_ids(const Napi::CallbackInfo& info, size_t at, const char* arg, const char* count_arg,
                               int64_t n, int32_t* count) {
  std::vector<int32_t> groups = read_once(typed_arg<int32_t>(info, at, arg, napi_int32_array, n));
  const int64_t group_count = size_arg(info, at + 1, count_arg, true);
  const int32_t* gp = groups.data();
  for (int64_t i = 0; i < n; ++i) {
    if (gp[i] < 0 || gp[i] >= group_count) {
      const std::string name = std::string(arg) + "[" + std::to_string(i) + "]";
      range_error(info.Env(), std::string("a group id in [0, ") + count_arg + ")", name.c_str(), std::to_string(gp[i]));
    }
  }
  *count = static_cast<int32_t>(group_count);
  return groups;
}

// Bounds and overlap: the TS wrapper reports these in detail; this is the backstop. Spans in
// row-then-start order (as rollouts emit them) are checked in one pass, others after a sort.
void check_spans(const Napi::CallbackInfo& info, const int32_t* sp, int64_t m, int64_t rows, int64_t cols) {
  bool ordered = true;
  for (int64_t k = 0; k < m; ++k) {
    const int32_t r = sp[3 * k], s = sp[3 * k + 1], e = sp[3 * k + 2];
    if (r < 0 || r >= rows || s < 0 || e > cols || s >= e) {
      const std::string arg = "spans[" + std::to_string(k) + "] (row, start, end)";
      range_error(info.Env(), "0 <= row < batch and 0 <= start < end <= seqLen", arg.c_str(),
                  "(" + std::to_string(r) + ", " + std::to_string(s) + ", " + std::to_string(e) + ")");
    }
    if (k > 0 && (sp[3 * k - 3] > r || (sp[3 * k - 3] == r && sp[3 * k - 2] > s))) ordered = false;
  }
  std::vector<std::array<int32_t, 3>> sorted;
  if (!ordered) {
    sorted.resize(size_t(m));
    for (int64_t k = 0; k < m; ++k) sorted[size_t(k)] = {sp[3 * k], sp[3 * k + 1], sp[3 * k + 2]};
    std::sort(sorted.begin(), sorted.end());
  }
  for (int64_t k = 1; k < m; ++k) {
    const int32_t* p = ordered ? sp + 3 * (k - 1) : sorted[size_t(k - 1)].data();
    const int32_t* q = ordered ? sp + 3 * k : sorted[size_t(k)].data();
    if (p[0] == q[0] && q[1] < p[2]) {
      throw Napi::RangeError::New(info.Env(), "Expected spans that do not overlap within a row for spans");
    }
  }
}

Napi::Value GrpoOutcomeAdvantage(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    if (!info[0].IsTypedArray()) type_error(info.Env(), "Float64Array", "scores", info[0]);
    const int64_t rows = size_arg(info, 4, "rows", true), cols = size_arg(info, 5, "cols", false);
    auto scores = typed_arg<double>(info, 0, "scores", napi_float64_array, rows);
    auto mask = typed_arg<uint8_t>(info, 3, "responseMask", napi_uint8_array, rows * cols);
    const GroupArgs g = group_args(info, rows);
    Napi::Float32Array out =
        out_arg(info, 8, "out", rows * cols, {region("scores", scores), region("responseMask", mask)});
    if (out.IsEmpty()) out = mempo::new_float32(info.Env(), size_t(rows * cols), false);
    MEMPO_DISPATCH(outcome_advantage, scores.Data(), g.groups.data(), rows, g.group_count, g.eps, g.norm_by_std,
                   mask.Data(), cols, out.Data());
    return out;
  });
}

Napi::Value MemoryAdvantage(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    if (!info[0].IsTypedArray()) type_error(info.Env(), "Float64Array", "memRewards", info[0]);
    const int64_t m = info[0].As<Napi::TypedArray>().ElementLength();
    auto rewards = typed_arg<double>(info, 0, "memRewards", napi_float64_array, m);
    const std::vector<int32_t> spans = read_once(typed_arg<int32_t>(info, 3, "spans", napi_int32_array, 3 * m));
    const int64_t rows = size_arg(info, 4, "rows", false), cols = size_arg(info, 5, "cols", false);
    check_spans(info, spans.data(), m, rows, cols);
    const GroupArgs g = group_args(info, m);
    Napi::Float32Array out = out_arg(info, 8, "out", rows * cols, {region("memRewards", rewards)});
    bool zeroed = false;  // a caller's array and pooled memory hold stale values, fresh pages are zeros
    if (out.IsEmpty()) {
      bool reused = false;
      out = mempo::new_float32(info.Env(), size_t(rows * cols), false, &reused);
      zeroed = !reused;
    }
    MEMPO_DISPATCH(memory_advantage, rewards.Data(), g.groups.data(), m, g.group_count, g.eps, g.norm_by_std,
                   spans.data(), rows, cols, zeroed, out.Data());
    return out;
  });
}

}  // namespace binding
}  // namespace mempo
