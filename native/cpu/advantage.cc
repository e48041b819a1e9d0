// Group statistics (tiny: one value per trajectory or snapshot) and the [B, T] writes that
// dominate the cost of both advantages; the writes are split across threads by rows.
#include <cmath>
#include <vector>

#include "kernels.h"
#include "parallel.h"

namespace mempo {

void group_normalize(const double* values, const int32_t* groups, int64_t n, int32_t group_count, double eps,
                     bool norm_by_std, double* out) {
  std::vector<double> count(group_count, 0.0), sum(group_count, 0.0), mean(group_count, 0.0), sq(group_count, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    count[groups[i]] += 1.0;
    sum[groups[i]] += values[i];
  }
  for (int32_t g = 0; g < group_count; ++g) mean[g] = count[g] > 1.0 ? sum[g] / count[g] : 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = values[i] - mean[groups[i]];
    sq[groups[i]] += d * d;
  }
  for (int64_t i = 0; i < n; ++i) {
    const int32_t g = groups[i];
    const double centred = values[i] - mean[g];
    if (!norm_by_std) {
      out[i] = centred;
    } else {
      const double std_dev = count[g] > 1.0 ? std::sqrt(sq[g] / (count[g] - 1.0)) : 1.0;
      out[i] = centred / (std_dev + eps);
    }
  }
}

void broadcast_rows(const double* row_values, const uint8_t* mask, int64_t rows, int64_t cols, float* out) {
  parallel_for(rows, std::max<int64_t>(1, (int64_t{1} << 16) / cols), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const float v = static_cast<float>(row_values[r]);
      const uint8_t* m = mask + r * cols;
      float* o = out + r * cols;
      for (int64_t c = 0; c < cols; ++c) o[c] = m[c] != 0 ? v : 0.0f;  // vectorised by the compiler
    }
  });
}

void write_spans(const double* values, const int32_t* spans, int64_t m, int64_t rows, int64_t cols, float* out) {
  // Bucket spans by row so each worker zeroes and fills only its own rows.
  std::vector<int64_t> first(rows + 1, 0), order(m);
  for (int64_t k = 0; k < m; ++k) ++first[spans[3 * k] + 1];
  for (int64_t r = 0; r < rows; ++r) first[r + 1] += first[r];
  std::vector<int64_t> fill(first.begin(), first.end() - 1);
  for (int64_t k = 0; k < m; ++k) order[fill[spans[3 * k]]++] = k;
  parallel_for(rows, std::max<int64_t>(1, (int64_t{1} << 16) / cols), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t j = first[r]; j < first[r + 1]; ++j) {
        const int64_t k = order[j];
        const float v = static_cast<float>(values[k]);
        float* o = out + r * cols;
        for (int32_t c = spans[3 * k + 1]; c < spans[3 * k + 2]; ++c) o[c] = v;
      }
    }
  });
}

}  // namespace mempo
