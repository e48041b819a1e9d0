// Result arrays for the [B, T]-sized outputs. A fresh 32 MiB Float32Array costs ~8k page
// faults on first write, several times the kernel itself. Large results therefore come from a
// small process-wide pool of mappings: a result the GC collects returns its mapping to the pool
// and the next call reuses the already-faulted pages (zeroing them only when the kernel needs
// zeros). V8 is told about the external bytes so that it collects dropped results promptly.
// Anonymous mappings arrive zeroed, as napi_create_arraybuffer's do.
#pragma once
#include <napi.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace mempo {

constexpr size_t kPoolMinBytes = size_t{4} << 20;    // smaller results: V8's own allocation
constexpr size_t kPoolMaxBytes = size_t{512} << 20;  // mappings kept for reuse, in all

struct Mapping {
  void* base;
  size_t size;
};

class MappingPool {
 public:
  // A mapping of at least `bytes` (exactly `bytes` when new); `fresh` says it is untouched zeros.
  Mapping take(size_t bytes, bool& fresh) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < free_.size(); ++i) {
        if (free_[i].size >= bytes && free_[i].size <= 2 * bytes) {
          Mapping m = free_[i];
          free_.erase(free_.begin() + long(i));
          pooled_ -= m.size;
          fresh = false;
          return m;
        }
      }
    }
    fresh = true;
#if defined(__linux__)
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return {p == MAP_FAILED ? nullptr : p, bytes};
#else
    return {nullptr, bytes};
#endif
  }

  void give_back(Mapping m) {
    std::lock_guard<std::mutex> lock(mu_);
    if (pooled_ + m.size <= kPoolMaxBytes) {
      free_.push_back(m);
      pooled_ += m.size;
      return;
    }
#if defined(__linux__)
    munmap(m.base, m.size);
#endif
  }

 private:
  std::mutex mu_;
  std::vector<Mapping> free_;
  size_t pooled_ = 0;
};

inline MappingPool& mapping_pool() {
  static MappingPool* pool = new MappingPool();  // never destroyed: finalizers may run at exit
  return *pool;
}

// A Float32Array of n elements. With need_zeros the contents are zeros; without, the kernel
// promises to write every element (or to zero what it does not write when *reused says the
// memory came from the pool) and the contents are unspecified until it does.
inline Napi::Float32Array new_float32(Napi::Env env, size_t n, bool need_zeros, bool* reused = nullptr) {
  if (reused) *reused = false;
  const size_t bytes = n * sizeof(float);
#if defined(__linux__)
  if (bytes >= kPoolMinBytes) {
    bool fresh = false;
    Mapping m = mapping_pool().take(bytes, fresh);
    if (m.base != nullptr) {
      if (!fresh && need_zeros) std::memset(m.base, 0, bytes);
      if (reused) *reused = !fresh;
      auto* hint = new Mapping(m);
      int64_t adjusted = 0;
      napi_adjust_external_memory(env, int64_t(m.size), &adjusted);
      Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(
          env, m.base, bytes,
          [](Napi::Env e, void*, Mapping* h) {
            int64_t left = 0;
            napi_adjust_external_memory(e, -int64_t(h->size), &left);
            mapping_pool().give_back(*h);
            delete h;
          },
          hint);
      return Napi::Float32Array::New(env, n, ab, 0);
    }
  }
#endif
  (void)need_zeros;
  return Napi::Float32Array::New(env, n);
}

inline Napi::Float32Array new_zeroed_float32(Napi::Env env, size_t n) { return new_float32(env, n, true); }

}  // namespace mempo
