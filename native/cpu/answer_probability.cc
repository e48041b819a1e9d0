#include <cmath>

#include "../kernels.h"

namespace mempo {
namespace cpu {

void answer_probability(const float* logp, const uint8_t* mask, int64_t rows, int64_t cols, double threshold,
                        float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    int64_t kept = 0;
    for (int64_t i = r * cols; i < (r + 1) * cols; ++i) {
      const double v = logp[i];
      if (mask[i] != 0 && v > threshold) {  // NaN compares false: never kept
        sum += v;
        ++kept;
      }
    }
    out[r] = kept == 0 ? 0.0f : static_cast<float>(std::exp(sum / double(kept)));
  }
}

}  // namespace cpu
}  // namespace mempo
