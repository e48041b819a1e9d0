// Where the ops run: 'auto' (the default) runs on CUDA when this is a CUDA build, a device is
// usable and env MEMPO_DEVICE is not 'cpu'; setDevice('cpu' | 'cuda' | 'auto') overrides. One
// setting per process (shared by worker threads). info() and setDevice are in device.cc.
#pragma once
#include <string>

namespace mempo {
namespace binding {

constexpr bool kCudaBuilt =
#ifdef MEMPO_WITH_CUDA
    true;
#else
    false;
#endif

// A CUDA build with a usable device (probed once).
bool cuda_available();
// Why not: the CUDA error text, or that this build has no CUDA.
std::string cuda_unavailable_reason();
// Whether the ops run on CUDA now (MEMPO_DISPATCH, native/napi/dispatch.h).
bool use_cuda();

}  // namespace binding
}  // namespace mempo
