// The one file that registers mempo's native exports. Each export unwraps and re-checks its
// arguments (the TypeScript wrappers already validated them; this is the backstop for direct
// callers, worded the same way), allocates the result and calls a kernel from native/cpu or,
// in a CUDA build (MEMPO_WITH_CUDA, CMakeLists.txt with MEMPO_CUDA=ON) while the CUDA device is
// selected, its twin from native/cuda.
#include <napi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "alloc.h"
#include "cpu/kernels.h"
#ifdef MEMPO_WITH_CUDA
#include "cuda/cuda_kernels.h"
#endif

namespace {

using Napi::CallbackInfo;
using Napi::Env;
using Napi::Value;

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

[[noreturn]] void type_error(Env env, const std::string& what, const char* arg, const Napi::Value& v) {
  throw Napi::TypeError::New(env, "Expected " + what + " for " + arg + " but received " + describe(v));
}
[[noreturn]] void range_error(Env env, const std::string& what, const char* arg, const std::string& got) {
  throw Napi::RangeError::New(env, "Expected " + what + " for " + arg + " but received " + got);
}

int64_t size_arg(const CallbackInfo& info, size_t i, const char* arg, bool allow_zero) {
  Napi::Value v = info[i];
  if (!v.IsNumber()) type_error(info.Env(), allow_zero ? "a non-negative integer" : "a positive integer", arg, v);
  const double d = v.As<Napi::Number>().DoubleValue();
  if (d != static_cast<double>(static_cast<int64_t>(d)) || d < (allow_zero ? 0 : 1) || d > 2147483647.0) {
    range_error(info.Env(), allow_zero ? "a non-negative integer below 2^31" : "a positive integer below 2^31", arg,
                std::to_string(d));
  }
  return static_cast<int64_t>(d);
}

double number_arg(const CallbackInfo& info, size_t i, const char* arg) {
  Napi::Value v = info[i];
  if (!v.IsNumber()) type_error(info.Env(), "a number", arg, v);
  return v.As<Napi::Number>().DoubleValue();
}

template <typename T>
Napi::TypedArrayOf<T> typed_arg(const CallbackInfo& info, size_t i, const char* arg, napi_typedarray_type type,
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

// Every export goes through here so that no C++ exception can reach Node as a crash.
template <typename Fn>
Value guarded(const CallbackInfo& info, Fn&& fn) {
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

// ---- Device selection -------------------------------------------------------------------
// 'auto' (the default) runs on CUDA when this is a CUDA build, a device is usable and env
// MEMPO_DEVICE is not 'cpu'; setDevice('cpu' | 'cuda' | 'auto') overrides. One setting per
// process (shared by worker threads).

enum DeviceMode : int { kAuto = 0, kCpu = 1, kCuda = 2 };
std::atomic<int> g_device{kAuto};

constexpr bool kCudaBuilt =
#ifdef MEMPO_WITH_CUDA
    true;
#else
    false;
#endif

bool cuda_available() {
#ifdef MEMPO_WITH_CUDA
  return mempo::cuda::probe().available;
#else
  return false;
#endif
}

std::string cuda_unavailable_reason() {
#ifdef MEMPO_WITH_CUDA
  return mempo::cuda::probe().error;
#else
  return "this build has no CUDA support (built with MEMPO_CUDA=OFF); build the CUDA addon with scripts/build-cuda.sh";
#endif
}

bool env_wants_cpu() {
  const char* e = std::getenv("MEMPO_DEVICE");
  return e != nullptr && std::string(e) == "cpu";
}

bool use_cuda() {
  const int d = g_device.load();
  if (d == kAuto) return cuda_available() && !env_wants_cpu();
  return d == kCuda;
}

#ifdef MEMPO_WITH_CUDA
// A Float32Array uploaded once and kept in device memory (see native/cuda/README.md);
// gatherLogProbs accepts it in place of the logits.
const napi_type_tag kDeviceBufferTag = {0x6d656d706f2d6465ULL, 0x766963656275662dULL};

class DeviceBufferWrap : public Napi::ObjectWrap<DeviceBufferWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "DeviceBuffer",
                       {InstanceAccessor<&DeviceBufferWrap::Length>("length"),
                        InstanceAccessor<&DeviceBufferWrap::ByteLength>("byteLength"),
                        InstanceAccessor<&DeviceBufferWrap::Freed>("freed"),
                        InstanceMethod<&DeviceBufferWrap::Write>("write"),
                        InstanceMethod<&DeviceBufferWrap::ToFloat32Array>("toFloat32Array"),
                        InstanceMethod<&DeviceBufferWrap::Free>("free")});
  }

