// One optimizer step: the place where a step's gradients become ready. Forward and backward of
// its micro-batches (gradient accumulation) under the autocast of the run's precision, the loss
// normalised by the step's target tokens, gradient synchronisation (the data-parallel seam),
// clipping, the non-finite check and the update.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "data/tensors.h"
#include "model/device.h"
#include "model/seq2seq.h"

namespace nmt {

// Dynamic loss scaling for fp16, as torch.cuda.amp.GradScaler does it: the loss is multiplied by
// scale() before backward and the gradients divided by it after. A step whose gradients
// overflow is skipped and halves the scale; kGrowthInterval clean steps in a row double it.
class LossScaler {
 public:
  static constexpr double kInitialScale = 65536.0;
  static constexpr int64_t kGrowthInterval = 2000;

  explicit LossScaler(double scale = kInitialScale, int64_t good_steps = 0)
      : scale_(scale), good_steps_(good_steps) {}
  double scale() const { return scale_; }
  int64_t good_steps() const { return good_steps_; }
  void update(bool overflow);

 private:
  double scale_;
  int64_t good_steps_;
};

// How gradients are synchronised across processes. A single process needs none of it, which is
// what this base class does; data-parallel training overrides it.
class GradientSync {
 public:
  virtual ~GradientSync() = default;
  // Target tokens of the step over all processes: the loss normaliser.
  virtual int64_t global_tokens(int64_t local_tokens) { return local_tokens; }
  // Called before the backward pass of the step's last micro-batch (an all-reduce started from
  // gradient hooks can overlap it), and after it: the gradients must then be complete and equal
  // on every process.
  virtual void before_last_backward() {}
  virtual void gradients_ready(const std::vector<torch::Tensor>& params) { (void)params; }
  // Sums host values over the processes, in place: the step's loss and its skip decisions, so
  // that every process logs the same numbers and takes the same decision.
  virtual void sum(std::vector<double>& values) { (void)values; }
};

// Host seconds of a step's phases. On CUDA they time the launching, not the device's work.
struct PhaseTimes {
  double data = 0, forward = 0, backward = 0, update = 0;
  // Data-parallel: waiting for the gradient all-reduces after backward (what it did not hide).
  double sync = 0;
  PhaseTimes& operator+=(const PhaseTimes& o);
};

struct StepResult {
  enum class Status {
    kApplied,      // the update was made
    kNonFinite,    // a non-finite loss or gradient norm: skipped, nothing changed
    kOverflow,     // fp16 gradients overflowed: skipped, the loss scale halved
    kOutOfMemory,  // the device ran out of memory: skipped
  };
  Status status = Status::kApplied;
  double loss = 0;       // label-smoothed loss summed over the step's target tokens (all processes)
  double nll = 0;        // negative log-likelihood summed likewise
  double grad_norm = 0;  // global gradient norm before clipping
  int64_t tgt_tokens = 0;  // target tokens of the step, over all processes
  std::string error;       // kOutOfMemory: the first line of LibTorch's message
  PhaseTimes times;
};

// Test hooks for the fault paths: a NaN loss, an out-of-memory error in the forward pass.
struct StepFaults {
  bool nan_loss = false;
  bool out_of_memory = false;
};

class TrainStep {
 public:
  // Keeps references to the optimizer and `sync` (null: a single process).
  TrainStep(Seq2Seq model, torch::optim::Optimizer& optimizer, const TrainConfig& config,
            Precision precision, GradientSync* sync = nullptr);

  // One update at learning rate lr over the micro-batches (CPU tensors; moved to the model's
  // device here).
  StepResult run(const std::vector<TensorBatch>& batches, double lr, const StepFaults& faults = {});

  // Consecutive steps skipped for non-finite values, and for running out of memory.
  int64_t non_finite_in_a_row() const { return non_finite_in_a_row_; }
  int64_t out_of_memory_in_a_row() const { return out_of_memory_in_a_row_; }

  LossScaler& loss_scaler() { return scaler_; }

 private:
  // The micro-batches' passes: their losses and NLLs on the device, or out of memory.
  struct Passes {
    std::vector<torch::Tensor> losses, nlls;
    bool out_of_memory = false;
  };
  Passes forward_backward(const std::vector<TensorBatch>& batches, const StepFaults& faults,
                          double normaliser, double loss_scale, StepResult& r);
  // Gradient clipping and the step's sums over the processes into r; true when any process ran
  // out of memory.
  bool sum_over_processes(const Passes& p, double loss_scale, StepResult& r);
  // Applies the update, or skips it (out of memory, a non-finite value, an fp16 overflow).
  void decide(bool out_of_memory, StepResult& r);

  Seq2Seq model_;
  torch::optim::Optimizer& optimizer_;
  TrainConfig config_;
  Precision precision_;
  torch::Device device_;
  GradientSync default_sync_;
  GradientSync* sync_;
  std::vector<torch::Tensor> params_;
  LossScaler scaler_;
  int64_t non_finite_in_a_row_ = 0;
  int64_t out_of_memory_in_a_row_ = 0;
};

}  // namespace nmt
