#include "args.h"

namespace mempo {
namespace binding {

const char* type_name(napi_typedarray_type t) {
  switch (t) {
    case napi_float32_array: return "Float32Array";
    case napi_float64_array: return "Float64Array";
    case napi_int32_array: return "Int32Array";
    case napi_uint8_array: return "Uint8Array";
    default: return "TypedArray";
  }
}

std::string describe(const Napi::Value& v) {
  if (v.IsTypedArray()) {
    auto ta = v.As<Napi::TypedArray>();
    return std::string(type_name(ta.TypedArrayType())) + " of length " + std::to_string(ta.ElementLength());
  }
  if (v.IsArray()) return "Array of length " + std::to_string(v.As<Napi::Array>().Length());
  if (v.IsNull()) return "null";
  if (v.IsUndefined()) return "undefined";
  if (v.IsNumber()) return std::to_string(v.As<Napi::Number>().DoubleValue());
  return v.IsObject() ? "an object" : "a value of another type";
}

void type_error(Napi::Env env, const std::string& what, const char* arg, const Napi::Value& v) {
  throw Napi::TypeError::New(env, "Expected " + what + " for " + arg + " but received " + describe(v));
}

void range_error(Napi::Env env, const std::string& what, const char* arg, const std::string& got) {
  throw Napi::RangeError::New(env, "Expected " + what + " for " + arg + " but received " + got);
}

int64_t size_arg(const Napi::CallbackInfo& info, size_t i, const char* arg, bool allow_zero) {
  Napi::Value v = info[i];
  if (!v.IsNumber()) type_error(info.Env(), allow_zero ? "a non-negative integer" : "a positive integer", arg, v);
  const double d = v.As<Napi::Number>().DoubleValue();
  // Range first: converting NaN or a huge double to an integer is undefined behaviour.
  if (!(d >= (allow_zero ? 0 : 1) && d <= 2147483647.0) || d != static_cast<double>(static_cast<int64_t>(d))) {
    range_error(info.Env(), allow_zero ? "a non-negative integer below 2^31" : "a positive integer below 2^31", arg,
                std::to_string(d));
  }
  return static_cast<int64_t>(d);
}

double number_arg(const Napi::CallbackInfo& info, size_t i, const char* arg) {
  Napi::Value v = info[i];
  if (!v.IsNumber()) type_error(info.Env(), "a number", arg, v);
  return v.As<Napi::Number>().DoubleValue();
}

Napi::Float32Array out_arg(const Napi::CallbackInfo& info, size_t i, const char* arg, int64_t length,
                           std::initializer_list<Region> inputs, bool optional) {
  if (optional && info[i].IsUndefined()) return Napi::Float32Array();
  auto out = typed_arg<float>(info, i, arg, napi_float32_array, length);
  const auto* begin = reinterpret_cast<const uint8_t*>(out.Data());
  const uint8_t* end = begin + out.ByteLength();
  for (const Region& r : inputs) {
    const auto* b = static_cast<const uint8_t*>(r.data);
    if (r.bytes > 0 && begin < end && begin < b + r.bytes && b < end) {
      range_error(info.Env(), "a Float32Array of length " + std::to_string(length) + " that shares no memory with " + r.name,
                  arg, std::string("a Float32Array over the memory of ") + r.name);
    }
  }
  return out;
}

int code_arg(const Napi::CallbackInfo& info, size_t i, const char* arg, int count, const char* what) {
  const double d = number_arg(info, i, arg);
  if (!(d >= 0 && d < count) || d != static_cast<double>(static_cast<int>(d))) {
    const bool integral = d > -1e15 && d < 1e15 && d == static_cast<double>(static_cast<int64_t>(d));
    range_error(info.Env(), what, arg, integral ? std::to_string(static_cast<int64_t>(d)) : std::to_string(d));
  }
  return static_cast<int>(d);
}

}  // namespace binding
}  // namespace mempo
