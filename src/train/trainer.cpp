#include "train/trainer.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "ckpt/checkpoint.h"
#include "data/batching.h"
#include "data/corpus.h"
#include "data/tensors.h"
#include "decode/translate.h"
#include "eval/metrics.h"
#include "model/transformer.h"
#include "train/loss.h"
#include "train/noam.h"
#include "util/log.h"
#include "util/util.h"

namespace nmt {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// Trains a vocabulary from the valid lines of the given files into PREFIX.model.
SentencePiece train_vocab(const Config& c, const std::vector<std::string>& files,
                          const std::string& prefix) {
  const std::string text = prefix + ".train.txt";
  const int64_t lines = write_clean_lines(files, text);
  spdlog::info("training SentencePiece {} vocabulary of {} on {} lines -> {}.model",
               c.vocab.model_type, c.vocab.size, lines, prefix);
  SpmTrainOptions o;
  o.inputs = {text};
  o.model_prefix = prefix;
  o.vocab_size = c.vocab.size;
  o.model_type = c.vocab.model_type;
  o.character_coverage = c.vocab.character_coverage;
  o.input_sentence_size = c.vocab.input_sentence_size;
  o.threads = effective_threads(c);
  const std::string model_path = SentencePiece::train(o);
  fs::remove(text);
  return SentencePiece::from_file(model_path);
}

Vocabs prepare_vocabs(const Config& c, const std::string& run_dir) {
  if (c.vocab.joint) {
    auto sp = c.vocab.model.empty()
                  ? train_vocab(c, {c.data.train_src, c.data.train_tgt}, run_dir + "/spm")
                  : SentencePiece::from_file(c.vocab.model);
    return Vocabs{sp, sp, true};
  }
  auto src = c.vocab.src_model.empty() ? train_vocab(c, {c.data.train_src}, run_dir + "/spm.src")
                                       : SentencePiece::from_file(c.vocab.src_model);
  auto tgt = c.vocab.tgt_model.empty() ? train_vocab(c, {c.data.train_tgt}, run_dir + "/spm.tgt")
                                       : SentencePiece::from_file(c.vocab.tgt_model);
  return Vocabs{src, tgt, false};
}

// Walks the epochs' batch plans; its position is part of the checkpoint.
class BatchStream {
 public:
  BatchStream(const Corpus& corpus, int64_t batch_tokens, uint64_t seed)
      : src_lens_(sequence_lengths(corpus.src)),
        tgt_lens_(sequence_lengths(corpus.tgt)),
        batch_tokens_(batch_tokens),
        seed_(seed) {}

  void seek(int64_t epoch, int64_t batch_in_epoch) {
    epoch_ = epoch;
    plan_ = make_batches(src_lens_, tgt_lens_, batch_tokens_, epoch_seed(seed_, epoch_));
    if (batch_in_epoch < 0 || batch_in_epoch > static_cast<int64_t>(plan_.size()))
      throw Error("checkpoint data position " + std::to_string(batch_in_epoch) +
                  " is outside epoch " + std::to_string(epoch) + " (" +
                  std::to_string(plan_.size()) + " batches): was the training data changed?");
    next_ = batch_in_epoch;
  }

  // Moves to the next epoch when the current one is used up.
  void roll_over() {
    if (next_ >= static_cast<int64_t>(plan_.size())) seek(epoch_ + 1, 0);
  }

  const std::vector<int64_t>& take() { return plan_[next_++]; }
  int64_t epoch() const { return epoch_; }
  int64_t position() const { return next_; }
  int64_t batches_per_epoch() const { return static_cast<int64_t>(plan_.size()); }

