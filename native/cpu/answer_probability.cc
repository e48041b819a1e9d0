#include <cmath>
#include <limits>

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
    const double p = kept == 0 ? 0.0 : std::exp(sum / double(kept));
    // Rounded as a Float32Array store rounds (from FLT_MAX + half an ulp on a plain conversion
    // is undefined); the TS wrapper rejects an infinite P.
    out[r] = p >= 0x1.ffffffp+127 ? std::numeric_limits<float>::infinity() : static_cast<float>(p);
  }
}

}  // namespace cpu
}  // namespace mempo
