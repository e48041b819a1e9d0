// The one file that registers mempo's native exports; each is defined in native/napi (see
// native/napi/exports.h) and runs an op of native/kernels.h from native/cpu or, in a CUDA build
// (MEMPO_WITH_CUDA, CMakeLists.txt with MEMPO_CUDA=ON) while the CUDA device is selected, its
// twin from native/cuda.
#include <napi.h>

#include <mutex>

#include "cpu/parallel.h"
#include "napi/exports.h"

namespace {

// The worker pool (native/cpu/parallel.h) is shared by every env that loads the addon (the main
// thread and worker_threads); the last env to go away joins its threads.
std::mutex g_envs_mu;
int g_envs = 0;

void release_env(void*) {
  std::lock_guard<std::mutex> lock(g_envs_mu);
  if (--g_envs == 0) mempo::shutdown_pool();
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  namespace b = mempo::binding;
  if (napi_add_env_cleanup_hook(env, release_env, nullptr) == napi_ok) {
    std::lock_guard<std::mutex> lock(g_envs_mu);
    ++g_envs;
  }
  exports.Set("gatherLogProbs", Napi::Function::New(env, b::GatherLogProbs, "gatherLogProbs"));
  exports.Set("answerProbability", Napi::Function::New(env, b::AnswerProbability, "answerProbability"));
  exports.Set("grpoOutcomeAdvantage", Napi::Function::New(env, b::GrpoOutcomeAdvantage, "grpoOutcomeAdvantage"));
  exports.Set("memoryAdvantage", Napi::Function::New(env, b::MemoryAdvantage, "memoryAdvantage"));
  exports.Set("mempoAdvantages", Napi::Function::New(env, b::MempoAdvantages, "mempoAdvantages"));
  exports.Set("ppoPolicyLoss", Napi::Function::New(env, b::PpoPolicyLoss, "ppoPolicyLoss"));
  exports.Set("readBandwidth", Napi::Function::New(env, b::ReadBandwidth, "readBandwidth"));
  exports.Set("info", Napi::Function::New(env, b::Info, "info"));
  exports.Set("setDevice", Napi::Function::New(env, b::SetDevice, "setDevice"));
#ifdef MEMPO_WITH_CUDA
  exports.Set("DeviceBuffer", b::DefineDeviceBuffer(env));
#endif
  return exports;
}

}  // namespace

NODE_API_MODULE(mempo, Init)
