// The two advantages: per-group statistics (mean, unbiased std,
// singleton -> mean 0 std 1; native/cpu/advantage.cc) computed on the device one block per
// group over a host-built member list (a counting sort of the group ids, O(n)), so the sums
// have a fixed order and results are deterministic; then the [rows, cols] writes: a masked
// broadcast (GRPO outcome) or a zero fill plus one block per mem span (memory advantage); for
// mempo_advantages both, then outcome and final in one pass over the memory advantage.
#include <cmath>
#include <cstdint>
#include <vector>

#include "common.cuh"
#include "advantage_kernels.cuh"

namespace mempo {
namespace cuda {

using namespace kern;

namespace {

// Uploads values and member lists into slots 0..2 and normalises into slot out_slot (doubles).
// Synchronises, so slots 0..2 are free again on return.
void normalize_on_device(Session& s, cudaStream_t st, const double* values, const int32_t* groups, int64_t n,
                         int32_t group_count, double eps, bool norm_by_std, int out_slot = 3) {
  std::vector<int32_t> offsets, order;
  member_lists(groups, n, group_count, offsets, order);
  double* d_values = s.slot<double>(0);
  int32_t* d_order = s.slot<int32_t>(1);
  int32_t* d_offsets = s.slot<int32_t>(2);
  double* d_norm = s.slot<double>(out_slot);
  check(cudaMemcpyAsync(d_values, values, sizeof(double) * size_t(n), cudaMemcpyHostToDevice, st),
        "cudaMemcpyAsync (values)");
  check(cudaMemcpyAsync(d_order, order.data(), sizeof(int32_t) * size_t(n), cudaMemcpyHostToDevice, st),
        "cudaMemcpyAsync (group members)");
  check(cudaMemcpyAsync(d_offsets, offsets.data(), sizeof(int32_t) * offsets.size(), cudaMemcpyHostToDevice, st),
        "cudaMemcpyAsync (group offsets)");
  if (group_count > 0) {
    const unsigned grid = unsigned(group_count < (1 << 20) ? group_count : (1 << 20));
    MEMPO_LAUNCH(group_normalize_kernel, grid, 128, st, d_values, d_order, d_offsets, group_count, eps,
                 norm_by_std ? 1 : 0, d_norm);
    check_launch("group_normalize kernel launch");
  }
  // The host vectors above die on return: make sure their (pageable) copies have been staged.
  check(cudaStreamSynchronize(st), "cudaStreamSynchronize");
}

}  // namespace

void outcome_advantage(const double* scores, const int32_t* groups, int64_t rows, int32_t group_count, double eps,
                       bool norm_by_std, const uint8_t* mask, int64_t cols, float* out) {
  if (rows == 0) return;
  Session s;
  const size_t n = size_t(rows * cols);
  s.reserve({sizeof(double) * size_t(rows), sizeof(int32_t) * size_t(rows), sizeof(int32_t) * (size_t(group_count) + 1),
             sizeof(double) * size_t(rows), n, sizeof(float) * n});
  cudaStream_t st = s.stream(0);
  normalize_on_device(s, st, scores, groups, rows, group_count, eps, norm_by_std);
  uint8_t* d_mask = s.slot<uint8_t>(4);
  float* d_out = s.slot<float>(5);
  check(cudaMemcpyAsync(d_mask, mask, n, cudaMemcpyHostToDevice, st), "cudaMemcpyAsync (responseMask)");
  MEMPO_LAUNCH(broadcast_kernel, grid_for(int64_t(n), kAdvThreads, s.sm_count()), kAdvThreads, st, s.slot<double>(3),
               d_mask, rows, cols, d_out);
  check_launch("broadcast kernel launch");
  check(cudaMemcpyAsync(out, d_out, sizeof(float) * n, cudaMemcpyDeviceToHost, st), "cudaMemcpyAsync (out)");
  s.sync();
}

// out_zeroed is of no use here: the device result is cleared and all of it copied into out.
void memory_advantage(const double* rewards, const int32_t* groups, int64_t m, int32_t group_count, double eps,
                      bool norm_by_std, const int32_t* spans, int64_t rows, int64_t cols, bool /*out_zeroed*/,
                      float* out) {
  const size_t n = size_t(rows * cols);
  if (n == 0) return;
  Session s;
  s.reserve({sizeof(double) * size_t(m), sizeof(int32_t) * size_t(m), sizeof(int32_t) * (size_t(group_count) + 1),
             sizeof(double) * size_t(m), sizeof(int32_t) * 3 * size_t(m), sizeof(float) * n});
  cudaStream_t st = s.stream(0);
  float* d_out = s.slot<float>(5);
  check(cudaMemsetAsync(d_out, 0, sizeof(float) * n, st), "cudaMemsetAsync (out)");
  if (m > 0) {
    normalize_on_device(s, st, rewards, groups, m, group_count, eps, norm_by_std);
    int32_t* d_spans = s.slot<int32_t>(4);
    check(cudaMemcpyAsync(d_spans, spans, sizeof(int32_t) * 3 * size_t(m), cudaMemcpyHostToDevice, st),
          "cudaMemcpyAsync (spans)");
    const unsigned grid = unsigned(m < (int64_t{1} << 30) ? m : (int64_t{1} << 30));
    MEMPO_LAUNCH(spans_kernel, grid, 128, st, s.slot<double>(3), d_spans, m, cols, d_out);
    check_launch("write_spans kernel launch");
  }
  check(cudaMemcpyAsync(out, d_out, sizeof(float) * n, cudaMemcpyDeviceToHost, st), "cudaMemcpyAsync (out)");
  s.sync();
}

// The three results on the device: memory zeroed then written span by span, then one pass
// writing outcome and final from it; each copied back once. memory_zeroed is of no use here.
void mempo_advantages(const AdvantageBatch& in, const AdvantageResults& out) {
  const size_t n = size_t(in.rows * in.cols), rows = size_t(in.rows), m = size_t(in.m);
  if (n == 0) return;
  const size_t most = rows > m ? rows : m;
  const size_t groups = size_t(in.group_count > in.mem_group_count ? in.group_count : in.mem_group_count);
  Session s;
  s.reserve({sizeof(double) * most, sizeof(int32_t) * most, sizeof(int32_t) * (groups + 1), sizeof(double) * rows,
             sizeof(double) * m, sizeof(int32_t) * 3 * m, n, sizeof(float) * n, sizeof(float) * n, sizeof(float) * n});
  cudaStream_t st = s.stream(0);
  normalize_on_device(s, st, in.scores, in.groups, in.rows, in.group_count, in.eps, in.norm_by_std, 3);
  float* d_memory = s.slot<float>(8);
  check(cudaMemsetAsync(d_memory, 0, sizeof(float) * n, st), "cudaMemsetAsync (memory)");
  if (m > 0) {
    normalize_on_device(s, st, in.mem_rewards, in.mem_groups, in.m, in.mem_group_count, in.eps, in.norm_by_std, 4);
    int32_t* d_spans = s.slot<int32_t>(5);
    check(cudaMemcpyAsync(d_spans, in.spans, sizeof(int32_t) * 3 * m, cudaMemcpyHostToDevice, st),
          "cudaMemcpyAsync (spans)");
    const unsigned grid = unsigned(in.m < (int64_t{1} << 30) ? in.m : (int64_t{1} << 30));
    MEMPO_LAUNCH(spans_kernel, grid, 128, st, s.slot<double>(4), d_spans, in.m, in.cols, d_memory);
    check_launch("write_spans kernel launch");
  }
  uint8_t* d_mask = s.slot<uint8_t>(6);
  float* d_outcome = s.slot<float>(7);
  float* d_final = s.slot<float>(9);
  check(cudaMemcpyAsync(d_mask, in.mask, n, cudaMemcpyHostToDevice, st), "cudaMemcpyAsync (responseMask)");
  MEMPO_LAUNCH(outcome_final_kernel, grid_for(int64_t(n), kAdvThreads, s.sm_count()), kAdvThreads, st,
               s.slot<double>(3), d_mask, d_memory, in.rows, in.cols, in.alpha, d_outcome, d_final);
  check_launch("outcome_final kernel launch");
  check(cudaMemcpyAsync(out.outcome, d_outcome, sizeof(float) * n, cudaMemcpyDeviceToHost, st),
        "cudaMemcpyAsync (outcome)");
  check(cudaMemcpyAsync(out.memory, d_memory, sizeof(float) * n, cudaMemcpyDeviceToHost, st),
        "cudaMemcpyAsync (memory)");
  check(cudaMemcpyAsync(out.final, d_final, sizeof(float) * n, cudaMemcpyDeviceToHost, st), "cudaMemcpyAsync (final)");
  s.sync();
}

}  // namespace cuda
}  // namespace mempo
