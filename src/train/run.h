// A training run made ready: the run directory locked, logging, threads, the device and the
// precision, the process group (of one for a single process), the data, the seeded model, the
// optimizer and, with --resume, the state it continues from. What train/trainer.cpp's loop
// needs, and nothing it decides.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>

#include "config/config.h"
#include "model/device.h"
#include "model/seq2seq.h"
#include "group/group.h"
#include "train/setup.h"
#include "ckpt/checkpoint_state.h"
#include "train/step.h"
#include "util/io.h"
#include "util/lock.h"

namespace nmt {

struct Run {
  Config config;
  TrainOptions options;
  LaunchEnv env;                 // what the launcher said (restarts, local rank)
  std::optional<DirLock> lock;   // the run directory's, held by the main process
  torch::Device device{torch::kCPU};
  Precision precision = Precision::kFp32;
  std::unique_ptr<Group> group;  // of one for a single process
  RunSetup data;                 // vocabularies, the token store, validation set, resume point
  Seq2Seq model{nullptr};
  std::unique_ptr<torch::optim::Adam> optimizer;
  std::unique_ptr<GradientSync> sync;  // from the group: a no-op for one process
  CheckpointState state;                  // restored with --resume

  bool main_process() const { return group->rank() == 0; }
};

// Sets the run up; throws Error naming what is wrong (a locked or unusable run directory, a
// device or precision the machine lacks, a checkpoint that does not fit).
std::unique_ptr<Run> set_up_run(const Config& config, const TrainOptions& options);

}  // namespace nmt
