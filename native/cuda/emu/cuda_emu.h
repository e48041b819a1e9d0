// A small CPU emulation of the CUDA execution model, enough to run mempo's kernels
// (native/cuda/*_kernels.cuh) without a GPU: one OS thread per CUDA thread of a block, blocks
// run one after another, __syncthreads is a block barrier, warp shuffles exchange through a
// per-warp slot array between two warp barriers, __shared__ is `static` (one block at a time,
// so a function-static is exactly the block's shared memory). Tests logic (indexing, merges,
// reductions, barriers), not performance or the CUDA math library's last bits.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

struct emu_dim3 {
  unsigned x = 1, y = 1, z = 1;
};

namespace emu {
struct Warp {
  std::barrier<> bar{32};
  uint64_t slot[32];
};
inline thread_local emu_dim3 tl_thread, tl_block;
inline emu_dim3 g_block_dim, g_grid_dim;
inline thread_local std::barrier<>* tl_block_bar = nullptr;
inline thread_local Warp* tl_warp = nullptr;
}  // namespace emu

#define threadIdx (::emu::tl_thread)
#define blockIdx (::emu::tl_block)
#define blockDim (::emu::g_block_dim)
#define gridDim (::emu::g_grid_dim)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __restrict__

struct alignas(16) float4 {
  float x, y, z, w;
};

inline void __syncthreads() { emu::tl_block_bar->arrive_and_wait(); }

template <typename T>
T __shfl_down_sync(unsigned /*mask*/, T v, int offset) {
  static_assert(sizeof(T) <= 8, "emulated shuffle of at most 8 bytes");
  emu::Warp& w = *emu::tl_warp;
  const unsigned lane = threadIdx.x & 31;
  std::memcpy(&w.slot[lane], &v, sizeof(T));
  w.bar.arrive_and_wait();
  T r = v;
  if (lane + unsigned(offset) < 32) std::memcpy(&r, &w.slot[lane + offset], sizeof(T));
  w.bar.arrive_and_wait();
  return r;
}

template <typename T>
T __ldg(const T* p) {
  return *p;
}

inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}

using std::exp;
using std::isinf;
using std::log;
using std::sqrt;

namespace emu {

// kernel<<<grid, block>>>(args...), synchronously. block must be a multiple of 32.
template <typename Kernel, typename... Args>
void launch(unsigned grid, unsigned block, Kernel kernel, Args... args) {
  g_grid_dim = emu_dim3{grid, 1, 1};
  g_block_dim = emu_dim3{block, 1, 1};
  std::barrier<> block_bar(block);
  std::vector<std::unique_ptr<Warp>> warps;
  for (unsigned w = 0; w < (block + 31) / 32; ++w) warps.emplace_back(new Warp());
  std::vector<std::thread> threads;
  threads.reserve(block);
  for (unsigned t = 0; t < block; ++t) {
    threads.emplace_back([&, t] {
      tl_thread = emu_dim3{t, 0, 0};
      tl_block_bar = &block_bar;
      tl_warp = warps[t / 32].get();
      for (unsigned b = 0; b < grid; ++b) {
        tl_block = emu_dim3{b, 0, 0};
        kernel(args...);
        block_bar.arrive_and_wait();  // the next block may reuse __shared__ (statics)
      }
    });
  }
  for (auto& th : threads) th.join();
}

}  // namespace emu
