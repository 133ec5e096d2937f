#include "train/trainer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "ckpt/checkpoint.h"
#include "data/batching.h"
#include "data/tensors.h"
#include "train/curves.h"
#include "train/data_parallel.h"
#include "train/metrics_log.h"
#include "train/run.h"
#include "train/schedule.h"
#include "train/scheduler.h"
#include "train/step.h"
#include "train/validator.h"
#include "util/io.h"
#include "util/log.h"
#include "util/signals.h"
#include "util/test_hooks.h"
#include "util/util.h"

namespace nmt {

namespace {

// Out-of-memory steps in a row after which training stops: one is a batch too large for the
// memory left, several mean the batch size itself does not fit.
constexpr int64_t kMaxOutOfMemoryInARow = 3;

// The loop over a set-up run: the scheduler decides, the step updates, the validator and the
// checkpoints record.
class Trainer {
 public:
  Trainer(Run& run, const StopSignals& signals);
  void run();

 private:
  // The next step's batches (accum_steps of them, fewer at the end of the last epoch).
  std::vector<TensorBatch> next_batches();
  // One update attempt; a skipped one is logged, and throws when too many were skipped. False
  // when early stopping ends training.
  bool update();
  bool after_step(const StepResult& result, double lr);
  void skipped(const StepResult& result);
  void log_row();
  bool validate();
  void save();
  // Ends a run stopped by a signal: the last row and checkpoint, then Interrupted.
  [[noreturn]] void stop_on_signal();
  void finish();
  // train.average_last: averages, validates and saves DIR/checkpoints/averaged.
  void average();
  void average_on_main();
  void write_curves_file();

