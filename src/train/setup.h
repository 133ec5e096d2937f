// Getting a run directory ready for training: the resume decision and its checks, the
// vocabularies (trained or read), the training and validation data.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "config/config.h"
#include "data/corpus.h"
#include "eval/evaluate.h"
#include "text/vocabs.h"

namespace nmt {

struct TrainOptions {
  std::string run_dir;  // receives config.json, vocabularies, metrics.jsonl, train.log, checkpoints
  bool resume = false;  // continue from the newest complete checkpoint in run_dir
  bool reset_optimizer = false;  // resume with a fresh optimizer state (new optimizer settings)
  bool reset_data = false;       // resume with a fresh data pass (new data or batching settings)
};

struct RunSetup {
  std::optional<std::string> resume_from;  // the checkpoint to continue from
  Vocabs vocabs;
  Corpus corpus;  // encoded, filtered training pairs
  EvalSet valid;  // empty without validation data
};

// With --resume: removes partial saves, picks the newest complete checkpoint and refuses config
// changes that would break an exact continuation (naming the key and the reset flag that allows
// it). Without: refuses a run directory that holds checkpoints. Then the vocabularies (the
// checkpoint's, the config's files, or trained into the run directory), config.json and the
// vocabularies written to the run directory (main process), and the data encoded.
// With several processes (data-parallel training) only the main one does the checks and writes;
// wait_for_main is a barrier the main process passes after them and the others before reading
// the run directory.
RunSetup prepare_run(const Config& config, const TrainOptions& options,
                     const std::function<void()>& wait_for_main = {});

}  // namespace nmt