  explicit DeviceBufferWrap(const CallbackInfo& info) : Napi::ObjectWrap<DeviceBufferWrap>(info) {
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

  static DeviceBufferWrap* From(const Napi::Value& v) {
    if (!v.IsObject() || v.IsTypedArray()) return nullptr;
    Napi::Object o = v.As<Napi::Object>();
    if (!o.CheckTypeTag(&kDeviceBufferTag)) return nullptr;
    return Napi::ObjectWrap<DeviceBufferWrap>::Unwrap(o);
  }

  const mempo::cuda::DeviceArray& array(Napi::Env env) const {
    if (!array_) throw Napi::Error::New(env, "mempo native: this DeviceBuffer was freed");
    return *array_;
  }
  int64_t length() const { return length_; }

 private:
  Napi::Value Length(const CallbackInfo& info) { return Napi::Number::New(info.Env(), double(length_)); }
  Napi::Value ByteLength(const CallbackInfo& info) { return Napi::Number::New(info.Env(), 4.0 * double(length_)); }
  Napi::Value Freed(const CallbackInfo& info) { return Napi::Boolean::New(info.Env(), !array_); }
  Napi::Value Write(const CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      auto data = typed_arg<float>(info, 0, "data", napi_float32_array, length_);
      if (!array_) throw Napi::Error::New(info.Env(), "mempo native: this DeviceBuffer was freed");
      array_->write(data.Data(), length_);
      return info.Env().Undefined();
    });
  }
  Napi::Value ToFloat32Array(const CallbackInfo& info) {
    return guarded(info, [&]() -> Napi::Value {
      const mempo::cuda::DeviceArray& a = array(info.Env());
      auto out = Napi::Float32Array::New(info.Env(), size_t(length_));
      a.read(out.Data());
      return out;
    });
  }
  Napi::Value Free(const CallbackInfo& info) {
    array_.reset();
    return info.Env().Undefined();
  }

  std::unique_ptr<mempo::cuda::DeviceArray> array_;
  int64_t length_ = 0;
};
#endif

void check_targets(const CallbackInfo& info, const int32_t* tg, int64_t rows, int64_t vocab) {
  for (int64_t r = 0; r < rows; ++r) {
    if (tg[r] < 0 || tg[r] >= vocab) {
      const std::string arg = "targets[" + std::to_string(r) + "]";
      range_error(info.Env(), "a token id in [0, vocab = " + std::to_string(vocab) + ")", arg.c_str(),
                  std::to_string(tg[r]));
    }
  }
}

Value GatherLogProbs(const CallbackInfo& info) {
  return guarded(info, [&]() -> Value {
    const int64_t rows = size_arg(info, 2, "rows", true), vocab = size_arg(info, 3, "vocab", false);
#ifdef MEMPO_WITH_CUDA
    if (DeviceBufferWrap* dev = DeviceBufferWrap::From(info[0])) {
      const mempo::cuda::DeviceArray& arr = dev->array(info.Env());
      if (arr.size() != rows * vocab) {
        range_error(info.Env(), "a Float32Array or DeviceBuffer of length " + std::to_string(rows * vocab), "logits",
                    "DeviceBuffer of length " + std::to_string(arr.size()));
      }
      auto targets = typed_arg<int32_t>(info, 1, "targets", napi_int32_array, rows);
      check_targets(info, targets.Data(), rows, vocab);
      auto out = Napi::Float32Array::New(info.Env(), rows);
      if (use_cuda()) {
        mempo::cuda::gather_log_probs_resident(arr, targets.Data(), rows, vocab, out.Data());
      } else {  // CPU selected: bring the logits back and run the CPU kernel (same result)
        std::vector<float> host(static_cast<size_t>(arr.size()));
        arr.read(host.data());
        mempo::gather_log_probs(host.data(), targets.Data(), rows, vocab, out.Data());
      }
      return out;
    }
#endif
    auto logits = typed_arg<float>(info, 0, "logits", napi_float32_array, rows * vocab);
    auto targets = typed_arg<int32_t>(info, 1, "targets", napi_int32_array, rows);
    check_targets(info, targets.Data(), rows, vocab);
    auto out = Napi::Float32Array::New(info.Env(), rows);
#ifdef MEMPO_WITH_CUDA
    if (use_cuda()) {
      mempo::cuda::gather_log_probs(logits.Data(), targets.Data(), rows, vocab, out.Data());
      return out;
    }
#endif
    mempo::gather_log_probs(logits.Data(), targets.Data(), rows, vocab, out.Data());
    return out;
  });
}

