// Every native export, registered by native/binding.cc. Each unwraps and re-checks its
// arguments (args.h), allocates the result (alloc.h) and runs the op of native/kernels.h on the
// selected device (dispatch.h). Defined in native/napi/<op>.cc, named as in JS.
#pragma once
#include <napi.h>

namespace mempo {
namespace binding {

Napi::Value GatherLogProbs(const Napi::CallbackInfo& info);        // gather_logprobs.cc
Napi::Value AnswerProbability(const Napi::CallbackInfo& info);     // answer_probability.cc
Napi::Value GrpoOutcomeAdvantage(const Napi::CallbackInfo& info);  // advantage.cc
Napi::Value MemoryAdvantage(const Napi::CallbackInfo& info);       // advantage.cc
Napi::Value MempoAdvantages(const Napi::CallbackInfo& info);       // advantage_stage.cc
Napi::Value PpoPolicyLoss(const Napi::CallbackInfo& info);         // ppo_loss.cc
Napi::Value ReadBandwidth(const Napi::CallbackInfo& info);         // read_bandwidth.cc
Napi::Value Info(const Napi::CallbackInfo& info);                  // device.cc
Napi::Value SetDevice(const Napi::CallbackInfo& info);             // device.cc
#ifdef MEMPO_WITH_CUDA
Napi::Function DefineDeviceBuffer(Napi::Env env);  // device_buffer.cc
#endif

}  // namespace binding
}  // namespace mempo