 private:
  std::vector<int64_t> src_lens_, tgt_lens_;
  int64_t batch_tokens_;
  uint64_t seed_;
  int64_t epoch_ = 0;
  int64_t next_ = 0;
  std::vector<std::vector<int64_t>> plan_;
};

// Validation data: the filtered corpus for the loss, the raw lines for BLEU.
struct ValidSet {
  Corpus corpus;
  std::vector<std::string> src_lines, ref_lines;
  bool empty() const { return src_lines.empty(); }
};

struct ValidResult {
  CorpusLoss loss;
  double bleu = 0, chrf = 0;
};

ValidResult validate(const Config& config, const Vocabs& vocabs, Transformer& model,
                     const ValidSet& valid) {
  ValidResult r;
  r.loss = corpus_loss(model, valid.corpus, config.train.batch_tokens);
  const bool was_training = model->is_training();
  model->eval();
  LoadedModel view{config, vocabs, model, ""};
  const auto hyps = translate_best(view, valid.src_lines,
                                   translate_options(config, config.train.valid_beam), nullptr);
  model->train(was_training);
  r.bleu = corpus_bleu(hyps, valid.ref_lines).score;
  r.chrf = corpus_chrf(hyps, valid.ref_lines).score;
  return r;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  return buf;
}

void log_corpus(const char* name, const CorpusStats& s) {
  spdlog::info(
      "{} data: {} pairs read, {} kept; dropped {} empty, {} over max_len, {} invalid UTF-8", name,
      s.total, s.kept, s.empty, s.too_long, s.invalid_utf8);
}

// SIGINT/SIGTERM during training: the first finishes the current step, saves and exits with
// 128 + signal; a second SIGINT exits at once.
volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int sig) {
  if (g_stop_signal != 0 && sig == SIGINT) _exit(128 + SIGINT);
  g_stop_signal = sig;
}

class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }
  int requested() const { return g_stop_signal; }

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

// Test hook: NMT_DEBUG_NAN_STEPS="3,4" poisons the loss of those update attempts (1-based).
std::vector<int64_t> debug_nan_steps() {
  std::vector<int64_t> steps;
  if (const char* env = std::getenv("NMT_DEBUG_NAN_STEPS"))
    for (const auto& part : split(env, ','))
      if (!trim(part).empty()) steps.push_back(std::stoll(trim(part)));
  return steps;
}

// The one place where the step's gradients are complete before clipping and the update.
// Data-parallel training will all-reduce them here.
void gradients_ready(torch::nn::Module& /*model*/) {}

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
      {"train.lr_factor", str(a.lr_factor), str(b.lr_factor), false},
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

}  // namespace

