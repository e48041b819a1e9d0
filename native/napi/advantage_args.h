// The argument checks both advantage wrappers share (advantage.cc, advantage_stage.cc), worded
// as args.h's: the C++ backstop behind the TypeScript validation of src/kernels.
#pragma once
#include <napi.h>

#include <cstdint>
#include <vector>

namespace mempo {
namespace binding {

// info[at] (an Int32Array of n group ids, read once) checked against info[at + 1], the group
// count; the count goes to *count.
std::vector<int32_t> group_ids(const Napi::CallbackInfo& info, size_t at, const char* arg, const char* count_arg,
                               int64_t n, int32_t* count);

// Spans (row, start, end) in bounds of [rows, cols] and not overlapping within a row.
void check_spans(const Napi::CallbackInfo& info, const int32_t* sp, int64_t m, int64_t rows, int64_t cols);

}  // namespace binding
}  // namespace mempo
