#include "train/setup.h"

#include <spdlog/spdlog.h>

#include "ckpt/checkpoint.h"
#include "config/print.h"
#include "data/prepare.h"
#include "util/io.h"
#include "util/lock.h"
#include "util/util.h"

namespace nmt {

namespace {

// Refuses to resume when the model or vocabulary changed under the run directory, and when a
// change would make the continuation differ from an uninterrupted run unless the user asked for
// a reset of the part it touches.
std::string corpora_json(const std::vector<CorpusConfig>& corpora) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& k : corpora) {
    out.push_back({k.src, k.tgt, k.weight});
    if (!k.tag.empty()) out.back().push_back(k.tag);
  }
  return out.dump();
}

// What data.<side> draws: "off", or its settings as the config prints them (every key of the
// schema; the section is printed only when sampling is on).
std::string sampling_json(const Config& c, const char* side) {
  const auto data = nlohmann::json::parse(config_to_json(c)).at("data");
  return data.contains(side) ? data.at(side).dump() : "off";
}

void check_resume_compatible(const Config& now, const Config& saved, const TrainOptions& o) {
  if (!same_model_config(now.model, saved.model))
    throw Error("--resume: the model section differs from the checkpoint's; use a new --run-dir");
  if (now.vocab.joint != saved.vocab.joint)
    throw Error("--resume: vocab.joint differs from the checkpoint's; use a new --run-dir");
  struct Field {
    const char* key;
    std::string before, after;
    bool data;  // true: the data position depends on it; false: the optimizer state does
  };
  auto str = [](const auto& v) { return nlohmann::json(v).dump(); };
  const auto &a = saved.train, &b = now.train;
  const std::vector<Field> fields = {
      {now.data.training.from_list ? "data.train" : "data.train_src/train_tgt",
       corpora_json(saved.data.training.corpora), corpora_json(now.data.training.corpora), true},
      {"data.train_store", str(saved.data.training.store), str(now.data.training.store), true},
      {"data.max_len", str(saved.data.max_len), str(now.data.max_len), true},
      {"data.max_len_ratio", str(saved.data.max_len_ratio), str(now.data.max_len_ratio), true},
      {"data.dedup", str(saved.data.dedup), str(now.data.dedup), true},
      {"data.src_sampling", sampling_json(saved, "src_sampling"),
       sampling_json(now, "src_sampling"), true},
      {"data.tgt_sampling", sampling_json(saved, "tgt_sampling"),
       sampling_json(now, "tgt_sampling"), true},
      {"train.batch_tokens", str(a.batch_tokens), str(b.batch_tokens), true},
      {"train.accum_steps", str(a.accum_steps), str(b.accum_steps), true},
      {"train.seed", str(a.seed), str(b.seed), true},
      {"train.adam_beta1", str(a.adam_beta1), str(b.adam_beta1), false},
      {"train.adam_beta2", str(a.adam_beta2), str(b.adam_beta2), false},
      {"train.adam_eps", str(a.adam_eps), str(b.adam_eps), false},
      {"train.warmup_steps", str(a.warmup_steps), str(b.warmup_steps), false},
      {"train.lr_schedule", str(name_of(a.lr_schedule)), str(name_of(b.lr_schedule)), false},
      {"train.lr_factor", str(a.lr_factor), str(b.lr_factor), false},
      {"train.lr", str(a.lr), str(b.lr), false},
      {"train.cooldown", str(a.cooldown), str(b.cooldown), false},
  };
  for (const auto& f : fields) {
    if (f.before == f.after || (f.data ? o.reset_data : o.reset_optimizer)) continue;
    throw Error(std::string("--resume: ") + f.key + " changed from " + f.before + " to " + f.after +
                ", so training cannot continue exactly as it would have; pass " +
                (f.data ? "--reset-data to start a fresh pass over the data"
                        : "--reset-optimizer to start with a fresh optimizer state") +
                ", restore the setting, or use a new --run-dir");
  }
}

void log_corpus(const char* name, const CorpusStats& s) {
  spdlog::info(
      "{} data: {} pairs read, {} kept; dropped {} empty, {} over max_len, {} invalid UTF-8, {} "
      "over max_len_ratio, {} duplicates",
      name, s.total, s.kept, s.empty, s.too_long, s.invalid_utf8, s.ratio, s.duplicate);
}

// A store's tags are fixed when it is prepared: a tag data.train gives beside data.train_store
// must be the one the store's corpus has (entries without one only weigh the corpora).
void check_store_tags(const TrainingData& t, const StoreHeader& h) {
  for (size_t i = 0; i < t.corpora.size() && i < h.inputs.size(); ++i) {
    const std::string& tag = t.corpora[i].tag;
    if (!tag.empty() && tag != h.inputs[i].tag)
      throw Error(t.key(i, "tag") + ": \"" + tag + "\", but corpus " + std::to_string(i) +
                  " of the store " + t.store + " has " +
                  (h.inputs[i].tag.empty() ? "no tag" : "tag \"" + h.inputs[i].tag + "\"") +
                  "; prepare the store with the tag (nmt prepare)");
  }
}

// The vocabularies fixed before the data is looked at: the checkpoint's, or the config's files.
std::optional<Vocabs> fixed_vocabs(const Config& c, const RunSetup& run) {
  if (run.resume_from) return read_vocabs(*run.resume_from, c.vocab.joint);
  return named_vocabs(c.vocab);
}

