// gatherLogProbs(logits | DeviceBuffer, targets, rows, vocab) -> Float32Array[rows].
#include <string>
#include <vector>

#include "alloc.h"
#include "args.h"
#include "dispatch.h"
#include "exports.h"
#ifdef MEMPO_WITH_CUDA
#include "device_buffer.h"
#endif

namespace mempo {
namespace binding {

namespace {

void check_targets(const Napi::CallbackInfo& info, const int32_t* tg, int64_t rows, int64_t vocab) {
  for (int64_t r = 0; r < rows; ++r) {
    if (tg[r] < 0 || tg[r] >= vocab) {
      const std::string arg = "targets[" + std::to_string(r) + "]";
      range_error(info.Env(), "a token id in [0, vocab = " + std::to_string(vocab) + ")", arg.c_str(),
                  std::to_string(tg[r]));
    }
  }
}

#ifdef MEMPO_WITH_CUDA
// Logits resident on the device: gathered there, or read back for the CPU op when the CPU is
// selected (same result).
Napi::Value gather_resident(const Napi::CallbackInfo& info, DeviceBufferWrap* dev, int64_t rows, int64_t vocab) {
  const mempo::cuda::DeviceArray& arr = dev->array(info.Env());
  if (arr.size() != rows * vocab) {
    range_error(info.Env(), "a Float32Array or DeviceBuffer of length " + std::to_string(rows * vocab), "logits",
                "DeviceBuffer of length " + std::to_string(arr.size()));
  }
  const std::vector<int32_t> targets = read_once(typed_arg<int32_t>(info, 1, "targets", napi_int32_array, rows));
  check_targets(info, targets.data(), rows, vocab);
  auto out = mempo::new_float32(info.Env(), size_t(rows), false);
  if (use_cuda()) {
    mempo::cuda::gather_log_probs_resident(arr, targets.data(), rows, vocab, out.Data());
  } else {
    std::vector<float> host(static_cast<size_t>(arr.size()));
    arr.read(host.data());
    mempo::cpu::gather_log_probs(host.data(), targets.data(), rows, vocab, out.Data());
  }
  return out;
}
#endif

}  // namespace

Napi::Value GatherLogProbs(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    const int64_t rows = size_arg(info, 2, "rows", true), vocab = size_arg(info, 3, "vocab", false);
#ifdef MEMPO_WITH_CUDA
    if (DeviceBufferWrap* dev = DeviceBufferWrap::From(info[0])) return gather_resident(info, dev, rows, vocab);
#endif
    auto logits = typed_arg<float>(info, 0, "logits", napi_float32_array, rows * vocab);
    const std::vector<int32_t> targets = read_once(typed_arg<int32_t>(info, 1, "targets", napi_int32_array, rows));
    check_targets(info, targets.data(), rows, vocab);
    auto out = mempo::new_float32(info.Env(), size_t(rows), false);
    MEMPO_DISPATCH(gather_log_probs, logits.Data(), targets.data(), rows, vocab, out.Data());
    return out;
  });
}

}  // namespace binding
}  // namespace mempo
