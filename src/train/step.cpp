#include "train/step.h"

#include <chrono>
#include <cmath>
#include <limits>

#include "model/loss.h"
#include "text/spm.h"

namespace nmt {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Clips the gradients to max_norm as torch::nn::utils::clip_grad_norm_ (LibTorch 1.13) does,
// without reading anything back: returns the global norm before clipping, [1]. With max_norm 0
// nothing is clipped and the per-parameter squared sums come back instead, [P], for the host to
// add up in order.
torch::Tensor clip_gradients(const std::vector<torch::Tensor>& params, double max_norm) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad().data());
  if (grads.empty()) return torch::zeros({1});
  std::vector<torch::Tensor> parts;
  parts.reserve(grads.size());
  if (max_norm <= 0) {
    for (const auto& g : grads) parts.push_back(g.pow(2).sum());
    return torch::stack(parts);
  }
  for (const auto& g : grads) parts.push_back(g.norm(2.0));
  const auto total = parts.size() == 1 ? parts[0] : torch::stack(parts).norm(2.0);
  const auto coef = torch::clamp(max_norm / (total + 1e-6), c10::nullopt, 1.0);
  for (auto& g : grads) g.mul_(coef);
  return total.view({1});
}

bool is_out_of_memory(const c10::Error& e) {
  return dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr ||
         std::string(e.what()).find("out of memory") != std::string::npos;
}

}  // namespace

void LossScaler::update(bool overflow) {
  if (overflow) {
    scale_ /= 2;
    good_steps_ = 0;
  } else if (++good_steps_ >= kGrowthInterval) {
    scale_ *= 2;
    good_steps_ = 0;
  }
}

PhaseTimes& PhaseTimes::operator+=(const PhaseTimes& o) {
  data += o.data;
  forward += o.forward;
  backward += o.backward;
  update += o.update;
  sync += o.sync;
  return *this;
}

TrainStep::TrainStep(Seq2Seq model, torch::optim::Optimizer& optimizer, const TrainConfig& config,
                     Precision precision, GradientSync* sync)
    : model_(std::move(model)),
      optimizer_(optimizer),
      config_(config),
      precision_(precision),
      device_(model_->device()),
      sync_(sync != nullptr ? sync : &default_sync_),
      params_(model_->parameters()) {}

StepResult TrainStep::run(const std::vector<TensorBatch>& batches, double lr,
                          const StepFaults& faults) {
  StepResult r;
  int64_t local_tokens = 0;
  for (const auto& b : batches) local_tokens += b.tgt_tokens;
  // The loss is a sum over tokens; dividing it by the step's tokens (over all processes) makes
  // the update the gradient of the mean, whatever the accumulation or the number of processes.
  r.tgt_tokens = sync_->global_tokens(local_tokens);
  const double loss_scale = precision_ == Precision::kFp16 ? scaler_.scale() : 1.0;
  for (auto& group : optimizer_.param_groups()) group.options().set_lr(lr);
  optimizer_.zero_grad();
  Passes p = forward_backward(batches, faults, static_cast<double>(r.tgt_tokens), loss_scale, r);
  // Every process takes part in the gradient sums and in the step's sums, whatever happened to
  // it: the others wait for its share.
  auto t0 = Clock::now();
  sync_->gradients_ready(params_);
  r.times.sync = since(t0);
  t0 = Clock::now();
  const bool out_of_memory = sum_over_processes(p, loss_scale, r);
  decide(out_of_memory, r);
  r.times.update += since(t0);
  return r;
}