Value AnswerProbability(const CallbackInfo& info) {
  return guarded(info, [&]() -> Value {
    const int64_t rows = size_arg(info, 2, "rows", true), cols = size_arg(info, 3, "cols", false);
    auto logp = typed_arg<float>(info, 0, "logp", napi_float32_array, rows * cols);
    auto mask = typed_arg<uint8_t>(info, 1, "ansMask", napi_uint8_array, rows * cols);
    const double threshold = number_arg(info, 4, "threshold");
    auto out = Napi::Float32Array::New(info.Env(), rows);
#ifdef MEMPO_WITH_CUDA
    if (use_cuda()) {
      mempo::cuda::answer_probability(logp.Data(), mask.Data(), rows, cols, threshold, out.Data());
      return out;
    }
#endif
    mempo::answer_probability(logp.Data(), mask.Data(), rows, cols, threshold, out.Data());
    return out;
  });
}

// Shared by both advantages: the checked group arguments (groups, groupCount, eps, normByStd).
struct GroupArgs {
  Napi::TypedArrayOf<int32_t> groups;
  int32_t group_count;
  double eps;
  bool norm_by_std;
};

GroupArgs group_args(const CallbackInfo& info, int64_t n) {
  auto groups = typed_arg<int32_t>(info, 1, "groups", napi_int32_array, n);
  const int64_t group_count = size_arg(info, 2, "groupCount", true);
  const int32_t* gp = groups.Data();
  for (int64_t i = 0; i < n; ++i) {
    if (gp[i] < 0 || gp[i] >= group_count) {
      const std::string arg = "groups[" + std::to_string(i) + "]";
      range_error(info.Env(), "a group id in [0, groupCount)", arg.c_str(), std::to_string(gp[i]));
    }
  }
  const double eps = number_arg(info, 6, "eps");
  const bool norm_by_std = info[7].ToBoolean().Value();
  return GroupArgs{groups, static_cast<int32_t>(group_count), eps, norm_by_std};
}

// values[n] and dense group ids -> normalised values (CPU).
std::vector<double> normalized(const Napi::TypedArrayOf<double>& values, const GroupArgs& g, int64_t n) {
  std::vector<double> out(n);
  mempo::group_normalize(values.Data(), g.groups.Data(), n, g.group_count, g.eps, g.norm_by_std, out.data());
  return out;
}

Value GrpoOutcomeAdvantage(const CallbackInfo& info) {
  return guarded(info, [&]() -> Value {
    if (!info[0].IsTypedArray()) type_error(info.Env(), "Float64Array", "scores", info[0]);
    const int64_t rows = size_arg(info, 4, "rows", true), cols = size_arg(info, 5, "cols", false);
    auto scores = typed_arg<double>(info, 0, "scores", napi_float64_array, rows);
    auto mask = typed_arg<uint8_t>(info, 3, "responseMask", napi_uint8_array, rows * cols);
    const GroupArgs g = group_args(info, rows);
#ifdef MEMPO_WITH_CUDA
    if (use_cuda()) {
      auto out = mempo::new_float32(info.Env(), size_t(rows * cols), false);
      mempo::cuda::outcome_advantage(scores.Data(), g.groups.Data(), rows, g.group_count, g.eps, g.norm_by_std,
                                     mask.Data(), cols, out.Data());
      return out;
    }
#endif
    std::vector<double> adv = normalized(scores, g, rows);
    auto out = mempo::new_float32(info.Env(), size_t(rows * cols), false);
    mempo::broadcast_rows(adv.data(), mask.Data(), rows, cols, out.Data());
    return out;
  });
}

