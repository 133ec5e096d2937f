// The training loop: data, model, Adam + Noam, checkpoints, validation, metrics.
#pragma once

#include <string>

#include "config/config.h"

namespace nmt {

struct TrainOptions {
  std::string run_dir;  // receives config.json, vocabularies, metrics.jsonl, train.log, checkpoints
  bool resume = false;  // continue from the newest complete checkpoint in run_dir
  bool reset_optimizer = false;  // resume with a fresh optimizer state (new optimizer settings)
  bool reset_data = false;       // resume with a fresh data pass (new data or batching settings)
};

// Trains until train.max_steps or train.max_epochs. Throws Error on bad input.
void train(const Config& config, const TrainOptions& options);

}  // namespace nmt