TrainStep::Passes TrainStep::forward_backward(const std::vector<TensorBatch>& batches,
                                              const StepFaults& faults, double normaliser,
                                              double loss_scale, StepResult& r) {
  Passes p;
  try {
    for (size_t i = 0; i < batches.size(); ++i) {
      auto t0 = Clock::now();
      const auto b = to_device(batches[i], device_);
      r.times.data += since(t0);
      t0 = Clock::now();
      LossSums sums;
      {
        const AutocastGuard autocast(device_, precision_);
        TORCH_CHECK_WITH(OutOfMemoryError, !faults.out_of_memory,
                         "out of memory (simulated by NMT_DEBUG_OOM_STEPS)");
        const auto states = model_->decode(b.tgt_in, model_->encode(b.src));
        // Only real target positions are projected: padding never reaches the vocabulary
        // product. The logits die with this statement; the loss keeps only what backward needs.
        sums = label_smoothed_loss(
            model_->project(states.reshape({-1, states.size(-1)}).index_select(0, b.tgt_positions)),
            b.tgt_out.view(-1).index_select(0, b.tgt_positions), config_.label_smoothing, kPadId);
      }
      if (faults.nan_loss) sums.loss = sums.loss * std::numeric_limits<double>::quiet_NaN();
      r.times.forward += since(t0);
      t0 = Clock::now();
      if (i + 1 == batches.size()) sync_->before_last_backward();
      if (precision_ == Precision::kFp16)
        (sums.loss * (loss_scale / normaliser)).backward();
      else
        (sums.loss / normaliser).backward();
      r.times.backward += since(t0);
      p.losses.push_back(sums.loss.detach());
      p.nlls.push_back(sums.nll.detach());
    }
  } catch (const c10::Error& e) {
    if (!is_out_of_memory(e)) throw;
    // The failed pass's tensors are gone with the stack; drop the partial gradients and give
    // the cached blocks back so that the next batch starts from a clean allocator.
    p.losses.clear();
    p.nlls.clear();
    optimizer_.zero_grad();
    release_cached_memory(device_);
    const std::string what = e.what_without_backtrace();
    r.error = what.substr(0, what.find('\n'));
    p.out_of_memory = true;
  }
  return p;
}

bool TrainStep::sum_over_processes(const Passes& p, double loss_scale, StepResult& r) {
  if (p.out_of_memory) {
    std::vector<double> sums{0.0, 0.0, 1.0};
    sync_->sum(sums);
    return true;
  }
  if (precision_ == Precision::kFp16) {
    torch::NoGradGuard no_grad;
    for (const auto& param : params_)
      if (param.grad().defined()) param.grad().mul_(1.0 / loss_scale);
  }
  const auto norm_parts = clip_gradients(params_, config_.clip_norm);
  // The step's one device-to-host copy: losses, NLLs and the gradient norm (or its parts).
  const auto zero = torch::zeros({1}, torch::dtype(torch::kFloat).device(device_));
  const auto host = torch::cat({p.losses.empty() ? zero : torch::stack(p.losses),
                                p.nlls.empty() ? zero : torch::stack(p.nlls), norm_parts})
                        .to(torch::kCPU)
                        .to(torch::kDouble);
  const double* v = host.data_ptr<double>();
  const size_t m = std::max<size_t>(1, p.losses.size());
  for (size_t i = 0; i < m; ++i) {
    r.loss += v[i];
    r.nll += v[m + i];
  }
  if (config_.clip_norm > 0) {
    r.grad_norm = v[2 * m];
  } else {
    double sq = 0;
    for (int64_t i = static_cast<int64_t>(2 * m); i < host.numel(); ++i) sq += v[i];
    r.grad_norm = std::sqrt(sq);
  }
  std::vector<double> sums{r.loss, r.nll, 0.0};
  sync_->sum(sums);
  r.loss = sums[0];
  r.nll = sums[1];
  if (sums[2] > 0) r.error = "another process ran out of memory";
  return sums[2] > 0;
}

void TrainStep::decide(bool out_of_memory, StepResult& r) {
  if (out_of_memory) {
    optimizer_.zero_grad();
    r.status = StepResult::Status::kOutOfMemory;
    ++out_of_memory_in_a_row_;
    return;
  }
  out_of_memory_in_a_row_ = 0;
  // The sums and the gradients are the same on every process, so is this decision.
  const bool fp16 = precision_ == Precision::kFp16;
  const bool loss_ok = std::isfinite(r.loss);
  if (!(loss_ok && std::isfinite(r.grad_norm))) {
    // A diverged step must not reach the weights or Adam's moments.
    optimizer_.zero_grad();
    if (fp16 && loss_ok) {
      scaler_.update(true);
      r.status = StepResult::Status::kOverflow;
      return;
    }
    ++non_finite_in_a_row_;
    r.status = StepResult::Status::kNonFinite;
    return;
  }
  non_finite_in_a_row_ = 0;
  optimizer_.step();
  if (fp16) scaler_.update(false);
}

}  // namespace nmt
