// answerProbability(logp, ansMask, rows, cols, threshold) -> Float32Array[rows].
#include "alloc.h"
#include "args.h"
#include "dispatch.h"
#include "exports.h"

namespace mempo {
namespace binding {

Napi::Value AnswerProbability(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    const int64_t rows = size_arg(info, 2, "rows", true), cols = size_arg(info, 3, "cols", false);
    auto logp = typed_arg<float>(info, 0, "logp", napi_float32_array, rows * cols);
    auto mask = typed_arg<uint8_t>(info, 1, "ansMask", napi_uint8_array, rows * cols);
    const double threshold = number_arg(info, 4, "threshold");
    auto out = mempo::new_float32(info.Env(), size_t(rows), false);
    MEMPO_DISPATCH(answer_probability, logp.Data(), mask.Data(), rows, cols, threshold, out.Data());
    return out;
  });
}

}  // namespace binding
}  // namespace mempo