Value MemoryAdvantage(const CallbackInfo& info) {
  return guarded(info, [&]() -> Value {
    if (!info[0].IsTypedArray()) type_error(info.Env(), "Float64Array", "memRewards", info[0]);
    const int64_t m = info[0].As<Napi::TypedArray>().ElementLength();
    auto rewards = typed_arg<double>(info, 0, "memRewards", napi_float64_array, m);
    auto spans = typed_arg<int32_t>(info, 3, "spans", napi_int32_array, 3 * m);
    const int64_t rows = size_arg(info, 4, "rows", false), cols = size_arg(info, 5, "cols", false);
    // Bounds and overlap: the TS wrapper reports these in detail; this is the backstop. Spans in
    // row-then-start order (as rollouts emit them) are checked in one pass, others after a sort.
    const int32_t* sp = spans.Data();
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
    const GroupArgs g = group_args(info, m);
#ifdef MEMPO_WITH_CUDA
    if (use_cuda()) {
      auto out = mempo::new_float32(info.Env(), size_t(rows * cols), false);
      mempo::cuda::memory_advantage(rewards.Data(), g.groups.Data(), m, g.group_count, g.eps, g.norm_by_std,
                                    spans.Data(), rows, cols, out.Data());
      return out;
    }
#endif
    std::vector<double> adv = normalized(rewards, g, m);
    bool reused = false;  // pooled memory is zeroed by write_spans' workers, fresh pages are zeros
    auto out = mempo::new_float32(info.Env(), size_t(rows * cols), false, &reused);
    mempo::write_spans(adv.data(), spans.Data(), m, rows, cols, reused, out.Data());
    return out;
  });
}

Value PpoPolicyLoss(const CallbackInfo& info) {
  return guarded(info, [&]() -> Value {
    Env env = info.Env();
    const int64_t rows = size_arg(info, 4, "rows", true), cols = size_arg(info, 5, "cols", false);
    const int64_t n = rows * cols;
    auto logp = typed_arg<float>(info, 0, "logp", napi_float32_array, n);
    auto old_logp = typed_arg<float>(info, 1, "oldLogp", napi_float32_array, n);
    auto adv = typed_arg<float>(info, 2, "advantages", napi_float32_array, n);
    auto mask = typed_arg<uint8_t>(info, 3, "mask", napi_uint8_array, n);
    const double clip_low = number_arg(info, 6, "clipLow"), clip_high = number_arg(info, 7, "clipHigh");
    const double clip_c = number_arg(info, 8, "clipC");
    const int agg = static_cast<int>(number_arg(info, 9, "aggMode"));
    auto ref = typed_arg<float>(info, 10, "refLogp", napi_float32_array, n, true);
    const double kl_coef = number_arg(info, 11, "klCoef");
    int kl_type = static_cast<int>(number_arg(info, 12, "klType"));
    if (agg < 0 || agg > 2) range_error(env, "0, 1 or 2", "aggMode", std::to_string(agg));
    if (kl_type < 0 || kl_type > 3) range_error(env, "0, 1, 2 or 3", "klType", std::to_string(kl_type));
    if (ref.IsEmpty()) kl_type = 0;
    auto grad = mempo::new_float32(env, size_t(n), false);
#ifdef MEMPO_WITH_CUDA
    const auto kernel = use_cuda() ? &mempo::cuda::ppo_policy_loss : &mempo::ppo_policy_loss;
#else
    const auto kernel = &mempo::ppo_policy_loss;
#endif
    const mempo::PpoLossResult r =
        kernel(logp.Data(), old_logp.Data(), adv.Data(), mask.Data(), rows, cols, clip_low, clip_high, clip_c, agg,
               ref.IsEmpty() ? nullptr : ref.Data(), kl_coef, kl_type, grad.Data());
    Napi::Object res = Napi::Object::New(env);
    res.Set("loss", r.loss);
    res.Set("grad", grad);
    res.Set("clipFrac", r.clip_frac);
    res.Set("approxKl", r.approx_kl);
    res.Set("kl", r.kl);
    return res;
  });
}