void train(const Config& config, const TrainOptions& options) {
  const std::string& run_dir = options.run_dir;
  const bool main_process = is_main_process();
  if (main_process) fs::create_directories(run_dir);
  if (main_process) setup_logging(run_dir + "/train.log");
  const int threads = effective_threads(config);
  torch::set_num_threads(threads);
  keep_freed_memory();
  spdlog::info("nmt train: run dir {}, {} threads", run_dir, threads);

  std::optional<std::string> resume_from;
  if (options.resume) {
    if (const int n = remove_partial_checkpoints(run_dir); n > 0)
      spdlog::warn("removed {} incomplete checkpoint director{} left by an interrupted save", n,
                   n == 1 ? "y" : "ies");
    const auto all = list_checkpoints(run_dir);
    if (all.empty()) throw Error("--resume: no complete checkpoint in " + run_dir + "/checkpoints");
    resume_from = all.back();
    check_resume_compatible(config, read_checkpoint_config(*resume_from), options);
  } else if (!list_checkpoints(run_dir).empty()) {
    throw Error(run_dir +
                " already holds checkpoints: pass --resume to continue, or use a new --run-dir");
  }

  const Vocabs vocabs = resume_from ? read_checkpoint_vocabs(*resume_from, config.vocab.joint)
                                    : prepare_vocabs(config, run_dir);
  if (main_process) {
    write_file_atomic(run_dir + "/config.json", config_to_json(config) + "\n");
    write_vocabs(run_dir, vocabs);
  }

  CorpusStats stats;
  const Corpus corpus = load_corpus(config.data.train_src, config.data.train_tgt, vocabs.src,
                                    vocabs.tgt, config.data.max_len, &stats);
  log_corpus("training", stats);
  if (corpus.size() == 0)
    throw Error("no training pairs left after filtering " + config.data.train_src);
  ValidSet valid;
  if (!config.data.valid_src.empty()) {
    // Read once: the raw lines are translated for BLEU, their encoding gives the loss.
    valid.src_lines = read_lines(config.data.valid_src);
    valid.ref_lines = read_lines(config.data.valid_tgt);
    valid.corpus = encode_corpus(valid.src_lines, valid.ref_lines, vocabs.src, vocabs.tgt,
                                 config.model.max_positions - 2, false, &stats);
    log_corpus("validation", stats);
  }

  torch::manual_seed(static_cast<uint64_t>(config.train.seed));
  Transformer model(config.model, vocabs.src.size(), vocabs.tgt.size());
  int64_t n_params = 0;
  for (const auto& p : model->parameters()) n_params += p.numel();
  spdlog::info("model: {} parameters, vocab {} / {}", n_params, vocabs.src.size(),
               vocabs.tgt.size());
  torch::optim::Adam optimizer(model->parameters(),
                               torch::optim::AdamOptions(1.0)
                                   .betas({config.train.adam_beta1, config.train.adam_beta2})
                                   .eps(config.train.adam_eps));

  TrainerState state;
  if (resume_from) {
    state = load_training_state(*resume_from, model, optimizer, !options.reset_optimizer);
    if (options.reset_optimizer)
      spdlog::info("--reset-optimizer: starting with a fresh Adam state");
    if (options.reset_data) {
      // A fresh pass: the next epoch's plan from its first batch.
      if (state.batch_in_epoch > 0) ++state.epoch;
      state.batch_in_epoch = 0;
      spdlog::info("--reset-data: starting a fresh pass over the data (epoch {})", state.epoch + 1);
    }
    spdlog::info("resumed from {} at step {}, epoch {}, batch {}", *resume_from, state.step,
                 state.epoch + 1, state.batch_in_epoch);
  }
  BatchStream stream(corpus, config.train.batch_tokens, static_cast<uint64_t>(config.train.seed));
  stream.seek(state.epoch, state.batch_in_epoch);
  spdlog::info("{} batches per epoch of <= {} tokens", stream.batches_per_epoch(),
               config.train.batch_tokens);

  std::ofstream metrics;
  if (main_process && resume_from) {
    // Rows logged after the checkpoint (before an interruption) are about to be redone.
    const std::string path = run_dir + "/metrics.jsonl";
    if (file_exists(path)) {
      std::string kept;
      for (const auto& line : read_lines(path)) {
        const json row = json::parse(line, nullptr, false);
        if (row.is_object() && row.value("step", int64_t{0}) <= state.step) kept += line + "\n";
      }
      write_file_atomic(path, kept);
    }
  }
  if (main_process) {
    metrics.open(run_dir + "/metrics.jsonl", std::ios::app);
    if (!metrics) throw Error("cannot write " + run_dir + "/metrics.jsonl");
  }
  auto write_metrics = [&](const json& row) {
    if (!main_process) return;
    metrics << row.dump() << '\n';
    metrics.flush();
  };

  const auto& tc = config.train;
  auto done = [&] {
    if (tc.max_steps > 0 && state.step >= tc.max_steps) return true;
    stream.roll_over();
    return tc.max_epochs > 0 && stream.epoch() >= tc.max_epochs;
  };
  // Steps left, for the ETA.
  auto steps_left = [&]() -> double {
    double left = std::numeric_limits<double>::infinity();
    if (tc.max_steps > 0) left = static_cast<double>(tc.max_steps - state.step);
    if (tc.max_epochs > 0) {
      const double batches = static_cast<double>(
          (tc.max_epochs - stream.epoch()) * stream.batches_per_epoch() - stream.position());
      left = std::min(left, batches / static_cast<double>(tc.accum_steps));
    }
    return left;
  };

  model->train();
  const auto session_start = Clock::now();
  const double elapsed_before = state.elapsed_s;
  auto elapsed = [&] {
    return elapsed_before + std::chrono::duration<double>(Clock::now() - session_start).count();
  };
  auto interval_start = Clock::now();
  int64_t interval_tokens = 0, interval_steps = 0;
  double interval_loss = 0, interval_nll = 0, last_lr = 0, last_grad_norm = 0;
  // Where the interval's time went, and how much of each batch was padding (the profile that
  // docs/performance.md is built from). CPU ops are synchronous, so wall clocks suffice.
  struct Phases {
    double data = 0, forward = 0, backward = 0, update = 0;
    int64_t src_cells = 0, tgt_cells = 0, src_tokens = 0, tgt_tokens = 0;
  } phases;
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  int64_t last_saved_step = resume_from ? state.step : -1;
  const auto params = model->parameters();

  auto save = [&] {
    state.epoch = stream.epoch();
    state.batch_in_epoch = stream.position();
    state.elapsed_s = elapsed();
    const auto path =
        save_checkpoint(run_dir, config, vocabs, model, optimizer, state, tc.keep_last);
    last_saved_step = state.step;
    clear_progress();
    spdlog::info("saved checkpoint {}", path);
  };
  // Validates, keeps the best checkpoint and counts validations without improvement. Returns
  // false when early stopping says training should end.
  const bool higher_is_better = tc.best_metric != "loss";
  int64_t last_validated_step = -1;
  auto run_validation = [&]() -> bool {
    last_validated_step = state.step;
    if (valid.empty()) return true;
    const auto r = validate(config, vocabs, model, valid);
    clear_progress();
    const double value = tc.best_metric == "bleu"   ? r.bleu
                         : tc.best_metric == "chrf" ? r.chrf
                                                    : r.loss.nll_per_token;
    const bool improved =
        !state.has_best || (higher_is_better ? value > state.best_value : value < state.best_value);
    spdlog::info(
        "validation at step {}: nll {:.4f}, ppl {:.2f}, BLEU {:.2f}, chrF2 {:.2f} "
        "({} tokens, beam {}){}",
        state.step, r.loss.nll_per_token, r.loss.ppl, r.bleu, r.chrf, r.loss.tokens, tc.valid_beam,
        improved ? " *best*" : "");
    write_metrics({{"step", state.step},
                   {"valid_loss", r.loss.nll_per_token},
                   {"valid_ppl", r.loss.ppl},
                   {"valid_tokens", r.loss.tokens},
                   {"valid_bleu", r.bleu},
                   {"valid_chrf", r.chrf},
                   {"best", improved}});
    if (improved) {
      state.has_best = true;
      state.best_value = value;
      state.best_step = state.step;
      state.validations_without_improvement = 0;
      const auto path =
          save_model_checkpoint(best_checkpoint_dir(run_dir), config, vocabs, model, state,
                                {{"best_metric", tc.best_metric}, {"best_value", value}});
      if (!path.empty())
        spdlog::info("saved best checkpoint {} ({} {:.4f})", path, tc.best_metric, value);
      return true;
    }
    ++state.validations_without_improvement;
    if (tc.patience > 0 && state.validations_without_improvement >= tc.patience) {
      spdlog::info(
          "early stopping: valid {} has not improved in {} validations; best {:.4f} at "
          "step {}",
          tc.best_metric, state.validations_without_improvement, state.best_value, state.best_step);
      return false;
    }
    return true;
  };

  StopSignals signals;
  const auto nan_steps = debug_nan_steps();
  int64_t attempts = 0, bad_steps = 0;
  int stop_signal = 0;
  while (!done()) {
    // Checked between steps: the previous step is complete, so the checkpoint is consistent.
    if ((stop_signal = signals.requested()) != 0) break;
    // Gather this step's batches first: the loss is normalised by their total target tokens.
    auto t0 = Clock::now();
    std::vector<TensorBatch> batches;
    int64_t step_tokens = 0;
    for (int64_t k = 0; k < tc.accum_steps; ++k) {
      stream.roll_over();
      if (k > 0 && tc.max_epochs > 0 && stream.epoch() >= tc.max_epochs) break;
      batches.push_back(make_tensor_batch(corpus, stream.take()));
      const auto& b = batches.back();
      step_tokens += b.tgt_tokens;
      phases.src_cells += b.src.numel();
      phases.tgt_cells += b.tgt_out.numel();
      phases.src_tokens += b.src_tokens;
      phases.tgt_tokens += b.tgt_tokens;
    }
    phases.data += since(t0);

    const double lr = noam_lr(state.step + 1, config.model.d_model, tc.warmup_steps, tc.lr_factor);
    for (auto& group : optimizer.param_groups())
      static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
    optimizer.zero_grad();
    double step_loss = 0, step_nll = 0;
    ++attempts;
    const bool poisoned =
        std::find(nan_steps.begin(), nan_steps.end(), attempts) != nan_steps.end();
    for (const auto& b : batches) {
      t0 = Clock::now();
      const auto enc = model->encode(b.src);
      const auto hidden = model->decode(b.tgt_in, enc);
      // Project only real target positions: padding never reaches the vocabulary matmul.
      const auto keep = b.tgt_out.ne(kPadId);
      // The logits die with this statement: the loss keeps only its gradient for backward.
      auto sums = label_smoothed_loss(model->project(hidden.index({keep})), b.tgt_out.index({keep}),
                                      tc.label_smoothing, kPadId);
      if (poisoned) sums.loss = sums.loss * std::numeric_limits<double>::quiet_NaN();
      phases.forward += since(t0);
      t0 = Clock::now();
      (sums.loss / static_cast<double>(step_tokens)).backward();
      phases.backward += since(t0);
      step_loss += sums.loss.item<double>();
      step_nll += sums.nll.item<double>();
    }
    t0 = Clock::now();
    gradients_ready(*model);
    double grad_norm;
    if (tc.clip_norm > 0) {
      grad_norm = torch::nn::utils::clip_grad_norm_(params, tc.clip_norm);
    } else {
      double sq = 0;
      for (const auto& p : params)
        if (p.grad().defined()) sq += p.grad().pow(2).sum().item<double>();
      grad_norm = std::sqrt(sq);
    }
    if (!std::isfinite(step_loss) || !std::isfinite(grad_norm)) {
      // A diverged step must not reach the weights or Adam's moments.
      optimizer.zero_grad();
      ++bad_steps;
      clear_progress();
      spdlog::warn("update {} skipped: loss {} and gradient norm {} ({} bad in a row, limit {})",
                   state.step + 1, step_loss, grad_norm, bad_steps, tc.max_bad_steps);
      if (bad_steps >= tc.max_bad_steps)
        throw Error("training diverged: " + std::to_string(bad_steps) +
                    " consecutive steps with a non-finite loss or gradient norm after step " +
                    std::to_string(state.step) + " (train.max_bad_steps); the last good " +
                    "checkpoint is in " + run_dir + "/checkpoints; try a lower train.lr_factor");
      continue;
    }
    bad_steps = 0;
    optimizer.step();
    phases.update += since(t0);
    ++state.step;
    state.tgt_tokens += step_tokens;
    interval_tokens += step_tokens;
    interval_loss += step_loss;
    interval_nll += step_nll;
    ++interval_steps;
    last_lr = lr;
    last_grad_norm = grad_norm;

    const double step_avg = elapsed() / std::max<double>(1.0, static_cast<double>(state.step));
    if (stderr_is_tty()) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "step %lld | epoch %lld | loss %.3f | lr %.2e | ETA %s",
                    static_cast<long long>(state.step), static_cast<long long>(stream.epoch() + 1),
                    step_loss / std::max<int64_t>(1, step_tokens), lr,
                    format_duration(steps_left() * step_avg).c_str());
      show_progress(buf);
    }

    if (state.step % tc.log_every == 0) {
      const double secs = std::chrono::duration<double>(Clock::now() - interval_start).count();
      const double tok = static_cast<double>(std::max<int64_t>(1, interval_tokens));
      const double loss = interval_loss / tok, ppl = std::exp(interval_nll / tok);
      const double rate = static_cast<double>(interval_tokens) / std::max(secs, 1e-9);
      clear_progress();
      spdlog::info(
          "step {} | epoch {} | loss {:.4f} | ppl {:.2f} | lr {:.3e} | {:.0f} tgt tok/s | "
          "elapsed {} | ETA {}",
          state.step, stream.epoch() + 1, loss, ppl, lr, rate, format_duration(elapsed()),
          format_duration(steps_left() * step_avg));
      write_metrics(
          {{"step", state.step},
           {"epoch", stream.epoch() + 1},
           {"loss", loss},
           {"ppl", ppl},
           {"lr", last_lr},
           {"grad_norm", last_grad_norm},
           {"tgt_tokens", interval_tokens},
           {"tok_per_s", rate},
           {"elapsed_s", elapsed()},
           // seconds in each phase over the interval, the rest is logging and saving
           {"data_s", phases.data},
           {"forward_s", phases.forward},
           {"backward_s", phases.backward},
           {"update_s", phases.update},
           // padded cells per real token: 1.0 means no padding
           {"src_pad_ratio", static_cast<double>(phases.src_cells) /
                                 static_cast<double>(std::max<int64_t>(1, phases.src_tokens))},
           {"tgt_pad_ratio", static_cast<double>(phases.tgt_cells) /
                                 static_cast<double>(std::max<int64_t>(1, phases.tgt_tokens))}});
      phases = Phases{};
      interval_start = Clock::now();
      interval_tokens = interval_steps = 0;
      interval_loss = interval_nll = 0;
    }
    bool keep_going = true;
    if (tc.valid_every > 0 && state.step % tc.valid_every == 0) keep_going = run_validation();
    if (state.step % tc.save_every == 0) save();
    if (!keep_going) break;
  }
  clear_progress();
  if (stop_signal != 0) {
    spdlog::warn("{} received: saving a checkpoint at step {} and stopping",
                 stop_signal == SIGINT ? "SIGINT" : "SIGTERM", state.step);
    if (last_saved_step != state.step) save();
    throw Interrupted(stop_signal);
  }
  if (last_validated_step != state.step) run_validation();
  if (last_saved_step != state.step) save();
  spdlog::info("training done: {} steps, {} target tokens, {}", state.step, state.tgt_tokens,
               format_duration(elapsed()));
}

}  // namespace nmt
