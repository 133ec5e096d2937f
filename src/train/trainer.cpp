#include "train/trainer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "ckpt/checkpoint.h"
#include "data/batching.h"
#include "data/tensors.h"
#include "model/device.h"
#include "model/seq2seq.h"
#include "train/curves.h"
#include "train/data_parallel.h"
#include "train/distributed.h"
#include "train/metrics_log.h"
#include "train/schedule.h"
#include "train/state.h"
#include "train/step.h"
#include "train/validator.h"
#include "util/blas.h"
#include "util/io.h"
#include "util/log.h"
#include "util/signals.h"
#include "util/util.h"

namespace nmt {

using Clock = std::chrono::steady_clock;

namespace {

// Test hooks: NMT_DEBUG_NAN_STEPS="3,4" poisons the loss of those update attempts (1-based),
// NMT_DEBUG_OOM_STEPS makes them run out of memory.
std::vector<int64_t> debug_steps(const char* name) {
  std::vector<int64_t> steps;
  if (const char* env = std::getenv(name))
    for (const auto& part : split(env, ','))
      if (!trim(part).empty()) steps.push_back(std::stoll(trim(part)));
  return steps;
}

bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Out-of-memory steps in a row after which training stops: one is a batch too large for the
// memory left, several mean the batch size itself does not fit.
constexpr int64_t kMaxOutOfMemoryInARow = 3;

// The training state of one run and the decisions of its loop: when to log, validate, save and
// stop. The step (what an update is), validation and metrics are units of their own.
class Trainer {
 public:
  Trainer(const Config& config, const TrainOptions& options);
  void run();

 private:
  // The next step's batches (accum_steps of them, fewer at the end of the last epoch).
  std::vector<TensorBatch> next_batches();
  // Logs a skipped step; throws when too many were skipped in a row.
  void skipped(const StepResult& result);
  void log_row();
  bool validate();
  void save();
  // train.average_last: averages, validates and saves DIR/checkpoints/averaged.
  void average();
  // precision auto in data-parallel training: bf16 only when every process resolved it so
  // (machines of a group may differ), else fp32 on all.
  void agree_on_auto_precision();
  // True when DIR/checkpoints/averaged is the mean of `dirs` already (a finished run resumed).
  bool averaged_already(const std::vector<std::string>& dirs) const;
  // DIR/curves.svg from metrics.jsonl (main process).
  void write_curves_file();
  // Why training must stop now, the same on every process: the signal any process received
  // (0: none), or train.max_time spent on any of them.
  struct Stop {
    int signal = 0;
    bool time_up = false;
    double elapsed = 0;  // training time, the mean over processes so that all use the same lr
  };
  Stop agreed_stop(int local_signal);
  bool done();
  double steps_left() const;
  // Seconds to the end by max_steps / max_epochs at step_avg seconds a step, or by max_time,
  // whichever comes first.
  double seconds_left(double step_avg) const;
  double elapsed() const;

