// Self-describing checkpoints: weights, optimizer, trainer state, RNG, config and vocabularies.
//
// Layout: RUN/checkpoints/ckpt-00001000/{model.pt, optimizer.pt, rng.pt, state.json,
// config.json, spm.model | spm.src.model + spm.tgt.model}. A checkpoint is written into a
// hidden temporary directory and renamed into place, so a name ckpt-N always means complete.
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "config/config.h"
#include "model/transformer.h"
#include "text/spm.h"

namespace nmt {

// Where training stands; everything needed to continue exactly.
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
};

struct Vocabs {
  SentencePiece src;
  SentencePiece tgt;
  bool joint = true;
};

// A checkpoint directory, or a run directory: its best checkpoint when there is one, else its
// newest. Throws if none.
std::string resolve_checkpoint(const std::string& path);
// Complete checkpoints of a run, oldest first.
std::vector<std::string> list_checkpoints(const std::string& run_dir);
// Removes leftover temporary checkpoint directories; returns how many.
int remove_partial_checkpoints(const std::string& run_dir);

// Writes RUN/checkpoints/ckpt-<step> atomically and prunes to keep_last. Main process only.
std::string save_checkpoint(const std::string& run_dir, const Config& config, const Vocabs& vocabs,
                            Transformer& model, torch::optim::Optimizer& optimizer,
                            const TrainerState& state, int64_t keep_last);

// RUN/checkpoints/best: the best checkpoint by validation (train.best_metric).
std::string best_checkpoint_dir(const std::string& run_dir);

// Writes an inference checkpoint (weights, config, vocabularies, state; no optimizer) atomically
// into dir, replacing it; `extra` adds keys to state.json. Main process only. Used for the best
// and averaged checkpoints.
std::string save_model_checkpoint(const std::string& dir, const Config& config,
                                  const Vocabs& vocabs, Transformer& model,
                                  const TrainerState& state,
                                  const nlohmann::json& extra = nlohmann::json::object());

// state.json of a checkpoint; throws naming the file when it is corrupt or of another version.
nlohmann::json read_checkpoint_state(const std::string& ckpt_dir);

Config read_checkpoint_config(const std::string& ckpt_dir);
Vocabs read_checkpoint_vocabs(const std::string& ckpt_dir, bool joint);
void write_vocabs(const std::string& dir, const Vocabs& vocabs);

// Restores weights, optimizer state, RNG state and trainer state for --resume.
// With load_optimizer false the optimizer keeps its fresh state (--reset-optimizer).
TrainerState load_training_state(const std::string& ckpt_dir, Transformer& model,
                                 torch::optim::Optimizer& optimizer, bool load_optimizer = true);

struct LoadedModel {
  Config config;
  Vocabs vocabs;
  Transformer model{nullptr};
  std::string dir;
};
// For eval/translate: config, vocabularies and weights from one checkpoint (or run dir).
LoadedModel load_model(const std::string& checkpoint_or_run_dir);

// Averages the weights of checkpoints with one model config and vocabulary into an inference
// checkpoint at `output`; returns its path.
std::string average_checkpoints(const std::vector<std::string>& dirs, const std::string& output);

}  // namespace nmt
