#include "train/setup.h"

#include <spdlog/spdlog.h>

#include "ckpt/checkpoint.h"
#include "util/io.h"
#include "util/util.h"

namespace nmt {

namespace {

// Trains a vocabulary on the valid lines of the given files; `name` is where it will be stored.
SentencePiece train_vocab(const Config& c, const std::vector<std::string>& files,
                          const std::string& name) {
  int64_t lines = 0;
  const std::string text = clean_text(files, &lines);
  spdlog::info("training SentencePiece {} vocabulary of {} on {} lines -> {}", c.vocab.model_type,
               c.vocab.size, lines, name);
  SpmTrainOptions o;
  o.vocab_size = c.vocab.size;
  o.model_type = c.vocab.model_type;
  o.character_coverage = c.vocab.character_coverage;
  o.input_sentence_size = c.vocab.input_sentence_size;
  o.threads = effective_threads(c);
  return SentencePiece::train(text, o);
}

Vocabs prepare_vocabs(const Config& c, const std::string& run_dir) {
  if (c.vocab.joint) {
    auto sp = c.vocab.model.empty()
                  ? train_vocab(c, {c.data.train_src, c.data.train_tgt}, run_dir + "/spm.model")
                  : SentencePiece::from_file(c.vocab.model);
    return Vocabs{sp, sp, true};
  }
  auto src = c.vocab.src_model.empty()
                 ? train_vocab(c, {c.data.train_src}, run_dir + "/spm.src.model")
                 : SentencePiece::from_file(c.vocab.src_model);
  auto tgt = c.vocab.tgt_model.empty()
                 ? train_vocab(c, {c.data.train_tgt}, run_dir + "/spm.tgt.model")
                 : SentencePiece::from_file(c.vocab.tgt_model);
  return Vocabs{src, tgt, false};
}

// Refuses to resume when the model or vocabulary changed under the run directory, and when a
// change would make the continuation differ from an uninterrupted run unless the user asked for
// a reset of the part it touches.
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
      {"data.train_src", str(saved.data.train_src), str(now.data.train_src), true},
      {"data.train_tgt", str(saved.data.train_tgt), str(now.data.train_tgt), true},
      {"data.max_len", str(saved.data.max_len), str(now.data.max_len), true},
      {"train.batch_tokens", str(a.batch_tokens), str(b.batch_tokens), true},
      {"train.accum_steps", str(a.accum_steps), str(b.accum_steps), true},
      {"train.seed", str(a.seed), str(b.seed), true},
      {"train.adam_beta1", str(a.adam_beta1), str(b.adam_beta1), false},
      {"train.adam_beta2", str(a.adam_beta2), str(b.adam_beta2), false},
      {"train.adam_eps", str(a.adam_eps), str(b.adam_eps), false},
      {"train.warmup_steps", str(a.warmup_steps), str(b.warmup_steps), false},
      {"train.lr_schedule", str(a.lr_schedule), str(b.lr_schedule), false},
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
      "{} data: {} pairs read, {} kept; dropped {} empty, {} over max_len, {} invalid UTF-8", name,
      s.total, s.kept, s.empty, s.too_long, s.invalid_utf8);
}

}  // namespace

namespace {
// The main process's part: the resume decision and its checks, the vocabularies, config.json.
void prepare_main(const Config& config, const TrainOptions& options, RunSetup& run);
// Every process's part: the training and validation data, encoded.
void load_data(const Config& config, RunSetup& run);
}  // namespace

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

  run.vocabs = run.resume_from ? read_vocabs(*run.resume_from, config.vocab.joint)
                               : prepare_vocabs(config, run_dir);
  write_file_atomic(run_dir + "/config.json", config_to_json(config) + "\n");
  write_vocabs(run_dir, run.vocabs);
}

void load_data(const Config& config, RunSetup& run) {
  CorpusStats stats;
  run.corpus = load_corpus(config.data.train_src, config.data.train_tgt, run.vocabs.src,
                           run.vocabs.tgt, config.data.max_len, &stats);
  log_corpus("training", stats);
  if (run.corpus.size() == 0)
    throw Error("no training pairs left after filtering " + config.data.train_src);
  if (!config.data.valid_src.empty()) {
    // Read once: the raw lines are translated for BLEU, their encoding gives the loss.
    run.valid = make_eval_set(read_lines(config.data.valid_src), read_lines(config.data.valid_tgt),
                              run.vocabs, config.model.max_positions);
    log_corpus("validation", run.valid.stats);
  }
}

}  // namespace

}  // namespace nmt
