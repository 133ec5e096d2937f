// Getting a run directory ready for training: the resume decision and its checks, the
// vocabularies (trained or read), the training and validation data.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "config/config.h"
#include "data/batching.h"
#include "data/subword_sampling.h"
#include "data/store.h"
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
  std::unique_ptr<TokenStore> store;  // the training pairs, mapped
  std::unique_ptr<SampledPairs> sampled;  // with data.*_sampling: the pairs, segmented anew
  std::vector<CorpusRange> corpora;   // the store's corpora with their weights
  EvalSet valid;                      // empty without validation data
};

// The token store nmt train reads: data.train_store, else the text corpora prepared into
// DIR/store, or into data.cache_dir/store-KEY (KEY: a hash of the inputs' paths, the filters
// and the vocab section) so that runs with the same data share it.
std::string training_store_dir(const Config& config, const std::string& run_dir);

// With --resume: removes partial saves, picks the newest complete checkpoint and refuses config
// changes that would break an exact continuation (naming the key and the reset flag that allows
// it). Without: refuses a run directory that holds checkpoints. Then the token store: reused
// when it stands for the config's corpora (same inputs, unchanged, same filters and
// vocabulary), else prepared again, saying why (with --resume an input that changed is refused
// unless --reset-data). The vocabularies are the checkpoint's, the config's files, or the
// store's; config.json and the vocabularies are written to the run directory (main process).
// With several processes (data-parallel training) only the main one prepares, checks and
// writes; wait_for_main is called by every process: the main one after its work, the others
// wait there until it is done, then read the run directory and map the same store.
RunSetup prepare_run(const Config& config, const TrainOptions& options,
                     const std::function<void()>& wait_for_main = {});

}  // namespace nmt
