#include "device.h"

#include <atomic>
#include <cstdlib>

#include "../machine.h"
#include "args.h"
#include "exports.h"
#ifdef MEMPO_WITH_CUDA
#include "../cuda/runtime.h"
#endif

namespace mempo {
namespace binding {

namespace {

enum DeviceMode : int { kAuto = 0, kCpu = 1, kCuda = 2 };
std::atomic<int> g_device{kAuto};

bool env_wants_cpu() {
  const char* e = std::getenv("MEMPO_DEVICE");
  return e != nullptr && std::string(e) == "cpu";
}

}  // namespace

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

bool use_cuda() {
  const int d = g_device.load();
  if (d == kAuto) return cuda_available() && !env_wants_cpu();
  return d == kCuda;
}

// { simd, threads, cuda, cudaBuilt, device, deviceName?, cudaError? }: cuda is true when this
// build has CUDA and a device is usable; device is where the kernels run now ('cuda' | 'cpu').
Napi::Value Info(const Napi::CallbackInfo& info) {
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("simd", simd_path());
  o.Set("threads", thread_count());
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
Napi::Value SetDevice(const Napi::CallbackInfo& info) {
  return guarded(info, [&]() -> Napi::Value {
    Napi::Env env = info.Env();
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

}  // namespace binding
}  // namespace mempo
