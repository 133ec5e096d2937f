// Learning-rate schedules (train.lr_schedule), as pure functions of the step.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "config/config.h"

namespace nmt {

// The Noam schedule of "Attention Is All You Need":
// factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), for step >= 1.
inline double noam_lr(int64_t step, int64_t d_model, int64_t warmup, double factor) {
  const double s = static_cast<double>(std::max<int64_t>(step, 1));
  return factor * std::pow(static_cast<double>(d_model), -0.5) *
         std::min(std::pow(s, -0.5), s * std::pow(static_cast<double>(warmup), -1.5));
}

// fairseq's inverse_sqrt: linear warm-up to `peak` at step `warmup`, then peak * sqrt(warmup / s).
inline double inverse_sqrt_lr(int64_t step, int64_t warmup, double peak) {
  const double s = static_cast<double>(std::max<int64_t>(step, 1));
  const double w = static_cast<double>(warmup);
  return peak * std::min(s / w, std::sqrt(w / s));
}

// Linear warm-up to `peak`, then constant.
inline double constant_lr(int64_t step, int64_t warmup, double peak) {
  const double s = static_cast<double>(std::max<int64_t>(step, 1));
  return peak * std::min(1.0, s / static_cast<double>(warmup));
}

// The rate of optimizer step `step` (1-based) under train.lr_schedule.
inline double learning_rate(const TrainConfig& tc, int64_t d_model, int64_t step) {
  if (tc.lr_schedule == "inverse_sqrt") return inverse_sqrt_lr(step, tc.warmup_steps, tc.lr);
  if (tc.lr_schedule == "constant") return constant_lr(step, tc.warmup_steps, tc.lr);
  return noam_lr(step, d_model, tc.warmup_steps, tc.lr_factor);
}

}  // namespace nmt
