// The one dispatch form: MEMPO_DISPATCH(op, args...) calls mempo::cuda::op(args...) when the
// CUDA device is selected (use_cuda(), native/napi/device.h), else mempo::cpu::op(args...).
// Both are declared once in native/kernels.h; a build without CUDA names only the CPU one.
#pragma once
#include "../kernels.h"
#include "device.h"

#ifdef MEMPO_WITH_CUDA
#define MEMPO_DISPATCH(op, ...) \
  (::mempo::binding::use_cuda() ? ::mempo::cuda::op(__VA_ARGS__) : ::mempo::cpu::op(__VA_ARGS__))
#else
#define MEMPO_DISPATCH(op, ...) ::mempo::cpu::op(__VA_ARGS__)
#endif