  // First: a signal during set-up is a request to stop too, honoured before the first step.
  StopSignals signals_;
  const Config& config_;
  const TrainConfig& tc_;
  TrainOptions options_;
  const std::string& run_dir_;
  // The run directory's lock (main process), released last.
  std::optional<DirLock> lock_;
  const LaunchEnv env_;
  const bool main_process_;
  torch::Device device_{torch::kCPU};
  std::unique_ptr<ProcessGroup> group_;  // data-parallel training only
  std::unique_ptr<DataParallelSync> sync_;
  Precision precision_ = Precision::kFp32;
  RunSetup run_;
  Seq2Seq model_{nullptr};
  std::unique_ptr<torch::optim::Adam> optimizer_;
  std::unique_ptr<TrainStep> step_;
  TrainerState state_;
  std::unique_ptr<BatchStream> stream_;
  std::optional<MetricsFile> metrics_;
  std::unique_ptr<Validator> validator_;
  Interval interval_;
  Clock::time_point session_start_;
  double elapsed_before_ = 0;
  int64_t last_saved_step_ = -1;
  int64_t logged_step_ = -1;  // the step of the last training row
  int64_t out_of_memory_total_ = 0;
  // Test hook (NMT_DEBUG_CHECK_REPLICAS=1): compare the ranks' weights bit for bit every step.
  bool check_replicas_ = false;
  std::pair<int, int64_t> exit_at_{-1, -1};
  int64_t replica_checks_ = 0;
};

Trainer::Trainer(const Config& config, const TrainOptions& options)
    : config_(config),
      tc_(config.train),
      options_(options),
      run_dir_(options.run_dir),
      env_(read_launch_env()),
      main_process_(env_.rank == 0) {
  if (main_process_) {
    // Before anything is written there: an unusable directory or a second trainer is refused
    // at once, naming the directory.
    create_directories(run_dir_);
    lock_.emplace(run_dir_, "nmt train");
    setup_logging(run_dir_ + "/train.log");
  } else {
    setup_worker_logging(env_.rank);
  }
  const int threads = effective_threads(config_);
  torch::set_num_threads(threads);
  keep_freed_memory();
  device_ = resolve_device(tc_.device, "train.device");
  // One GPU a process: torchrun's LOCAL_RANK picks it unless train.device names one.
  if (env_.distributed() && device_.is_cuda() && tc_.device.find(':') == std::string::npos)
    device_ = resolve_device("cuda:" + std::to_string(env_.local_rank), "LOCAL_RANK");
  precision_ = parse_precision(tc_.precision, device_, "train.precision");
  spdlog::info("nmt train: run dir {}, {} threads, device {}, precision {}", run_dir_, threads,
               describe_device(device_), describe_precision(tc_.precision, precision_, device_));
  if (device_.is_cpu())
    spdlog::info("GEMM backend: {}", gemm_backend_description(precision_ == Precision::kBf16));
  // torchrun restarts a failed group with the same command: it must continue, not start over.
  if (env_.under_torchrun && tc_.auto_resume && !options_.resume &&
      !list_checkpoints(run_dir_).empty()) {
    options_.resume = true;
    spdlog::info("train.auto_resume: {} holds checkpoints, resuming (torchrun restart {})",
                 run_dir_, env_.restart_count);
  }
  std::function<void()> wait_for_main;
  if (env_.distributed()) {
    group_ = std::make_unique<ProcessGroup>(env_, device_, std::chrono::seconds(tc_.dist_timeout));
    spdlog::info("data-parallel: {} process{} ({}), this is rank {}, store {}:{}{}",
                 env_.world_size, env_.world_size == 1 ? "" : "es", group_->backend(), env_.rank,
                 env_.master_addr, env_.master_port,
                 env_.under_torchrun ? ", launched by torchrun" : "");
    if (env_.rank == 0) {
      const auto addresses = group_->addresses();
      for (size_t r = 0; r < addresses.size(); ++r)
        spdlog::info("gloo: rank {} at {}", r, addresses[r]);
    }
    check_same_on_all_ranks(*group_, config_to_json(config_), "config");
    agree_on_auto_precision();
    // Without a time limit: the main process may be preparing a corpus of any size.
    wait_for_main = [this] {
      group_->wait_for_rank0("run set-up");
      check_shared_run_dir(*group_, run_dir_);
    };
    const char* check = std::getenv("NMT_DEBUG_CHECK_REPLICAS");
    check_replicas_ = check != nullptr && std::string(check) == "1";
    if (const char* exit_at = std::getenv("NMT_DEBUG_EXIT")) {
      const auto parts = split(exit_at, ':');
      if (parts.size() == 2) exit_at_ = {std::stoi(parts[0]), std::stoll(parts[1])};
    }
  }

  run_ = prepare_run(config_, options_, wait_for_main);
  const Vocabs& vocabs = run_.vocabs;

  // Initialised on the CPU from the seed, then moved: the same weights on every device.
  torch::manual_seed(static_cast<uint64_t>(tc_.seed));
  model_ = make_model(config_.model, vocabs.src.size(), vocabs.tgt.size());
  model_->to(device_);
  if (group_) {
    broadcast_parameters(*group_, model_->parameters());
    // Each rank draws its own dropout keys; rank 0 keeps the one-process stream.
    if (env_.rank > 0)
      torch::manual_seed(static_cast<uint64_t>(tc_.seed) +
                         0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(env_.rank));
  }
  int64_t n_params = 0;
  for (const auto& p : model_->parameters()) n_params += p.numel();
  spdlog::info("model: {} {} parameters, vocab {} / {}", config_.model.arch, n_params,
               vocabs.src.size(), vocabs.tgt.size());
  optimizer_ = std::make_unique<torch::optim::Adam>(
      model_->parameters(),
      torch::optim::AdamOptions(1.0).betas({tc_.adam_beta1, tc_.adam_beta2}).eps(tc_.adam_eps));
  if (group_) sync_ = std::make_unique<DataParallelSync>(*group_, model_->parameters());
  step_ = std::make_unique<TrainStep>(model_, *optimizer_, tc_, precision_, sync_.get());

  if (run_.resume_from) {
    const auto& from = *run_.resume_from;
    state_ = TrainerState::from_json(
        load_training_state(from, model_, *optimizer_, !options_.reset_optimizer, env_.rank),
        from + "/state.json");
    if (options_.reset_optimizer)
      spdlog::info("--reset-optimizer: starting with a fresh Adam state");
    if (state_.world_size != env_.world_size && !options_.reset_data)
      throw Error("--resume: " + from + " was trained by " + std::to_string(state_.world_size) +
                  " process" + (state_.world_size == 1 ? "" : "es") + " and this run has " +
                  std::to_string(env_.world_size) + ": the data position does not carry over; " +
                  "pass --reset-data to start a fresh pass over the data");
    if (options_.reset_data) {
      // A fresh pass: the next epoch's plan from its first batch.
      if (state_.batch_in_epoch > 0) ++state_.epoch;
      state_.batch_in_epoch = 0;
      spdlog::info("--reset-data: starting a fresh pass over the data (epoch {})",
                   state_.epoch + 1);
    }
    if (state_.loss_scale > 0)
      step_->loss_scaler() = LossScaler(state_.loss_scale, state_.loss_scale_good_steps);
    spdlog::info("resumed from {} at step {}, epoch {}, batch {}", from, state_.step,
                 state_.epoch + 1, state_.batch_in_epoch);
    last_saved_step_ = state_.step;
  }
  const TokenStore& store = *run_.store;
  stream_ = std::make_unique<BatchStream>(store.lengths(), store.size(), run_.corpora,
                                          tc_.batch_tokens, static_cast<uint64_t>(tc_.seed),
                                          [&store] { store.forget_length_pages(); });
  stream_->seek(state_.epoch, state_.batch_in_epoch);
  spdlog::info("{} batches per epoch of <= {} tokens", stream_->batches_per_epoch(),
               tc_.batch_tokens);
  state_.world_size = env_.world_size;
  if (main_process_)
    metrics_.emplace(run_dir_ + "/metrics.jsonl", run_.resume_from ? state_.step : int64_t{0});
  validator_ = std::make_unique<Validator>(config_, run_.vocabs, std::move(run_.valid), run_dir_,
                                           precision_);
  elapsed_before_ = state_.elapsed_s;
}

void Trainer::agree_on_auto_precision() {
  if (tc_.precision != "auto") return;
  const double bf16 = group_->sum({precision_ == Precision::kBf16 ? 1.0 : 0.0})[0];
  if (bf16 == 0.0 || bf16 == static_cast<double>(env_.world_size)) return;
  precision_ = Precision::kFp32;
  spdlog::info("precision auto: {} of {} processes can multiply in bfloat16; all train in fp32",
               bf16, env_.world_size);
}

double Trainer::elapsed() const {
  return elapsed_before_ + std::chrono::duration<double>(Clock::now() - session_start_).count();
}

bool Trainer::done() {
  if (tc_.max_steps > 0 && state_.step >= tc_.max_steps) return true;
  stream_->roll_over();
  return tc_.max_epochs > 0 && stream_->epoch() >= tc_.max_epochs;
}

double Trainer::seconds_left(double step_avg) const {
  const double steps = steps_left();
  double left = std::isinf(steps) ? steps : steps * step_avg;
  if (tc_.max_time.seconds > 0)
    left = std::min(left, std::max(0.0, tc_.max_time.seconds - elapsed()));
  return left;
}

double Trainer::steps_left() const {
  double left = std::numeric_limits<double>::infinity();
  if (tc_.max_steps > 0) left = static_cast<double>(tc_.max_steps - state_.step);
  if (tc_.max_epochs > 0) {
    const double batches = static_cast<double>(
        (tc_.max_epochs - stream_->epoch()) * stream_->batches_per_epoch() - stream_->position());
    left = std::min(left, batches / static_cast<double>(tc_.accum_steps));
  }
  return left;
}

std::vector<TensorBatch> Trainer::next_batches() {
  const auto t0 = Clock::now();
  std::vector<TensorBatch> batches;
  // A step takes accum_steps batches a process from the one plan all processes share: process r
  // gets the r-th run of accum_steps of them, so the processes together see every batch once,
  // and a step is the same pairs as one process with accum_steps x processes.
  for (int64_t k = 0; k < tc_.accum_steps * env_.world_size; ++k) {
    stream_->roll_over();
    if (k > 0 && tc_.max_epochs > 0 && stream_->epoch() >= tc_.max_epochs) break;
    const auto& pairs = stream_->take();
    if (k / tc_.accum_steps == env_.rank) batches.push_back(make_tensor_batch(*run_.store, pairs));
  }
  run_.store->forget_id_pages();
  interval_.add_data_time(std::chrono::duration<double>(Clock::now() - t0).count());
  return batches;
}

void Trainer::skipped(const StepResult& result) {
  using Status = StepResult::Status;
  clear_progress();
  const int64_t update = state_.step + 1;
  if (result.status == Status::kOutOfMemory) {
    ++out_of_memory_total_;
    spdlog::warn("update {} skipped: {} ({} in a row, {} in all)", update, result.error,
                 step_->out_of_memory_in_a_row(), out_of_memory_total_);
    if (step_->out_of_memory_in_a_row() >= kMaxOutOfMemoryInARow)
      throw Error(describe_device(device_) + " ran out of memory in " +
                  std::to_string(step_->out_of_memory_in_a_row()) +
                  " steps in a row: lower train.batch_tokens (now " +
                  std::to_string(tc_.batch_tokens) +
                  ") and use train.accum_steps to keep the tokens per update");
  } else if (result.status == Status::kOverflow) {
    spdlog::warn("update {} skipped: fp16 gradients overflowed; loss scale lowered to {}", update,
                 step_->loss_scaler().scale());
  } else {
    spdlog::warn("update {} skipped: loss {} and gradient norm {} ({} bad in a row, limit {})",
                 update, result.loss, result.grad_norm, step_->non_finite_in_a_row(),
                 tc_.max_bad_steps);
    if (step_->non_finite_in_a_row() >= tc_.max_bad_steps)
      throw Error("training diverged: " + std::to_string(step_->non_finite_in_a_row()) +
                  " consecutive steps with a non-finite loss or gradient norm after step " +
                  std::to_string(state_.step) + " (train.max_bad_steps); the last good " +
                  "checkpoint is in " + run_dir_ +
                  "/checkpoints; try a lower learning rate (train.lr_factor or train.lr)");
  }
}

void Trainer::log_row() {
  const double step_avg = elapsed() / std::max<double>(1.0, static_cast<double>(state_.step));
  const TrainRow row = interval_.close(state_.step, stream_->epoch() + 1, elapsed());
  logged_step_ = state_.step;
  clear_progress();
  spdlog::info(
      "step {} | epoch {} | loss {:.4f} | ppl {:.2f} | lr {:.3e} | {:.0f} tgt tok/s | "
      "elapsed {} | ETA {}",
      row.step, row.epoch, row.loss, row.ppl, row.lr, row.tok_per_s, format_duration(row.elapsed_s),
      format_duration(seconds_left(step_avg)));
  if (metrics_) metrics_->write(to_json(row));
  check_log_file();
}

bool Trainer::validate() {
  // In the state: a resume from a checkpoint saved after this validation does not repeat it.
  state_.validated_step = state_.step;
  // DIR/checkpoints/best, saved by the validator, records the training time of its own step.
  state_.elapsed_s = elapsed();
  // On the main process; the others wait for its early-stopping decision.
  bool keep_going = true;
  if (main_process_) {
    keep_going = validator_->validate(model_, state_, metrics_ ? &*metrics_ : nullptr);
    write_curves_file();
  }
  if (group_) keep_going = group_->sum({keep_going && main_process_ ? 1.0 : 0.0})[0] > 0;
  return keep_going;
}

Trainer::Stop Trainer::agreed_stop(int local_signal) {
  const double seconds = elapsed();
  const bool time_up = tc_.max_time.seconds > 0 && seconds >= tc_.max_time.seconds;
  if (!group_) return {local_signal, time_up, seconds};
  // SIGINT wins over SIGTERM when processes saw different ones; one collective for all four.
  const auto sums =
      group_->sum({local_signal == SIGINT ? 1.0 : 0.0, local_signal == SIGTERM ? 1.0 : 0.0,
                   time_up ? 1.0 : 0.0, seconds});
  const int signal = sums[0] > 0 ? SIGINT : sums[1] > 0 ? SIGTERM : 0;
  return {signal, sums[2] > 0, sums[3] / static_cast<double>(env_.world_size)};
}

void Trainer::save() {
  state_.epoch = stream_->epoch();
  state_.batch_in_epoch = stream_->position();
  state_.elapsed_s = elapsed();
  if (precision_ == Precision::kFp16) {
    state_.loss_scale = step_->loss_scaler().scale();
    state_.loss_scale_good_steps = step_->loss_scaler().good_steps();
  }
  // Every rank's generator, so that a resume continues each rank's dropout exactly.
  std::vector<torch::Tensor> rank_rng;
  if (group_) rank_rng = group_->all_gather(cpu_generator_state());
  const Retention retention{tc_.keep_last, tc_.average_best ? tc_.average_last : 0,
                            tc_.best_metric != "loss"};
  const auto path = save_checkpoint(run_dir_, state_.step, config_, run_.vocabs, model_,
                                    *optimizer_, state_.to_json(), retention, rank_rng);
  last_saved_step_ = state_.step;
  clear_progress();
  spdlog::info("saved checkpoint {}", path);
  check_log_file();
}

void Trainer::write_curves_file() {
  if (!metrics_) return;
  write_curves(run_dir_, tc_.best_metric == "chrf" ? "chrf" : "bleu");
}

bool Trainer::averaged_already(const std::vector<std::string>& dirs) const {
  const std::string avg = averaged_checkpoint_dir(run_dir_);
  if (dirs.size() < 2 || !file_exists(avg + "/state.json")) return false;
  const auto from = read_checkpoint_state(avg).value("averaged_from", nlohmann::json::array());
  if (from.size() != dirs.size()) return false;
  // By name: the run directory may have been given by another path.
  auto name = [](const std::string& p) { return std::filesystem::path(p).filename().string(); };
  for (size_t i = 0; i < dirs.size(); ++i)
    if (!from[i].is_string() || name(from[i].get<std::string>()) != name(dirs[i])) return false;
  return true;
}

void Trainer::average() {
  if (main_process_) {
    const auto n = tc_.average_last;
    std::vector<std::string> dirs;
    if (tc_.average_best) {
      dirs = best_validated_checkpoints(run_dir_, n, tc_.best_metric != "loss");
    } else {
      const auto all = list_checkpoints(run_dir_);
      dirs.assign(all.end() - std::min<int64_t>(n, static_cast<int64_t>(all.size())), all.end());
    }
    const char* which = tc_.average_best ? "best validated" : "newest";
    if (averaged_already(dirs)) {
      spdlog::info("train.average_last: {} already is the mean of these {} checkpoints",
                   averaged_checkpoint_dir(run_dir_), dirs.size());
    } else if (dirs.size() < 2) {
      spdlog::warn("train.average_last: {} {} checkpoint(s) to average; no averaged checkpoint",
                   dirs.size(), which);
    } else {
      if (static_cast<int64_t>(dirs.size()) < n)
        spdlog::warn("train.average_last: only {} {} checkpoints to average, not {}", dirs.size(),
                     which, n);
      AveragedModel avg = average_models(dirs, device_);
      const auto value = validator_->validate_averaged(avg.loaded.model, state_.step, elapsed(),
                                                       metrics_ ? &*metrics_ : nullptr);
      nlohmann::json st = {{"step", avg.step}, {"averaged_from", avg.from}};
      if (value) {
        st["best_metric"] = tc_.best_metric;
        st["valid_value"] = *value;
        st["validated_step"] = avg.step;
      }
      const auto path = save_model_checkpoint(averaged_checkpoint_dir(run_dir_), config_,
                                              run_.vocabs, avg.loaded.model, st);
      if (value && state_.has_best)
        spdlog::info(
            "saved averaged checkpoint {} (mean of {} {} checkpoints): valid {} {:.4f}; "
            "best {:.4f} at step {}",
            path, dirs.size(), which, tc_.best_metric, *value, state_.best_value, state_.best_step);
      else
        spdlog::info("saved averaged checkpoint {} (mean of {} {} checkpoints)", path, dirs.size(),
                     which);
      check_log_file();
    }
  }
  // The other processes wait for it, as for a validation.
  if (group_) group_->sum({0.0});
}

void Trainer::run() {
  model_->train();
  session_start_ = Clock::now();
  interval_ = Interval();
  logged_step_ = state_.step;
  const auto nan_steps = debug_steps("NMT_DEBUG_NAN_STEPS");
  const auto oom_steps = debug_steps("NMT_DEBUG_OOM_STEPS");
  int64_t attempts = 0;
  int stop_signal = 0;
  bool time_up = false;
  while (!done()) {
    // Checked between steps: the previous step is complete, so the checkpoint is consistent.
    const Stop stop = agreed_stop(signals_.requested());
    if ((stop_signal = stop.signal) != 0) break;
    if ((time_up = stop.time_up)) break;
    // Gathered first: the loss is normalised by the step's target tokens.
    if (group_) group_->set_step(state_.step);
    // Test hook: NMT_DEBUG_EXIT="RANK:STEP" makes that rank die (as from SIGKILL: no clean-up)
    // after STEP steps, on torchrun's first attempt only, so that a restart can be tested.
    if (exit_at_ == std::make_pair(env_.rank, state_.step) && env_.restart_count == 0)
      std::_Exit(1);
    // Epochs done before this step, for train.cooldown.
    const double epochs = static_cast<double>(stream_->epoch()) +
                          static_cast<double>(stream_->position()) /
                              static_cast<double>(stream_->batches_per_epoch());
    const auto batches = next_batches();
    const double lr = learning_rate(tc_, config_.model.d_model, state_.step + 1,
                                    run_progress(tc_, state_.step, epochs, stop.elapsed));
    ++attempts;
    const auto result =
        step_->run(batches, lr, {contains(nan_steps, attempts), contains(oom_steps, attempts)});
    interval_.add(batches, result, lr);
    if (result.status != StepResult::Status::kApplied) {
      skipped(result);
      continue;
    }
    ++state_.step;
    state_.tgt_tokens += result.tgt_tokens;
    if (check_replicas_) {
      check_replicas(*group_, model_->parameters(), "after step " + std::to_string(state_.step));
      ++replica_checks_;
    }
    if (stderr_is_tty()) {
      const double step_avg = elapsed() / static_cast<double>(state_.step);
      char buf[200];
      std::snprintf(buf, sizeof buf, "step %lld | epoch %lld | loss %.3f | lr %.2e | ETA %s",
                    static_cast<long long>(state_.step),
                    static_cast<long long>(stream_->epoch() + 1),
                    result.loss / static_cast<double>(std::max<int64_t>(1, result.tgt_tokens)), lr,
                    format_duration(seconds_left(step_avg)).c_str());
      show_progress(buf);
    }
    if (state_.step % tc_.log_every == 0) log_row();
    bool keep_going = true;
    if (tc_.valid_every > 0 && state_.step % tc_.valid_every == 0) keep_going = validate();
    if (state_.step % tc_.save_every == 0) save();
    if (!keep_going) break;
  }
  clear_progress();
  if (stop_signal != 0) {
    spdlog::warn("{} received: saving a checkpoint at step {} and stopping",
                 stop_signal == SIGINT ? "SIGINT" : "SIGTERM", state_.step);
    // As at the end: metrics.jsonl reaches the saved step, off the log_every grid too.
    if (logged_step_ != state_.step) log_row();
    if (last_saved_step_ != state_.step) save();
    if (main_process_) write_curves_file();
    throw Interrupted(stop_signal);
  }
  if (time_up)
    spdlog::info("train.max_time: the budget of {} is spent at step {} (training time {})",
                 format_duration(tc_.max_time.seconds), state_.step, format_duration(elapsed()));
  // The steps since the last row (a budget or max_steps off the log_every grid), so that
  // metrics.jsonl and the curves reach the last step.
  if (logged_step_ != state_.step) log_row();
  if (state_.validated_step != state_.step) validate();
  if (last_saved_step_ != state_.step) save();
  if (tc_.average_last > 0) average();
  if (main_process_) write_curves_file();
  if (check_replicas_)
    spdlog::info(
        "replica check: the weights of all {} ranks were bitwise identical after each "
        "of {} steps",
        env_.world_size, replica_checks_);
  spdlog::info("training done: {} steps, {} target tokens, {}{}", state_.step, state_.tgt_tokens,
               format_duration(elapsed()),
               out_of_memory_total_ > 0 ? ", " + std::to_string(out_of_memory_total_) +
                                              " batches skipped (out of memory)"
                                        : std::string());
}

}  // namespace

void train(const Config& config, const TrainOptions& options) { Trainer(config, options).run(); }

}  // namespace nmt
