// The training loop: it puts the run set-up (train/setup.h), the model on its device, the step
// (train/step.h), validation (train/validator.h), metrics (train/metrics_log.h) and checkpoints
// together, and decides when to log, validate, save and stop.
#pragma once

#include "config/config.h"
#include "train/setup.h"

namespace nmt {

// Trains until train.max_steps or train.max_epochs, early stopping or a stop signal (saves,
// then throws Interrupted). Throws Error on bad input.
void train(const Config& config, const TrainOptions& options);

}  // namespace nmt
