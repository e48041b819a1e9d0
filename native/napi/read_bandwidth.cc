// readBandwidth(buffer, repeats) -> seconds for `repeats` read passes (the benchmark's yardstick).
#include "../machine.h"
#include "args.h"
#include "exports.h"

namespace mempo {
namespace binding {

Napi::Value ReadBandwidth(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    if (!info[0].IsTypedArray()) type_error(info.Env(), "Float32Array", "buffer", info[0]);
    auto buf = info[0].As<Napi::TypedArray>();
    auto data = typed_arg<float>(info, 0, "buffer", napi_float32_array, buf.ElementLength());
    const int64_t repeats = size_arg(info, 1, "repeats", false);
    return Napi::Number::New(info.Env(), mempo::read_bandwidth_seconds(data.Data(), data.ElementLength(),
                                                                       static_cast<int>(repeats)));
  });
}

}  // namespace binding
}  // namespace mempo
