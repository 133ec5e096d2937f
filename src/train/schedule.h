// Learning-rate schedules (train.lr_schedule, train.cooldown), as pure functions of the step and
// of the share of the run done.
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

// The share of the run done, in [0, 1]: the largest of steps / max_steps, epochs / max_epochs
// and seconds / max_time among the limits that are set. `epochs` counts fractional epochs.
inline double run_progress(const TrainConfig& tc, int64_t steps, double epochs, double seconds) {
  double p = 0.0;
  if (tc.max_steps > 0) p = std::max(p, static_cast<double>(steps) / tc.max_steps);
  if (tc.max_epochs > 0) p = std::max(p, epochs / static_cast<double>(tc.max_epochs));
  if (tc.max_time.seconds > 0) p = std::max(p, seconds / tc.max_time.seconds);
  return std::min(p, 1.0);
}

// train.cooldown: the factor on the schedule's rate once a share `progress` of the run is done:
// 1 until the last `share` of the run, then falling linearly to 0 at its end.
inline double cooldown_factor(double progress, double share) {
  if (share <= 0.0) return 1.0;
  return std::clamp((1.0 - progress) / share, 0.0, 1.0);
}

// The rate of optimizer step `step` (1-based) under train.lr_schedule, with `progress` of the
// run done before it (run_progress) for train.cooldown.
inline double learning_rate(const TrainConfig& tc, int64_t d_model, int64_t step,
                            double progress = 0.0) {
  const double f = cooldown_factor(progress, tc.cooldown);
  if (tc.lr_schedule == LrSchedule::kInverseSqrt) return f * inverse_sqrt_lr(step, tc.warmup_steps, tc.lr);
  if (tc.lr_schedule == LrSchedule::kConstant) return f * constant_lr(step, tc.warmup_steps, tc.lr);
  return f * noam_lr(step, d_model, tc.warmup_steps, tc.lr_factor);
}

}  // namespace nmt
