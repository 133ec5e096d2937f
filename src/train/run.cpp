#include "train/run.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <string>

#include "ckpt/checkpoint.h"
#include "config/print.h"
#include "train/data_parallel.h"
#include "util/log.h"
#include "util/util.h"

namespace nmt {

namespace {

// The run directory, its lock and the log: before anything is written there an unusable
// directory or a second trainer is refused at once, naming the directory.
void open_run_dir(Run& r) {
  if (r.env.rank == 0) {
    create_directories(r.options.run_dir);
    r.lock.emplace(r.options.run_dir, "nmt train");
    setup_logging(r.options.run_dir + "/train.log");
  } else {
    setup_worker_logging(r.env.rank);
  }
}

// Threads, the device (one GPU a process: torchrun's LOCAL_RANK picks it unless train.device
// names one) and the precision, logged.
void choose_compute(Run& r) {
  const TrainConfig& tc = r.config.train;
  const int threads = effective_threads(r.config);
  torch::set_num_threads(threads);
  keep_freed_memory();
  r.device = resolve_device(tc.device, "train.device");
  if (r.env.distributed() && r.device.is_cuda() && tc.device.find(':') == std::string::npos)
    r.device = resolve_device("cuda:" + std::to_string(r.env.local_rank), "LOCAL_RANK");
  r.precision = resolve_precision(tc.precision, r.device, "train.precision");
  log_device_and_precision(
      "nmt train: run dir " + r.options.run_dir + ", " + std::to_string(threads) + " threads, ",
      r.device, tc.precision, r.precision);
}

// precision auto in a group: bf16 only when every process resolved it so (machines of a group
// may differ, and replicas in mixed precisions would drift), else fp32 on all.
void agree_on_auto_precision(Run& r) {
  if (r.config.train.precision != PrecisionSetting::kAuto) return;
  const double bf16 = r.group->sum({r.precision == Precision::kBf16 ? 1.0 : 0.0})[0];
  if (bf16 == 0.0 || bf16 == static_cast<double>(r.group->size())) return;
  r.precision = Precision::kFp32;
  spdlog::info("precision auto: {} of {} processes can multiply in bfloat16; all train in fp32",
               bf16, r.group->size());
}

// The group, checked: every rank has the same config, and they agree on the precision.
void join_group(Run& r) {
  // torchrun restarts a failed group with the same command: it must continue, not start over.
  if (r.env.under_torchrun && r.config.train.auto_resume && !r.options.resume &&
      !list_checkpoints(r.options.run_dir).empty()) {
    r.options.resume = true;
    spdlog::info("train.auto_resume: {} holds checkpoints, resuming (torchrun restart {})",
                 r.options.run_dir, r.env.restart_count);
  }
  r.group = make_group(r.env, r.device, std::chrono::seconds(r.config.train.dist_timeout));
  r.group->log_members();
  check_same_on_all_ranks(*r.group, config_to_json(r.config), "config");
  agree_on_auto_precision(r);
}

// The model, initialised on the CPU from the seed and then moved (the same weights on every
// device), rank 0's on every rank, and its optimizer and gradient sync.
void build_model(Run& r) {
  const TrainConfig& tc = r.config.train;
  torch::manual_seed(static_cast<uint64_t>(tc.seed));
  r.model = make_model(r.config.model, r.data.vocabs.src.size(), r.data.vocabs.tgt.size());
  r.model->to(r.device);
  broadcast_parameters(*r.group, r.model->parameters());
  // Each rank draws its own dropout keys; rank 0 keeps the one-process stream.
  if (r.group->rank() > 0)
    torch::manual_seed(static_cast<uint64_t>(tc.seed) +
                       0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(r.group->rank()));
  int64_t n_params = 0;
  for (const auto& p : r.model->parameters()) n_params += p.numel();
  spdlog::info("model: {} {} parameters, vocab {} / {}", name_of(r.config.model.arch), n_params,
               r.data.vocabs.src.size(), r.data.vocabs.tgt.size());
  r.optimizer = std::make_unique<torch::optim::Adam>(
      r.model->parameters(),
      torch::optim::AdamOptions(1.0).betas({tc.adam_beta1, tc.adam_beta2}).eps(tc.adam_eps));
  r.sync = make_gradient_sync(*r.group, r.model->parameters());
}

// With --resume: the weights, Adam's state (unless --reset-optimizer) and the training state.
void resume(Run& r) {
  if (!r.data.resume_from) return;
  const auto& from = *r.data.resume_from;
  const TrainOptions& o = r.options;
  r.state = load_training_state(from, r.model, *r.optimizer, !o.reset_optimizer, r.group->rank());
  if (o.reset_optimizer) spdlog::info("--reset-optimizer: starting with a fresh Adam state");
  const int size = r.group->size();
  if (r.state.world_size != size && !o.reset_data)
    throw Error("--resume: " + from + " was trained by " + std::to_string(r.state.world_size) +
                " process" + (r.state.world_size == 1 ? "" : "es") + " and this run has " +
                std::to_string(size) + ": the data position does not carry over; " +
                "pass --reset-data to start a fresh pass over the data");
  if (o.reset_data) {
    // A fresh pass: the next epoch's plan from its first batch.
    if (r.state.batch_in_epoch > 0) ++r.state.epoch;
    r.state.batch_in_epoch = 0;
    spdlog::info("--reset-data: starting a fresh pass over the data (epoch {})",
                 r.state.epoch + 1);
  }
  spdlog::info("resumed from {} at step {}, epoch {}, batch {}", from, r.state.step,
               r.state.epoch + 1, r.state.batch_in_epoch);
}

}  // namespace

std::unique_ptr<Run> set_up_run(const Config& config, const TrainOptions& options) {
  auto r = std::make_unique<Run>();
  r->config = config;
  r->options = options;
  r->env = read_launch_env();
  open_run_dir(*r);
  choose_compute(*r);
  join_group(*r);
  // The main process prepares the run directory and the data; the others wait for it, without
  // a time limit (a corpus may take long to prepare), then read what it decided.
  Run& run = *r;
  r->data = prepare_run(r->config, r->options, [&run] {
    run.group->wait_for_rank0("run set-up");
    check_shared_run_dir(*run.group, run.options.run_dir);
  });
  build_model(*r);
  resume(*r);
  r->state.world_size = r->group->size();
  return r;
}

}  // namespace nmt
