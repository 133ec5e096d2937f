// A checkpoint's state.json, typed: where training stands (everything besides weights,
// optimizer and generators that a checkpoint needs to continue exactly) and, for the best and
// averaged checkpoints, what they were validated by. One reader, one writer; decisions (resume,
// the better of best and averaged, which checkpoints to average) read these fields.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace nmt {

// The state.json format this nmt writes and reads.
constexpr int kCheckpointFormatVersion = 1;

struct CheckpointState {
  int64_t step = 0;                             // optimizer steps done
  int64_t epoch = 0;                            // epoch the data iterator is in (0-based)
  int64_t batch_in_epoch = 0;                   // next batch of that epoch's plan
  int64_t tgt_tokens = 0;                       // target tokens trained on so far
  double elapsed_s = 0.0;                       // training time so far, across resumes
  bool has_best = false;                        // a validation has run and set best_value
  double best_value = 0.0;                      // best validation train.best_metric so far
  int64_t best_step = 0;                        // step of best_value
  int64_t validations_without_improvement = 0;  // for train.patience
  int64_t validated_step = -1;                  // step of the last validation (-1: none yet)
  bool has_valid_value = false;                 // valid_value is set
  double valid_value = 0.0;                     // train.best_metric of the last validation
  double loss_scale = 0.0;                      // fp16 loss scale (0: not in use)
  int64_t loss_scale_good_steps = 0;            // fp16 steps since the scale last changed
  int64_t world_size = 1;                       // data-parallel processes sharing each step
  // Best and averaged checkpoints: the metric their validation values are of.
  std::optional<BestMetric> best_metric;
  // A best checkpoint: its own validation value ("best_value" in the file).
  std::optional<double> saved_best_value;
  // An averaged checkpoint: the checkpoints it is the mean of (then only step, and the
  // validation fields when it was validated, are stored).
  std::vector<std::string> averaged_from;

  // The checkpoint's own validation value of best_metric at its step, if it has one.
  std::optional<double> own_valid_value() const;

  nlohmann::json to_json() const;
  // Throws Error naming `origin` (the state.json path) when a field is missing or mistyped, or
  // the format version is another.
  static CheckpointState from_json(const nlohmann::json& j, const std::string& origin);
  // CKPT/state.json.
  static CheckpointState read(const std::string& ckpt_dir);
};

}  // namespace nmt
