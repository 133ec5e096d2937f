// Where training stands: everything besides weights, optimizer and generators that a checkpoint
// needs to continue exactly. Stored as the checkpoint's state.json.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace nmt {

struct TrainerState {
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

  nlohmann::json to_json() const;
  // Throws Error naming `origin` (the state.json path) when a field is missing or mistyped.
  static TrainerState from_json(const nlohmann::json& j, const std::string& origin);
};

}  // namespace nmt
