// Self-describing checkpoints: weights, optimizer, random generators, trainer state, config and
// vocabularies.
//
// Layout: RUN/checkpoints/ckpt-00001000/{model.pt, optimizer.pt, rng.pt [, rng_cuda.pt]
// [, rng_ranks.pt],
// state.json, config.json, spm.model | spm.src.model + spm.tgt.model}. A checkpoint is written
// into a hidden temporary directory and renamed into place, so a name ckpt-N always means
// complete. Weights are stored from the CPU and load onto any device.
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "ckpt/checkpoint_state.h"
#include "config/config.h"
#include "model/seq2seq.h"
#include "text/vocabs.h"

namespace nmt {

// A checkpoint directory, or a run directory: of its best and averaged checkpoints the one with
// the better validation value of train.best_metric (logged), the only one of them there is, or
// else its newest checkpoint. Throws if none.
std::string resolve_checkpoint(const std::string& path);
// Complete checkpoints of a run, oldest first.
std::vector<std::string> list_checkpoints(const std::string& run_dir);
// Removes leftover temporary checkpoint directories; returns how many.
int remove_partial_checkpoints(const std::string& run_dir);

// The `count` complete checkpoints of a run with the best validation at their own step
// (CheckpointState::own_valid_value, train.best_metric), best first; fewer when fewer were
// validated.
std::vector<std::string> best_validated_checkpoints(const std::string& run_dir, int64_t count,
                                                    bool higher_is_better);

// Which checkpoints pruning keeps: the keep_last newest and, with keep_best > 0, the keep_best
// best validated ones (train.average_best).
struct Retention {
  int64_t keep_last = 5;
  int64_t keep_best = 0;
  bool higher_is_better = true;
};

// Writes RUN/checkpoints/ckpt-<step> atomically, then prunes the others that `retention` does
// not keep. `state` is the trainer's, stored as state.json. Main process only;
// returns the directory. rank_rng_states: in data-parallel training, every rank's CPU generator
// state, by rank (rng_ranks.pt, written when there are several).
std::string save_checkpoint(const std::string& run_dir, int64_t step, const Config& config,
                            const Vocabs& vocabs, Seq2Seq& model,
                            torch::optim::Optimizer& optimizer, const CheckpointState& state,
                            const Retention& retention,
                            const std::vector<torch::Tensor>& rank_rng_states = {});

// Whether RUN/checkpoints/averaged already is the mean of `dirs` (a finished run resumed); by
// their names, since the run directory may have been given by another path.
bool is_average_of(const std::string& run_dir, const std::vector<std::string>& dirs);

// RUN/checkpoints/best: the best checkpoint by validation (train.best_metric).
std::string best_checkpoint_dir(const std::string& run_dir);
// RUN/checkpoints/averaged: the mean of checkpoints written at the end of training
// (train.average_last).
std::string averaged_checkpoint_dir(const std::string& run_dir);

// Writes an inference checkpoint (weights, config, vocabularies, state; no optimizer or
// generators) atomically into dir, replacing it. Main process only. Used for the best and
// averaged checkpoints.
std::string save_model_checkpoint(const std::string& dir, const Config& config,
                                  const Vocabs& vocabs, Seq2Seq& model,
                                  const CheckpointState& state);

Config read_checkpoint_config(const std::string& ckpt_dir);

// For --resume: restores the weights and (with load_optimizer) the optimizer state onto the
// model's device, and every random generator (CPU, and CUDA where saved and present). Returns
// state.json. With load_optimizer false the optimizer keeps its fresh state (--reset-optimizer).
// Rank r > 0 of a data-parallel run takes its own generator from rng_ranks.pt (kept as it is
// when the checkpoint has none for it: another world size).
CheckpointState load_training_state(const std::string& ckpt_dir, Seq2Seq& model,
                                   torch::optim::Optimizer& optimizer, bool load_optimizer = true,
                                   int rank = 0);

struct LoadedModel {
  Config config;
  Vocabs vocabs;
  Seq2Seq model{nullptr};
  std::string dir;
  CheckpointState state;  // its state.json
};
// For eval/translate: config, vocabularies and weights from one checkpoint (or run dir), the
// model in eval mode on `device`.
LoadedModel load_model(const std::string& checkpoint_or_run_dir,
                       const torch::Device& device = torch::kCPU);

// The mean of the weights of checkpoints with one model config and vocabulary, on `device`.
struct AveragedModel {
  LoadedModel loaded;             // config and vocabularies of the first; dir is empty
  int64_t step = 0;               // the newest step among them
  std::vector<std::string> from;  // the checkpoints, as given
};
AveragedModel average_models(const std::vector<std::string>& dirs,
                             const torch::Device& device = torch::kCPU);

// average_models saved as an inference checkpoint at `output`; returns its path.
std::string average_checkpoints(const std::vector<std::string>& dirs, const std::string& output);

}  // namespace nmt