Value ReadBandwidth(const CallbackInfo& info) {
  return guarded(info, [&]() -> Value {
    if (!info[0].IsTypedArray()) type_error(info.Env(), "Float32Array", "buffer", info[0]);
    auto buf = info[0].As<Napi::TypedArray>();
    auto data = typed_arg<float>(info, 0, "buffer", napi_float32_array, buf.ElementLength());
    const int64_t repeats = size_arg(info, 1, "repeats", false);
    return Napi::Number::New(info.Env(), mempo::read_bandwidth_seconds(data.Data(), data.ElementLength(),
                                                                       static_cast<int>(repeats)));
  });
}

// { simd, threads, cuda, cudaBuilt, device, deviceName?, cudaError? }: cuda is true when this
// build has CUDA and a device is usable; device is where the kernels run now ('cuda' | 'cpu').
Value Info(const CallbackInfo& info) {
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("simd", mempo::simd_path());
  o.Set("threads", mempo::thread_count());
  const bool cuda = cuda_available();
  o.Set("cuda", cuda);
  o.Set("cudaBuilt", kCudaBuilt);
  o.Set("device", use_cuda() ? "cuda" : "cpu");
#ifdef MEMPO_WITH_CUDA
  if (cuda) o.Set("deviceName", mempo::cuda::probe().name);
#endif
  if (!cuda) o.Set("cudaError", cuda_unavailable_reason());
  return o;
}

// setDevice('cpu' | 'cuda' | 'auto'); 'cuda' throws, with the reason, when no device is usable.
Value SetDevice(const CallbackInfo& info) {
  return guarded(info, [&]() -> Value {
    Env env = info.Env();
    if (!info[0].IsString()) type_error(env, "'cpu', 'cuda' or 'auto'", "device", info[0]);
    const std::string d = info[0].As<Napi::String>().Utf8Value();
    if (d == "cpu") {
      g_device = kCpu;
    } else if (d == "auto") {
      g_device = kAuto;
    } else if (d == "cuda") {
      if (!kCudaBuilt) throw Napi::Error::New(env, "mempo native: " + cuda_unavailable_reason());
      if (!cuda_available()) throw Napi::Error::New(env, "mempo native: no usable CUDA device: " + cuda_unavailable_reason());
      g_device = kCuda;
    } else {
      range_error(env, "'cpu', 'cuda' or 'auto'", "device", "\"" + d + "\"");
    }
    return env.Undefined();
  });
}

Napi::Object Init(Env env, Napi::Object exports) {
  exports.Set("gatherLogProbs", Napi::Function::New(env, GatherLogProbs, "gatherLogProbs"));
  exports.Set("answerProbability", Napi::Function::New(env, AnswerProbability, "answerProbability"));
  exports.Set("grpoOutcomeAdvantage", Napi::Function::New(env, GrpoOutcomeAdvantage, "grpoOutcomeAdvantage"));
  exports.Set("memoryAdvantage", Napi::Function::New(env, MemoryAdvantage, "memoryAdvantage"));
  exports.Set("ppoPolicyLoss", Napi::Function::New(env, PpoPolicyLoss, "ppoPolicyLoss"));
  exports.Set("readBandwidth", Napi::Function::New(env, ReadBandwidth, "readBandwidth"));
  exports.Set("info", Napi::Function::New(env, Info, "info"));
  exports.Set("setDevice", Napi::Function::New(env, SetDevice, "setDevice"));
#ifdef MEMPO_WITH_CUDA
  exports.Set("DeviceBuffer", DeviceBufferWrap::Define(env));
#endif
  return exports;
}

}  // namespace

NODE_API_MODULE(mempo, Init)