// The store of the config's text corpora in `dir`: reused when it stands for them, else
// prepared again. Returns it open.
std::unique_ptr<TokenStore> ready_store(const Config& c, const TrainOptions& options,
                                        const std::optional<Vocabs>& fixed, bool resuming,
                                        const std::string& dir) {
  const Vocabs* vocabs = fixed ? &*fixed : nullptr;
  std::string why = "none was prepared yet";
  if (file_exists(dir + "/header.json")) {
    StoreMismatch mismatch;
    try {
      auto store = TokenStore::open(dir, c.data.in_memory);
      mismatch = store_mismatch(*store, c, vocabs);
      if (!mismatch) {
        spdlog::info("token store {}: reused ({} pairs)", dir, store->size());
        return store;
      }
      why = mismatch.why;
    } catch (const Error& e) {
      why = e.what();  // damaged or of another version: prepared again from its inputs
    }
    // An input that changed under a checkpoint: its data position means nothing any more.
    if (resuming && !options.reset_data &&
        mismatch.kind == StoreMismatch::Kind::kInputChanged)
      throw Error("--resume: " + why + " since the token store " + dir +
                  " was made, so training cannot continue exactly as it would have; pass "
                  "--reset-data to prepare it again and start a fresh pass over the data");
  }
  spdlog::info("token store {}: preparing ({})", dir, why);
  prepare_store(c, vocabs, dir, effective_threads(c));
  return TokenStore::open(dir, c.data.in_memory);
}

}  // namespace

namespace {
// The main process's part: the resume decision and its checks, the vocabularies, config.json.
void prepare_main(const Config& config, const TrainOptions& options, RunSetup& run);
// Every process's part: the training and validation data, encoded.
void load_data(const Config& config, RunSetup& run);
}  // namespace

std::string training_store_dir(const Config& config, const std::string& run_dir) {
  if (config.data.training.from_store()) return config.data.training.store;
  if (config.data.cache_dir.empty()) return run_dir + "/store";
  return config.data.cache_dir + "/store-" + store_key(config);
}

RunSetup prepare_run(const Config& config, const TrainOptions& options,
                     const std::function<void()>& wait_for_main) {
  const std::string& run_dir = options.run_dir;
  RunSetup run;
  if (!is_main_process()) {
    // The main process has checked the run directory, cleaned it and written the vocabularies
    // there (trained, the config's or the checkpoint's); the others read what it decided.
    wait_for_main();
    if (options.resume) {
      const auto all = list_checkpoints(run_dir);
      if (all.empty())
        throw Error("--resume: no complete checkpoint in " + run_dir + "/checkpoints");
      run.resume_from = all.back();
    }
    run.vocabs = read_vocabs(run_dir, config.vocab.joint);
    run.store = TokenStore::open(training_store_dir(config, run_dir), config.data.in_memory);
  } else {
    prepare_main(config, options, run);
    if (wait_for_main) wait_for_main();
  }
  load_data(config, run);
  return run;
}

namespace {

void prepare_main(const Config& config, const TrainOptions& options, RunSetup& run) {
  const std::string& run_dir = options.run_dir;
  if (options.resume) {
    if (const int n = remove_partial_checkpoints(run_dir); n > 0)
      spdlog::warn("removed {} incomplete checkpoint director{} left by an interrupted save", n,
                   n == 1 ? "y" : "ies");
    const auto all = list_checkpoints(run_dir);
    if (all.empty()) throw Error("--resume: no complete checkpoint in " + run_dir + "/checkpoints");
    run.resume_from = all.back();
    check_resume_compatible(config, read_checkpoint_config(*run.resume_from), options);
  } else if (!list_checkpoints(run_dir).empty()) {
    throw Error(run_dir +
                " already holds checkpoints: pass --resume to continue, or use a new --run-dir");
  }

  const auto fixed = fixed_vocabs(config, run);
  const std::string dir = training_store_dir(config, run_dir);
  if (config.data.training.from_store()) {
    run.store = TokenStore::open(dir, config.data.in_memory);
    if (fixed)
      if (auto why = run.store->vocab_mismatch(*fixed))
        throw Error("data.train_store: " + dir + " cannot be used: " + *why);
    check_store_tags(config.data.training, run.store->header());
  } else if (config.data.cache_dir.empty()) {
    run.store = ready_store(config, options, fixed, run.resume_from.has_value(), dir);
  } else {
    // Runs that share the cache take turns; the first prepares, the others reuse.
    create_directories(config.data.cache_dir);
    const std::string who = "nmt train (preparing " + dir + ")";
    std::optional<DirLock> lock;
    try {
      lock.emplace(config.data.cache_dir, who);
    } catch (const Error& e) {
      spdlog::info("{}: waiting for it", e.what());
      lock.emplace(config.data.cache_dir, who, true);
    }
    run.store = ready_store(config, options, fixed, run.resume_from.has_value(), dir);
  }
  run.vocabs = fixed ? *fixed : run.store->vocabs();
  write_file_atomic(run_dir + "/config.json", config_to_json(config) + "\n");
  write_vocabs(run_dir, run.vocabs);
}

void load_data(const Config& config, RunSetup& run) {
  log_corpus("training", run.store->stats());
  run.corpora = run.store->corpora(config.data.training.weights());
  if (SampledPairs::wanted(config.data))
    run.sampled = std::make_unique<SampledPairs>(*run.store, run.vocabs, config.data,
                                                 static_cast<uint64_t>(config.train.seed));
  if (!config.data.valid_src.empty()) {
    // Read once: the raw lines are translated for BLEU, their encoding gives the loss.
    run.valid = make_eval_set(read_lines(config.data.valid_src), read_lines(config.data.valid_tgt),
                              run.vocabs, config.model.max_positions);
    log_corpus("validation", run.valid.stats);
  }
}

}  // namespace

}  // namespace nmt
