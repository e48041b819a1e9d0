// log_softmax gather kernels (see gather_logprobs.cu).
// Kernels and their launch arithmetic only (no runtime API): included by the .cu file and by
// the CPU emulation test in native/cuda/emu.
#pragma once
#include <cmath>
#include <cstdint>

#include "device.cuh"

namespace mempo {
namespace cuda {
namespace kern {

constexpr int kGatherThreads = 256;
constexpr int64_t kMinPiece = 4096;  // floats a block should at least read

struct Part {
  float max;
  int nan;
  double sum;
};

__device__ __forceinline__ void update(float x, float& m, double& s, int& nan) {
  nan |= (x != x);
  if (x > m) {  // also the first finite value after -inf: exp(-inf) = 0 drops the old sum
    s = s * double(expf(m - x)) + 1.0;
    m = x;
  } else if (x != -INFINITY) {
    s += double(expf(x - m));  // NaN propagates into s; the nan flag decides the row anyway
  }
}

// Merge (m2, s2) into (m, s). A -inf max carries no mass (its sum is 0).
__device__ __forceinline__ void merge(float& m, double& s, float m2, double s2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) {
    m = m2;
    s = s2;
    return;
  }
  if (m2 > m) {
    s = s * exp(double(m) - double(m2)) + s2;
    m = m2;
  } else {
    s += s2 * exp(double(m2) - double(m));
  }
}

__global__ void __launch_bounds__(kGatherThreads) lse_parts(const float* __restrict__ logits, int64_t rows, int64_t vocab,
                                                      int chunks, int64_t piece, Part* __restrict__ parts) {
  __shared__ float sm[32];
  __shared__ double ss[32];
  __shared__ int sn[32];
  const int64_t total = rows * chunks;
  for (int64_t b = blockIdx.x; b < total; b += gridDim.x) {
    const int64_t row = b / chunks;
    const int64_t beg = (b % chunks) * piece;
    const int64_t end = beg + piece < vocab ? beg + piece : vocab;
    const float* p = logits + row * vocab + beg;
    const int64_t n = end > beg ? end - beg : 0;
    float m = -INFINITY;
    double s = 0.0;
    int nan = 0;
    // Scalar head up to a 16-byte boundary, float4 body, scalar tail.
    int64_t head = int64_t((16 - (reinterpret_cast<uintptr_t>(p) & 15)) & 15) / 4;
    if (head > n) head = n;
    const int64_t body = (n - head) / 4;
    for (int64_t i = threadIdx.x; i < head; i += kGatherThreads) update(p[i], m, s, nan);
    const float4* p4 = reinterpret_cast<const float4*>(p + head);
    for (int64_t i = threadIdx.x; i < body; i += kGatherThreads) {
      const float4 v = __ldg(p4 + i);
      update(v.x, m, s, nan);
      update(v.y, m, s, nan);
      update(v.z, m, s, nan);
      update(v.w, m, s, nan);
    }
    for (int64_t i = head + body * 4 + threadIdx.x; i < n; i += kGatherThreads) update(p[i], m, s, nan);

    // Warp merge, then the warps' states through shared memory.
    for (int o = 16; o > 0; o >>= 1) {
      const float m2 = __shfl_down_sync(0xffffffffu, m, o);
      const double s2 = __shfl_down_sync(0xffffffffu, s, o);
      nan |= __shfl_down_sync(0xffffffffu, nan, o);
      merge(m, s, m2, s2);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();  // previous iteration's readers are done with sm/ss/sn
    if (lane == 0) {
      sm[warp] = m;
      ss[warp] = s;
      sn[warp] = nan;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      float bm = sm[0];
      double bs = ss[0];
      int bn = sn[0];
      for (int w = 1; w < kGatherThreads / 32; ++w) {
        merge(bm, bs, sm[w], ss[w]);
        bn |= sn[w];
      }
      parts[b] = Part{bm, bn, bn ? 0.0 : bs};
    }
  }
}

__global__ void lse_finish(const float* __restrict__ logits, const int32_t* __restrict__ targets, int64_t rows,
                           int64_t vocab, int chunks, const Part* __restrict__ parts, float* __restrict__ out) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows; r += int64_t(gridDim.x) * blockDim.x) {
    float m = -INFINITY;
    double s = 0.0;
    int nan = 0;
    for (int c = 0; c < chunks; ++c) {
      const Part pt = parts[r * chunks + c];
      nan |= pt.nan;
      merge(m, s, pt.max, pt.sum);
    }
    const float t = logits[r * vocab + targets[r]];
    out[r] = (nan || isinf(m)) ? __int_as_float(0x7fc00000) : float(double(t) - double(m) - log(s));
  }
}

// Pieces per row: enough blocks for ~8 per SM, but never pieces under kMinPiece floats.
int64_t want_blocks(int sm_count) { return int64_t(sm_count > 0 ? sm_count : 1) * 8; }

int chunks_for(int64_t rows, int64_t vocab, int sm_count) {
  int64_t chunks = (want_blocks(sm_count) + rows - 1) / (rows > 0 ? rows : 1);
  const int64_t max_chunks = (vocab + kMinPiece - 1) / kMinPiece;
  if (chunks > max_chunks) chunks = max_chunks;
  if (chunks > 1024) chunks = 1024;
  return int(chunks < 1 ? 1 : chunks);
}

int64_t piece_for(int64_t vocab, int chunks) {
  int64_t piece = (vocab + chunks - 1) / chunks;
  return (piece + 3) & ~int64_t{3};  // multiple of 4 floats keeps float4 alignment per piece
}

}  // namespace kern
}  // namespace cuda
}  // namespace mempo
