// The Noam learning-rate schedule of "Attention Is All You Need".
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace nmt {

// factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), for step >= 1.
inline double noam_lr(int64_t step, int64_t d_model, int64_t warmup, double factor) {
  const double s = static_cast<double>(std::max<int64_t>(step, 1));
  return factor * std::pow(static_cast<double>(d_model), -0.5) *
         std::min(std::pow(s, -0.5), s * std::pow(static_cast<double>(warmup), -1.5));
}

}  // namespace nmt
