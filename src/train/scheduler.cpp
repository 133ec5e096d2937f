#include "train/scheduler.h"

#include <algorithm>
#include <csignal>
#include <cmath>
#include <limits>

namespace nmt {

Scheduler::Scheduler(const TrainConfig& config, Group& group, const StopSignals& signals,
                     double elapsed_before)
    : tc_(config), group_(group), signals_(signals), elapsed_before_(elapsed_before) {}

double Scheduler::elapsed() const {
  return elapsed_before_ + std::chrono::duration<double>(Clock::now() - start_).count();
}

bool Scheduler::keep_going(int64_t step, BatchStream& stream) {
  if (tc_.max_steps > 0 && step >= tc_.max_steps) return false;
  stream.roll_over();
  if (tc_.max_epochs > 0 && stream.epoch() >= tc_.max_epochs) return false;
  // Checked between steps: the previous step is complete, so a checkpoint is consistent. One
  // collective for all four; SIGINT wins over SIGTERM when processes saw different ones.
  const int local = signals_.requested();
  const double seconds = elapsed();
  const bool local_time_up = tc_.max_time.seconds > 0 && seconds >= tc_.max_time.seconds;
  const auto sums = group_.sum({local == SIGINT ? 1.0 : 0.0, local == SIGTERM ? 1.0 : 0.0,
                                local_time_up ? 1.0 : 0.0, seconds});
  signal_ = sums[0] > 0 ? SIGINT : sums[1] > 0 ? SIGTERM : 0;
  time_up_ = sums[2] > 0;
  agreed_elapsed_ = sums[3] / static_cast<double>(group_.size());
  return signal_ == 0 && !time_up_;
}

double Scheduler::steps_left(int64_t step, const BatchStream& stream) const {
  double left = std::numeric_limits<double>::infinity();
  if (tc_.max_steps > 0) left = static_cast<double>(tc_.max_steps - step);
  if (tc_.max_epochs > 0) {
    const double batches = static_cast<double>(
        (tc_.max_epochs - stream.epoch()) * stream.batches_per_epoch() - stream.position());
    left = std::min(left, batches / static_cast<double>(tc_.accum_steps));
  }
  return left;
}

double Scheduler::seconds_left(int64_t step, const BatchStream& stream) const {
  const double step_avg = elapsed() / std::max<double>(1.0, static_cast<double>(step));
  const double steps = steps_left(step, stream);
  double left = std::isinf(steps) ? steps : steps * step_avg;
  if (tc_.max_time.seconds > 0)
    left = std::min(left, std::max(0.0, tc_.max_time.seconds - elapsed()));
  return left;
}

}  // namespace nmt
