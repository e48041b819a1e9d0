// The one file that registers mempo's native exports. Each export unwraps and re-checks its
// arguments (the TypeScript wrappers already validated them; this is the backstop for direct
// callers, worded the same way), allocates the result and calls a kernel from native/cpu.
#include <napi.h>

#include <algorithm>
#include <exception>
#include <string>
#include <vector>

#include "cpu/kernels.h"

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

Value GatherLogProbs(const CallbackInfo& info) {
  return guarded(info, [&]() -> Value {
    const int64_t rows = size_arg(info, 2, "rows", true), vocab = size_arg(info, 3, "vocab", false);
    auto logits = typed_arg<float>(info, 0, "logits", napi_float32_array, rows * vocab);
    auto targets = typed_arg<int32_t>(info, 1, "targets", napi_int32_array, rows);
    const int32_t* tg = targets.Data();
    for (int64_t r = 0; r < rows; ++r) {
      if (tg[r] < 0 || tg[r] >= vocab) {
        const std::string arg = "targets[" + std::to_string(r) + "]";
        range_error(info.Env(), "a token id in [0, vocab = " + std::to_string(vocab) + ")", arg.c_str(),
                    std::to_string(tg[r]));
      }
    }
    auto out = Napi::Float32Array::New(info.Env(), rows);
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
    mempo::answer_probability(logp.Data(), mask.Data(), rows, cols, threshold, out.Data());
    return out;
  });
}

// Shared by both advantages: values[n] and dense group ids -> normalised values.
std::vector<double> normalized(const CallbackInfo& info, Napi::TypedArrayOf<double> values, int64_t n) {
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
  std::vector<double> out(n);
  mempo::group_normalize(values.Data(), groups.Data(), n, static_cast<int32_t>(group_count), eps, norm_by_std,
                         out.data());
  return out;
}

Value GrpoOutcomeAdvantage(const CallbackInfo& info) {
  return guarded(info, [&]() -> Value {
    if (!info[0].IsTypedArray()) type_error(info.Env(), "Float64Array", "scores", info[0]);
    const int64_t rows = size_arg(info, 4, "rows", true), cols = size_arg(info, 5, "cols", false);
    auto scores = typed_arg<double>(info, 0, "scores", napi_float64_array, rows);
    auto mask = typed_arg<uint8_t>(info, 3, "responseMask", napi_uint8_array, rows * cols);
    std::vector<double> adv = normalized(info, scores, rows);
    auto out = Napi::Float32Array::New(info.Env(), rows * cols);
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
    // Bounds and overlap: the TS wrapper reports these in detail; here a cheap guard per row.
    std::vector<std::vector<std::pair<int32_t, int32_t>>> per_row(rows);
    const int32_t* sp = spans.Data();
    for (int64_t k = 0; k < m; ++k) {
      const int32_t r = sp[3 * k], s = sp[3 * k + 1], e = sp[3 * k + 2];
      if (r < 0 || r >= rows || s < 0 || e > cols || s >= e) {
        const std::string arg = "spans[" + std::to_string(k) + "] (row, start, end)";
        range_error(info.Env(), "0 <= row < batch and 0 <= start < end <= seqLen", arg.c_str(),
                    "(" + std::to_string(r) + ", " + std::to_string(s) + ", " + std::to_string(e) + ")");
      }
      per_row[r].emplace_back(s, e);
    }
    for (auto& row : per_row) {
      std::sort(row.begin(), row.end());
      for (size_t j = 1; j < row.size(); ++j) {
        if (row[j].first < row[j - 1].second) {
          throw Napi::RangeError::New(info.Env(), "Expected spans that do not overlap within a row for spans");
        }
      }
    }
    std::vector<double> adv = normalized(info, rewards, m);
    auto out = Napi::Float32Array::New(info.Env(), rows * cols);
    mempo::write_spans(adv.data(), spans.Data(), m, rows, cols, out.Data());
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
    auto grad = Napi::Float32Array::New(env, n);
    const mempo::PpoLossResult r =
        mempo::ppo_policy_loss(logp.Data(), old_logp.Data(), adv.Data(), mask.Data(), rows, cols, clip_low, clip_high,
                               clip_c, agg, ref.IsEmpty() ? nullptr : ref.Data(), kl_coef, kl_type, grad.Data());
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

Value Info(const CallbackInfo& info) {
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("simd", mempo::simd_path());
  o.Set("threads", mempo::thread_count());
  return o;
}

Napi::Object Init(Env env, Napi::Object exports) {
  exports.Set("gatherLogProbs", Napi::Function::New(env, GatherLogProbs, "gatherLogProbs"));
  exports.Set("answerProbability", Napi::Function::New(env, AnswerProbability, "answerProbability"));
  exports.Set("grpoOutcomeAdvantage", Napi::Function::New(env, GrpoOutcomeAdvantage, "grpoOutcomeAdvantage"));
  exports.Set("memoryAdvantage", Napi::Function::New(env, MemoryAdvantage, "memoryAdvantage"));
  exports.Set("ppoPolicyLoss", Napi::Function::New(env, PpoPolicyLoss, "ppoPolicyLoss"));
  exports.Set("readBandwidth", Napi::Function::New(env, ReadBandwidth, "readBandwidth"));
  exports.Set("info", Napi::Function::New(env, Info, "info"));
  return exports;
}

}  // namespace

NODE_API_MODULE(mempo, Init)
