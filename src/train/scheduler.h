// When training logs, validates, saves and stops, decided in one place (as Marian's Scheduler
// does): the step and epoch limits, train.max_time, stop signals, and the agreement of every
// process on the stop, so that a group stops together at the same step.
#pragma once

#include <chrono>
#include <cstdint>

#include "config/config.h"
#include "data/batching.h"
#include "group/group.h"
#include "util/signals.h"

namespace nmt {

class Scheduler {
 public:
  // elapsed_before: training time of earlier runs of this run directory (--resume).
  Scheduler(const TrainConfig& config, Group& group, const StopSignals& signals,
            double elapsed_before);

  // Starts the training clock (construction and the first epoch's plan are not training time).
  void start() { start_ = Clock::now(); }
  // Before each step: whether to train on. False at train.max_steps or train.max_epochs, when
  // any process received a stop signal, or when train.max_time is spent on any of them; every
  // process gets the same answer. Rolls the stream over to the next epoch when its epoch is done.
  bool keep_going(int64_t step, BatchStream& stream);
  // Why keep_going said no: the signal any process received (SIGINT before SIGTERM), 0 for none.
  int stop_signal() const { return signal_; }
  // Whether the time budget ended training.
  bool time_up() const { return time_up_; }

  bool log_due(int64_t step) const { return step % tc_.log_every == 0; }
  bool validation_due(int64_t step) const {
    return tc_.valid_every > 0 && step % tc_.valid_every == 0;
  }
  bool save_due(int64_t step) const { return step % tc_.save_every == 0; }

  // Training time across resumes, on this process.
  double elapsed() const;
  // The mean over the processes at the last keep_going: the clock of the learning-rate
  // schedule, the same on every process.
  double agreed_elapsed() const { return agreed_elapsed_; }
  // Seconds to the end by max_steps / max_epochs at the mean step time so far, or by max_time,
  // whichever comes first (the log's ETA).
  double seconds_left(int64_t step, const BatchStream& stream) const;

 private:
  using Clock = std::chrono::steady_clock;
  double steps_left(int64_t step, const BatchStream& stream) const;

  const TrainConfig& tc_;
  Group& group_;
  const StopSignals& signals_;
  double elapsed_before_;
  Clock::time_point start_ = Clock::now();
  int signal_ = 0;
  bool time_up_ = false;
  double agreed_elapsed_ = 0;
};

}  // namespace nmt
