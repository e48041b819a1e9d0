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
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace mempo {

// Smaller results: V8's own allocation. From 256 KiB on a pooled mapping pays: a 2 MiB result
// from V8 (zeroed, page-faulted) made grpoOutcomeAdvantage at B = 512, T = 1024 1.7 ms a call
// against 0.14 ms pooled (bench/peer.mjs, one thread; its compute is ~0.09 ms). But mappings come
// back only through finalizers, which Node runs on a later event-loop turn: a synchronous loop
// of calls would fault in a fresh mapping every time (~1 ms at 2 MiB here, more than V8's
// allocation). So below kPoolFreshBytes a new mapping is made only while few are out; past that
// such results take V8's allocation until the pool refills.
constexpr size_t kPoolMinBytes = size_t{256} << 10;
constexpr size_t kPoolFreshBytes = size_t{4} << 20;
constexpr int kMaxOutstandingSmall = 32;
constexpr size_t kPoolMaxBytes = size_t{512} << 20;  // mappings kept for reuse, in all

struct Mapping {
  void* base;
  size_t size;
};

class MappingPool {
 public:
  // A mapping of at least `bytes` (exactly `bytes` when new); `fresh` says it is untouched zeros.
  // populate: a new mapping is faulted in by mmap itself (the caller writes every element).
  // A result under kPoolFreshBytes gets {nullptr, 0} when none is free and kMaxOutstandingSmall
  // are out (the caller then allocates another way).
  Mapping take(size_t bytes, bool& fresh, bool populate) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < free_.size(); ++i) {
        if (free_[i].size >= bytes && free_[i].size <= 2 * bytes) {
          Mapping m = free_[i];
          free_.erase(free_.begin() + long(i));
          pooled_ -= m.size;
          if (m.size < kPoolFreshBytes) ++outstanding_small_;
          fresh = false;
          return m;
        }
      }
      if (bytes < kPoolFreshBytes) {
        if (outstanding_small_ >= kMaxOutstandingSmall) return {nullptr, 0};
        ++outstanding_small_;
      }
    }
    fresh = true;
#if defined(__linux__)
    // (One mmap-time populate costs a fraction of a trap per page, which on a VM is ~1-2 µs.)
    const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : 0);
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) {
      if (bytes < kPoolFreshBytes) {
        std::lock_guard<std::mutex> lock(mu_);
        --outstanding_small_;
      }
      return {nullptr, bytes};
    }
    return {p, bytes};
#else
    return {nullptr, bytes};
#endif
  }

  void give_back(Mapping m) {
    std::lock_guard<std::mutex> lock(mu_);
    if (m.size < kPoolFreshBytes) --outstanding_small_;
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
  int outstanding_small_ = 0;  // mappings under kPoolFreshBytes handed out, not yet given back
};

inline MappingPool& mapping_pool() {
  static MappingPool* pool = new MappingPool();  // never destroyed: finalizers may run at exit
  return *pool;
}

// The message of every allocation failure, worded as the JS twin's (src/kernels/result.ts).
inline std::string alloc_failure(size_t n) {
  return "Cannot allocate the result (a Float32Array of length " + std::to_string(n) + "): out of memory";
}

// Node 20 refuses external ArrayBuffers above buffer.constants.MAX_LENGTH (2^32 bytes), and on
// that refusal both Node and node-addon-api free the finalizer data (a double free): larger
// results never take the external path.
constexpr size_t kMaxExternalBytes = size_t{1} << 32;

struct PooledResult {
  Mapping m;
  bool constructing;  // the finalizer must not free what the failed constructor call still owns
};

inline void finalize_pooled(napi_env env, void*, void* hint) {
  auto* h = static_cast<PooledResult*>(hint);
  if (h->constructing) return;
  int64_t left = 0;
  napi_adjust_external_memory(env, -int64_t(h->m.size), &left);
  mapping_pool().give_back(h->m);
  delete h;
}

// `new Float32Array(n)` through the JS constructor: an allocation failure is a catchable
// RangeError there, where napi_create_arraybuffer ends the process (V8's fatal OOM).
inline Napi::Float32Array float32_from_js(Napi::Env env, size_t n) {
  try {
    Napi::Function ctor = env.Global().Get("Float32Array").As<Napi::Function>();
    return ctor.New({Napi::Number::New(env, double(n))}).As<Napi::Float32Array>();
  } catch (const Napi::Error&) {
    throw Napi::RangeError::New(env, alloc_failure(n));
  }
}

// A Float32Array of n elements. With need_zeros the contents are zeros; without, the kernel
// promises to write every element (or to zero what it does not write when *reused says the
// memory came from the pool) and the contents are unspecified until it does. Never ends the
// process: every failure is a RangeError.
inline Napi::Float32Array new_float32(Napi::Env env, size_t n, bool need_zeros, bool* reused = nullptr) {
  if (reused) *reused = false;
  if (n > (size_t{1} << 53) / sizeof(float)) throw Napi::RangeError::New(env, alloc_failure(n));
  const size_t bytes = n * sizeof(float);
  if (bytes < kPoolMinBytes) return Napi::Float32Array::New(env, n);  // V8's own, small
#if defined(__linux__)
  if (bytes <= kMaxExternalBytes) {
    bool fresh = false;
    // A kernel that leaves pages unwritten (reused != nullptr: it writes only the spans of fresh
    // zeros) keeps them lazy; the others write everything, so the pages are faulted in at once.
    Mapping m = mapping_pool().take(bytes, fresh, reused == nullptr && !need_zeros);
    if (m.base == nullptr && m.size == 0) return Napi::Float32Array::New(env, n);  // none to spare: V8's
    if (m.base == nullptr) throw Napi::RangeError::New(env, alloc_failure(n));
    auto* h = new PooledResult{m, true};
    napi_value ab = nullptr;
    if (napi_create_external_arraybuffer(env, m.base, bytes, finalize_pooled, h, &ab) != napi_ok) {
      // Not ours to keep (e.g. a runtime that allows no external buffers): V8's allocation instead.
      mapping_pool().give_back(m);
      delete h;
      bool pending = false;
      if (napi_is_exception_pending(env, &pending) == napi_ok && pending) {
        napi_value ignored;
        napi_get_and_clear_last_exception(env, &ignored);
      }
      return float32_from_js(env, n);
    }
    h->constructing = false;
    int64_t adjusted = 0;
    napi_adjust_external_memory(env, int64_t(m.size), &adjusted);
    if (!fresh && need_zeros) std::memset(m.base, 0, bytes);
    if (reused) *reused = !fresh;
    return Napi::Float32Array::New(env, n, Napi::ArrayBuffer(env, ab), 0);
  }
#endif
  (void)need_zeros;
  return float32_from_js(env, n);  // zeros
}

inline Napi::Float32Array new_zeroed_float32(Napi::Env env, size_t n) { return new_float32(env, n, true); }

}  // namespace mempo
