// Argument checks of the native exports: the C++ backstop behind the TypeScript validation
// in src/kernels, worded the same way, "Expected <what> for <argument> but received <value>",
// and guarded(), through which every export runs so that no C++ exception reaches Node.
//
// Read-once rule: an input may live in a SharedArrayBuffer that another thread writes while the
// kernel runs. Every value that addresses memory (targets, spans, group ids) is therefore copied
// out once with read_once() before it is checked, and only the checked copy reaches a kernel;
// floats and mask bytes are read in place, where a racing writer can change the numbers but
// never which memory is touched.
#pragma once
#include <napi.h>

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <new>
#include <cstring>
#include <string>
#include <vector>

namespace mempo {
namespace binding {

const char* type_name(napi_typedarray_type t);

// "Float32Array of length 5", "null", "3.000000", "an object", ...: the received value.
std::string describe(const Napi::Value& v);

[[noreturn]] void type_error(Napi::Env env, const std::string& what, const char* arg, const Napi::Value& v);
[[noreturn]] void range_error(Napi::Env env, const std::string& what, const char* arg, const std::string& got);

// info[i] as an integer in [0 or 1, 2^31).
int64_t size_arg(const Napi::CallbackInfo& info, size_t i, const char* arg, bool allow_zero);
double number_arg(const Napi::CallbackInfo& info, size_t i, const char* arg);

// info[i] as a typed array of `type` and exactly `length` elements; with `optional`, null or
// undefined give an empty handle.
template <typename T>
Napi::TypedArrayOf<T> typed_arg(const Napi::CallbackInfo& info, size_t i, const char* arg, napi_typedarray_type type,
                                int64_t length, bool optional = false) {
  Napi::Value v = info[i];
  const std::string what = std::string(type_name(type)) + " of length " + std::to_string(length);
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != type) {
    if (optional && (v.IsNull() || v.IsUndefined())) return Napi::TypedArrayOf<T>();
    type_error(info.Env(), what, arg, v);
  }
  auto ta = v.As<Napi::TypedArrayOf<T>>();
  if (static_cast<int64_t>(ta.ElementLength()) != length) range_error(info.Env(), what, arg, describe(v));
  return ta;
}

// The elements of `ta`, copied once (the read-once rule above).
inline std::vector<int32_t> read_once(const Napi::TypedArrayOf<int32_t>& ta) {
  std::vector<int32_t> copy(ta.ElementLength());
  if (!copy.empty()) std::memcpy(copy.data(), ta.Data(), copy.size() * sizeof(int32_t));
  return copy;
}

// The bytes an input occupies, named, for the overlap check of a caller's result (out_arg).
struct Region {
  const char* name;
  const void* data;
  size_t bytes;
};

template <typename T>
Region region(const char* name, const Napi::TypedArrayOf<T>& ta) {
  return Region{name, ta.IsEmpty() ? nullptr : ta.Data(), ta.IsEmpty() ? 0 : ta.ByteLength()};
}

// info[i], a caller-owned result the kernel overwrites: a Float32Array of exactly `length`
// elements sharing no byte with any of `inputs` (read in place while it is written, or written
// alongside it). With `optional`, undefined gives an empty handle (the caller allocates instead).
Napi::Float32Array out_arg(const Napi::CallbackInfo& info, size_t i, const char* arg, int64_t length,
                           std::initializer_list<Region> inputs, bool optional = true);

// info[i] as an integer code in [0, count).
int code_arg(const Napi::CallbackInfo& info, size_t i, const char* arg, int count, const char* what);

// fn() with every C++ exception (CUDA errors, std::bad_alloc) turned into a JS exception.
template <typename Fn>
Napi::Value guarded(const Napi::CallbackInfo& info, Fn&& fn) {
  try {
    return fn();
  } catch (const Napi::Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw Napi::RangeError::New(info.Env(), "mempo native: out of memory");
  } catch (const std::exception& e) {
    throw Napi::Error::New(info.Env(), std::string("mempo native: ") + e.what());
  }
}

}  // namespace binding
}  // namespace mempo
