#include "device_buffer.h"
#ifdef MEMPO_WITH_CUDA

#include "alloc.h"
#include "args.h"
#include "device.h"
#include "exports.h"

namespace mempo {
namespace binding {

namespace {
const napi_type_tag kDeviceBufferTag = {0x6d656d706f2d6465ULL, 0x766963656275662dULL};
}  // namespace

Napi::Function DeviceBufferWrap::Define(Napi::Env env) {
  return DefineClass(env, "DeviceBuffer",
                     {InstanceAccessor<&DeviceBufferWrap::Length>("length"),
                      InstanceAccessor<&DeviceBufferWrap::ByteLength>("byteLength"),
                      InstanceAccessor<&DeviceBufferWrap::Freed>("freed"),
                      InstanceMethod<&DeviceBufferWrap::Write>("write"),
                      InstanceMethod<&DeviceBufferWrap::ToFloat32Array>("toFloat32Array"),
                      InstanceMethod<&DeviceBufferWrap::Free>("free")});
}

Napi::Function DefineDeviceBuffer(Napi::Env env) { return DeviceBufferWrap::Define(env); }

DeviceBufferWrap::DeviceBufferWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<DeviceBufferWrap>(info) {
  guarded(info, [&]() -> Napi::Value {
    if (!info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_float32_array) {
      type_error(info.Env(), "Float32Array", "data", info[0]);
    }
    if (!cuda_available()) {
      throw Napi::Error::New(info.Env(), "mempo native: DeviceBuffer needs a CUDA device: " + cuda_unavailable_reason());
    }
    auto data = info[0].As<Napi::Float32Array>();
    length_ = static_cast<int64_t>(data.ElementLength());
    array_ = mempo::cuda::DeviceArray::upload(data.Data(), length_);
    info.This().As<Napi::Object>().TypeTag(&kDeviceBufferTag);
    return info.Env().Undefined();
  });
}

DeviceBufferWrap* DeviceBufferWrap::From(const Napi::Value& v) {
  if (!v.IsObject() || v.IsTypedArray()) return nullptr;
  Napi::Object o = v.As<Napi::Object>();
  if (!o.CheckTypeTag(&kDeviceBufferTag)) return nullptr;
  return Napi::ObjectWrap<DeviceBufferWrap>::Unwrap(o);
}

const mempo::cuda::DeviceArray& DeviceBufferWrap::array(Napi::Env env) const {
  if (!array_) throw Napi::Error::New(env, "mempo native: this DeviceBuffer was freed");
  return *array_;
}

Napi::Value DeviceBufferWrap::Length(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), double(length_));
}

Napi::Value DeviceBufferWrap::ByteLength(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), 4.0 * double(length_));
}

Napi::Value DeviceBufferWrap::Freed(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), !array_); }

Napi::Value DeviceBufferWrap::Write(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    auto data = typed_arg<float>(info, 0, "data", napi_float32_array, length_);
    if (!array_) throw Napi::Error::New(info.Env(), "mempo native: this DeviceBuffer was freed");
    array_->write(data.Data(), length_);
    return info.Env().Undefined();
  });
}

Napi::Value DeviceBufferWrap::ToFloat32Array(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    const mempo::cuda::DeviceArray& a = array(info.Env());
    auto out = mempo::new_float32(info.Env(), size_t(length_), false);
    a.read(out.Data());
    return out;
  });
}

Napi::Value DeviceBufferWrap::Free(const Napi::CallbackInfo& info) {
  array_.reset();
  return info.Env().Undefined();
}

}  // namespace binding
}  // namespace mempo
#endif
