// log_softmax gather on the device. Each row is split into `chunks` contiguous pieces (one
// piece per block; several pieces per row only when there are too few rows to fill the GPU,
// e.g. R = 256, V = 151936). A block walks its piece once with an online max/sum per thread
// (float exp, double sum), merges the threads' states, and writes one partial; a second tiny
// kernel merges a row's partials in order (deterministic) and reads the target logit.
// Non-finite rules are those of native/cpu/gather_logprobs.cc (torch.log_softmax).
#include <cmath>
#include <cstdint>
#include <vector>

#include "common.cuh"
#include "gather_logprobs_kernels.cuh"

namespace mempo {
namespace cuda {

using namespace kern;

namespace {

void launch(Session& s, cudaStream_t st, const float* d_logits, const int32_t* d_targets, int64_t rows,
            int64_t vocab, Part* d_parts, float* d_out) {
  const int chunks = chunks_for(rows, vocab, s.sm_count());
  const int64_t piece = piece_for(vocab, chunks);
  const int64_t total = rows * chunks;
  const unsigned grid = unsigned(total < (int64_t{1} << 30) ? total : (int64_t{1} << 30));
  MEMPO_LAUNCH(lse_parts, grid, kGatherThreads, st, d_logits, rows, vocab, chunks, piece, d_parts);
  check_launch("lse_parts kernel launch");
  MEMPO_LAUNCH(lse_finish, grid_for(rows, 128, s.sm_count()), 128, st, d_logits, d_targets, rows, vocab, chunks,
               d_parts, d_out);
  check_launch("lse_finish kernel launch");
}

// Rows per host->device batch: about MEMPO_CUDA_BATCH_MB (default 512) MiB of logits.
int64_t batch_rows(int64_t rows, int64_t vocab) {
  int64_t mb = 512;
  if (const char* env = std::getenv("MEMPO_CUDA_BATCH_MB")) {
    const long v = std::atol(env);
    if (v >= 1 && v <= (1L << 20)) mb = v;
  }
  int64_t r = (mb << 20) / (vocab * int64_t(sizeof(float)));
  if (r < 1) r = 1;
  return r < rows ? r : rows;
}

}  // namespace

void gather_log_probs(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab, float* out) {
  if (rows == 0) return;
  Session s;
  const int64_t br = batch_rows(rows, vocab);
  // Slots: 0/1 logits batches, 2/3 partials, 4 targets, 5 out. Two batches in flight on two
  // streams, so batch k+1's copy overlaps batch k's kernels.
  const size_t logits_bytes = sizeof(float) * size_t(br * vocab);
  // n * chunks_for(n) <= want_blocks + n for every batch size n <= br (the last batch is shorter).
  const size_t parts_bytes = sizeof(Part) * size_t(want_blocks(s.sm_count()) + br);
  const bool two = br < rows;
  s.reserve({logits_bytes, two ? logits_bytes : 0, parts_bytes, two ? parts_bytes : 0, sizeof(int32_t) * size_t(rows),
             sizeof(float) * size_t(rows)});
  int32_t* d_targets = s.slot<int32_t>(4);
  float* d_out = s.slot<float>(5);
  check(cudaMemcpyAsync(d_targets, targets, sizeof(int32_t) * size_t(rows), cudaMemcpyHostToDevice, s.stream(0)),
        "cudaMemcpyAsync (targets)");
  check(cudaStreamSynchronize(s.stream(0)), "cudaStreamSynchronize");
  int k = 0;
  for (int64_t r0 = 0; r0 < rows; r0 += br, ++k) {
    const int64_t n = rows - r0 < br ? rows - r0 : br;
    const int b = two ? (k & 1) : 0;
    cudaStream_t st = s.stream(b);
    float* d_logits = s.slot<float>(b);
    check(cudaMemcpyAsync(d_logits, logits + r0 * vocab, sizeof(float) * size_t(n * vocab), cudaMemcpyHostToDevice, st),
          "cudaMemcpyAsync (logits)");
    launch(s, st, d_logits, d_targets + r0, n, vocab, s.slot<Part>(2 + b), d_out + r0);
  }
  s.sync();
  check(cudaMemcpyAsync(out, d_out, sizeof(float) * size_t(rows), cudaMemcpyDeviceToHost, s.stream(0)),
        "cudaMemcpyAsync (out)");
  s.sync();
}

void gather_log_probs_resident(const DeviceArray& logits, const int32_t* targets, int64_t rows, int64_t vocab,
                               float* out) {
  if (rows == 0) return;
  Session s;
  const int chunks = chunks_for(rows, vocab, s.sm_count());
  s.reserve({sizeof(Part) * size_t(rows * chunks), sizeof(int32_t) * size_t(rows), sizeof(float) * size_t(rows)});
  int32_t* d_targets = s.slot<int32_t>(1);
  float* d_out = s.slot<float>(2);
  cudaStream_t st = s.stream(0);
  check(cudaMemcpyAsync(d_targets, targets, sizeof(int32_t) * size_t(rows), cudaMemcpyHostToDevice, st),
        "cudaMemcpyAsync (targets)");
  launch(s, st, logits.data(), d_targets, rows, vocab, s.slot<Part>(0), d_out);
  check(cudaMemcpyAsync(out, d_out, sizeof(float) * size_t(rows), cudaMemcpyDeviceToHost, st), "cudaMemcpyAsync (out)");
  s.sync();
}

}  // namespace cuda
}  // namespace mempo
