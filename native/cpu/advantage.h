// The CPU steps of both advantages (native/cpu/advantage.cc), exposed for the CUDA emulation
// test (native/cuda/emu), which checks the device kernels against them one step at a time.
#pragma once
#include <cstdint>
#include <vector>

namespace mempo {
namespace cpu {

// values[i] normalised within its group (mean, unbiased std, singleton -> mean 0 std 1).
void group_normalize(const double* values, const int32_t* groups, int64_t n, int32_t group_count, double eps,
                     bool norm_by_std, double* out);

// out[r, c] = row_values[r] where mask[r, c] != 0, else 0.
void broadcast_rows(const double* row_values, const uint8_t* mask, int64_t rows, int64_t cols, float* out);

// The spans of each row, by start: those of row r are order[first[r] .. first[r + 1]).
struct SpansByRow {
  std::vector<int64_t> first, order;
};
SpansByRow spans_by_row(const int32_t* spans, int64_t m, int64_t rows);

// out[row, start:end] = values[m] for each span m = (row, start, end), 0 elsewhere: with
// zero_first the rows are cleared first, else out must arrive zeroed.
void write_spans(const double* values, const int32_t* spans, int64_t m, int64_t rows, int64_t cols, bool zero_first,
                 float* out);

}  // namespace cpu
}  // namespace mempo
