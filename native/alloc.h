// Result arrays for the [B, T]-sized outputs. A fresh 32 MiB Float32Array from V8 costs ~8k
// page faults on first write, more than the kernel itself; large results are therefore mapped
// here with transparent huge pages requested (2 MiB pages: ~16 faults), handed to JS as an
// external ArrayBuffer, and unmapped when the GC collects it. Anonymous mappings arrive
// zeroed, as napi_create_arraybuffer's do.
#pragma once
#include <napi.h>

#include <cstddef>
#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace mempo {

constexpr size_t kHugeThresholdBytes = size_t{4} << 20;

inline Napi::Float32Array new_zeroed_float32(Napi::Env env, size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const size_t bytes = n * sizeof(float);
  if (bytes >= kHugeThresholdBytes) {
    constexpr size_t huge = size_t{2} << 20;
    const size_t mapped = (bytes + 2 * huge - 1) / huge * huge;  // room to align to 2 MiB
    void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base != MAP_FAILED) {
      const uintptr_t b = reinterpret_cast<uintptr_t>(base);
      const uintptr_t aligned = (b + huge - 1) & ~(uintptr_t(huge) - 1);
      madvise(reinterpret_cast<void*>(aligned), mapped - (aligned - b), MADV_HUGEPAGE);
      struct Mapping {
        void* base;
        size_t size;
      };
      auto* hint = new Mapping{base, mapped};
      Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(
          env, reinterpret_cast<void*>(aligned), bytes,
          [](Napi::Env, void*, Mapping* m) {
            munmap(m->base, m->size);
            delete m;
          },
          hint);
      return Napi::Float32Array::New(env, n, ab, 0);
    }
  }
#endif
  return Napi::Float32Array::New(env, n);
}

}  // namespace mempo