  Run& r_;
  const TrainConfig& tc_;
  CheckpointState& state_;
  Scheduler scheduler_;
  TrainStep step_;
  BatchStream stream_;
  Interval interval_;
  std::optional<MetricsFile> metrics_;  // main process
  Validator validator_;
  int64_t last_saved_step_ = -1;
  int64_t logged_step_ = -1;  // the step of the last training row
  int64_t attempts_ = 0;      // update attempts, skipped ones included (test hooks count them)
  int64_t out_of_memory_total_ = 0;
  int64_t replica_checks_ = 0;
};

Trainer::Trainer(Run& run, const StopSignals& signals)
    : r_(run),
      tc_(run.config.train),
      state_(run.state),
      scheduler_(run.config.train, *run.group, signals, run.state.elapsed_s),
      step_(run.model, *run.optimizer, run.config.train, run.precision, run.sync.get()),
      stream_(run.data.store->lengths(), run.data.store->size(), run.data.corpora,
              run.config.train.batch_tokens, static_cast<uint64_t>(run.config.train.seed),
              [&store = *run.data.store] { store.forget_length_pages(); }),
      validator_(run.config, run.data.vocabs, std::move(run.data.valid), run.options.run_dir,
                 run.precision) {
  if (state_.loss_scale > 0)
    step_.loss_scaler() = LossScaler(state_.loss_scale, state_.loss_scale_good_steps);
  if (r_.data.resume_from) last_saved_step_ = state_.step;
  if (r_.data.sampled) {
    const int threads = effective_threads(r_.config);
    stream_.plan_with([this, threads](int64_t epoch) {
      return r_.data.sampled->epoch_lengths(epoch, threads);
    });
  }
  stream_.seek(state_.epoch, state_.batch_in_epoch);
  spdlog::info("{} batches per epoch of <= {} tokens", stream_.batches_per_epoch(),
               tc_.batch_tokens);
  if (r_.main_process())
    metrics_.emplace(r_.options.run_dir + "/metrics.jsonl",
                     r_.data.resume_from ? state_.step : int64_t{0});
}

std::vector<TensorBatch> Trainer::next_batches() {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<TensorBatch> batches;
  // A step takes accum_steps batches a process from the one plan all processes share: process r
  // gets the r-th run of accum_steps of them, so the processes together see every batch once,
  // and a step is the same pairs as one process with accum_steps x processes.
  const int64_t size = r_.group->size(), rank = r_.group->rank();
  for (int64_t k = 0; k < tc_.accum_steps * size; ++k) {
    stream_.roll_over();
    if (k > 0 && tc_.max_epochs > 0 && stream_.epoch() >= tc_.max_epochs) break;
    const auto pairs = stream_.take();
    if (k / tc_.accum_steps != rank) continue;
    if (r_.data.sampled) r_.data.sampled->set_epoch(stream_.epoch());
    const Pairs& source = r_.data.sampled ? static_cast<const Pairs&>(*r_.data.sampled)
                                          : *r_.data.store;
    batches.push_back(make_tensor_batch(source, pairs));
  }
  r_.data.store->forget_id_pages();
  interval_.add_data_time(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return batches;
}

bool Trainer::update() {
  // Gathered first: the loss is normalised by the step's target tokens.
  r_.group->set_step(state_.step);
  const TestHooks& hooks = test_hooks();
  hooks.exit_if_asked(r_.group->rank(), state_.step, r_.env.restart_count);
  // Epochs done before this step, for train.cooldown.
  const double epochs = static_cast<double>(stream_.epoch()) +
                        static_cast<double>(stream_.position()) /
                            static_cast<double>(stream_.batches_per_epoch());
  const auto batches = next_batches();
  const double lr =
      learning_rate(tc_, r_.config.model.d_model, state_.step + 1,
                    run_progress(tc_, state_.step, epochs, scheduler_.agreed_elapsed()));
  ++attempts_;
  const auto result = step_.run(batches, lr, {hooks.nan_at(attempts_), hooks.oom_at(attempts_)});
  interval_.add(batches, result, lr);
  if (result.status == StepResult::Status::kApplied) return after_step(result, lr);
  skipped(result);
  return true;
}

bool Trainer::after_step(const StepResult& result, double lr) {
  ++state_.step;
  state_.tgt_tokens += result.tgt_tokens;
  if (test_hooks().check_replicas) {
    check_replicas(*r_.group, r_.model->parameters(), "after step " + std::to_string(state_.step));
    ++replica_checks_;
  }
  if (stderr_is_tty())
    show_progress(progress_line(state_.step, stream_.epoch() + 1,
                                result.loss / static_cast<double>(
                                                  std::max<int64_t>(1, result.tgt_tokens)),
                                lr, scheduler_.seconds_left(state_.step, stream_)));
  if (scheduler_.log_due(state_.step)) log_row();
  bool keep_going = true;
  if (scheduler_.validation_due(state_.step)) keep_going = validate();
  if (scheduler_.save_due(state_.step)) save();
  return keep_going;
}

void Trainer::skipped(const StepResult& result) {
  using Status = StepResult::Status;
  clear_progress();
  const int64_t update = state_.step + 1;
  if (result.status == Status::kOutOfMemory) {
    ++out_of_memory_total_;
    spdlog::warn("update {} skipped: {} ({} in a row, {} in all)", update, result.error,
                 step_.out_of_memory_in_a_row(), out_of_memory_total_);
    if (step_.out_of_memory_in_a_row() >= kMaxOutOfMemoryInARow)
      throw Error(describe_device(r_.device) + " ran out of memory in " +
                  std::to_string(step_.out_of_memory_in_a_row()) +
                  " steps in a row: lower train.batch_tokens (now " +
                  std::to_string(tc_.batch_tokens) +
                  ") and use train.accum_steps to keep the tokens per update");
  } else if (result.status == Status::kOverflow) {
    spdlog::warn("update {} skipped: fp16 gradients overflowed; loss scale lowered to {}", update,
                 step_.loss_scaler().scale());
  } else {
    spdlog::warn("update {} skipped: loss {} and gradient norm {} ({} bad in a row, limit {})",
                 update, result.loss, result.grad_norm, step_.non_finite_in_a_row(),
                 tc_.max_bad_steps);
    if (step_.non_finite_in_a_row() >= tc_.max_bad_steps)
      throw Error("training diverged: " + std::to_string(step_.non_finite_in_a_row()) +
                  " consecutive steps with a non-finite loss or gradient norm after step " +
                  std::to_string(state_.step) + " (train.max_bad_steps); the last good " +
                  "checkpoint is in " + r_.options.run_dir +
                  "/checkpoints; try a lower learning rate (train.lr_factor or train.lr)");
  }
}

void Trainer::log_row() {
  const double elapsed = scheduler_.elapsed();
  const TrainRow row = interval_.close(state_.step, stream_.epoch() + 1, elapsed);
  logged_step_ = state_.step;
  clear_progress();
  spdlog::info(
      "step {} | epoch {} | loss {:.4f} | ppl {:.2f} | lr {:.3e} | {:.0f} tgt tok/s | "
      "elapsed {} | ETA {}",
      row.step, row.epoch, row.loss, row.ppl, row.lr, row.tok_per_s, format_duration(row.elapsed_s),
      format_duration(scheduler_.seconds_left(state_.step, stream_)));
  if (metrics_) metrics_->write(to_json(row));
  check_log_file();
}

bool Trainer::validate() {
  // In the state: a resume from a checkpoint saved after this validation does not repeat it.
  state_.validated_step = state_.step;
  // DIR/checkpoints/best, saved by the validator, records the training time of its own step.
  state_.elapsed_s = scheduler_.elapsed();
  // On the main process; the others wait for its early-stopping decision.
  bool keep_going = true;
  if (r_.main_process()) {
    keep_going = validator_.validate(r_.model, state_, metrics_ ? &*metrics_ : nullptr);
    write_curves_file();
  }
  return r_.group->sum({keep_going && r_.main_process() ? 1.0 : 0.0})[0] > 0;
}

void Trainer::save() {
  state_.epoch = stream_.epoch();
  state_.batch_in_epoch = stream_.position();
  state_.elapsed_s = scheduler_.elapsed();
  if (r_.precision == Precision::kFp16) {
    state_.loss_scale = step_.loss_scaler().scale();
    state_.loss_scale_good_steps = step_.loss_scaler().good_steps();
  }
  // Every rank's generator, so that a resume continues each rank's dropout exactly.
  const auto rank_rng = r_.group->all_gather(cpu_generator_state());
  const Retention retention{tc_.keep_last, tc_.average_best ? tc_.average_last : 0,
                            higher_is_better(tc_.best_metric)};
  const auto path = save_checkpoint(r_.options.run_dir, state_.step, r_.config, r_.data.vocabs,
                                    r_.model, *r_.optimizer, state_, retention, rank_rng);
  last_saved_step_ = state_.step;
  clear_progress();
  spdlog::info("saved checkpoint {}", path);
  check_log_file();
}

void Trainer::write_curves_file() {
  if (!metrics_) return;
  write_curves(r_.options.run_dir, tc_.best_metric == BestMetric::kChrf ? "chrf" : "bleu");
}

void Trainer::average() {
  if (r_.main_process()) average_on_main();
  // The other processes wait for it, as for a validation.
  r_.group->sum({0.0});
}

void Trainer::average_on_main() {
  const auto n = tc_.average_last;
  const std::string& run_dir = r_.options.run_dir;
  std::vector<std::string> dirs;
  if (tc_.average_best) {
    dirs = best_validated_checkpoints(run_dir, n, higher_is_better(tc_.best_metric));
  } else {
    const auto all = list_checkpoints(run_dir);
    dirs.assign(all.end() - std::min<int64_t>(n, static_cast<int64_t>(all.size())), all.end());
  }
  const char* which = tc_.average_best ? "best validated" : "newest";
  if (is_average_of(run_dir, dirs)) {
    spdlog::info("train.average_last: {} already is the mean of these {} checkpoints",
                 averaged_checkpoint_dir(run_dir), dirs.size());
    return;
  }
  if (dirs.size() < 2) {
    spdlog::warn("train.average_last: {} {} checkpoint(s) to average; no averaged checkpoint",
                 dirs.size(), which);
    return;
  }
  if (static_cast<int64_t>(dirs.size()) < n)
    spdlog::warn("train.average_last: only {} {} checkpoints to average, not {}", dirs.size(),
                 which, n);
  AveragedModel avg = average_models(dirs, r_.device);
  const auto value = validator_.validate_averaged(avg.loaded.model, state_.step,
                                                  scheduler_.elapsed(), metrics_ ? &*metrics_ : nullptr);
  CheckpointState st;
  st.step = avg.step;
  st.averaged_from = avg.from;
  if (value) {
    st.best_metric = tc_.best_metric;
    st.has_valid_value = true;
    st.valid_value = *value;
    st.validated_step = avg.step;
  }
  const auto path = save_model_checkpoint(averaged_checkpoint_dir(run_dir), r_.config,
                                          r_.data.vocabs, avg.loaded.model, st);
  if (value && state_.has_best)
    spdlog::info(
        "saved averaged checkpoint {} (mean of {} {} checkpoints): valid {} {:.4f}; "
        "best {:.4f} at step {}",
        path, dirs.size(), which, name_of(tc_.best_metric), *value, state_.best_value,
        state_.best_step);
  else
    spdlog::info("saved averaged checkpoint {} (mean of {} {} checkpoints)", path, dirs.size(),
                 which);
  check_log_file();
}

void Trainer::stop_on_signal() {
  const int signal = scheduler_.stop_signal();
  spdlog::warn("{} received: saving a checkpoint at step {} and stopping",
               signal == SIGINT ? "SIGINT" : "SIGTERM", state_.step);
  // As at the end: metrics.jsonl reaches the saved step, off the log_every grid too.
  if (logged_step_ != state_.step) log_row();
  if (last_saved_step_ != state_.step) save();
  write_curves_file();
  throw Interrupted(signal);
}

void Trainer::finish() {
  if (scheduler_.time_up())
    spdlog::info("train.max_time: the budget of {} is spent at step {} (training time {})",
                 format_duration(tc_.max_time.seconds), state_.step,
                 format_duration(scheduler_.elapsed()));
  // The steps since the last row (a budget or max_steps off the log_every grid), so that
  // metrics.jsonl and the curves reach the last step.
  if (logged_step_ != state_.step) log_row();
  if (state_.validated_step != state_.step) validate();
  if (last_saved_step_ != state_.step) save();
  if (tc_.average_last > 0) average();
  write_curves_file();
  if (test_hooks().check_replicas)
    spdlog::info(
        "replica check: the weights of all {} ranks were bitwise identical after each "
        "of {} steps",
        r_.group->size(), replica_checks_);
  spdlog::info("training done: {} steps, {} target tokens, {}{}", state_.step, state_.tgt_tokens,
               format_duration(scheduler_.elapsed()),
               out_of_memory_total_ > 0 ? ", " + std::to_string(out_of_memory_total_) +
                                              " batches skipped (out of memory)"
                                        : std::string());
}

void Trainer::run() {
  r_.model->train();
  scheduler_.start();
  interval_ = Interval();
  logged_step_ = state_.step;
  // Marian's loop: while the scheduler says so, update.
  while (scheduler_.keep_going(state_.step, stream_))
    if (!update()) break;
  clear_progress();
  if (scheduler_.stop_signal() != 0) stop_on_signal();
  finish();
}

}  // namespace

void train(const Config& config, const TrainOptions& options) {
  // First: a signal during set-up is a request to stop too, honoured before the first step.
  const StopSignals signals;
  auto run = set_up_run(config, options);
  Trainer(*run, signals).run();
}

}  // namespace nmt
