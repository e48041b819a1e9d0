// DeviceBuffer (CUDA builds only): a Float32Array uploaded once and kept in device memory (see
// native/cuda/README.md); gatherLogProbs accepts it in place of the logits.
#pragma once
#ifdef MEMPO_WITH_CUDA
#include <napi.h>

#include <cstdint>
#include <memory>

#include "../cuda/runtime.h"

namespace mempo {
namespace binding {

class DeviceBufferWrap : public Napi::ObjectWrap<DeviceBufferWrap> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit DeviceBufferWrap(const Napi::CallbackInfo& info);

  // The DeviceBuffer behind v, or nullptr when v is anything else (a typed array included).
  static DeviceBufferWrap* From(const Napi::Value& v);

  // Throws "this DeviceBuffer was freed" after free().
  const mempo::cuda::DeviceArray& array(Napi::Env env) const;
  int64_t length() const { return length_; }

 private:
  Napi::Value Length(const Napi::CallbackInfo& info);
  Napi::Value ByteLength(const Napi::CallbackInfo& info);
  Napi::Value Freed(const Napi::CallbackInfo& info);
  Napi::Value Write(const Napi::CallbackInfo& info);
  Napi::Value ToFloat32Array(const Napi::CallbackInfo& info);
  Napi::Value Free(const Napi::CallbackInfo& info);

  std::unique_ptr<mempo::cuda::DeviceArray> array_;
  int64_t length_ = 0;
};

}  // namespace binding
}  // namespace mempo
#endif
