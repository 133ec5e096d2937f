#include "model/loss.h"

#include <torch/autograd.h>

#include <tuple>

namespace nmt {

namespace {

// The smoothed loss and NLL sums of logits [N, V]; with `grad`, also d(loss)/d(logits), built in
// the buffer that held the softmax. One [N, V] tensor is allocated either way: no log-probability
// matrix, one-hot or smoothed target is materialised. Differentiable by autograd when `grad` is
// null (the row maximum is only a shift, so it is detached).
std::pair<torch::Tensor, torch::Tensor> smoothed_sums(const torch::Tensor& logits,
                                                      const torch::Tensor& target, double epsilon,
                                                      int64_t ignore_index, torch::Tensor* grad) {
  const int64_t V = logits.size(-1);
  const auto keep = target.ne(ignore_index);
  const auto keep_f = keep.to(logits.scalar_type());
  const auto gold = target.masked_fill(~keep, 0).unsqueeze(1);
  const auto max = std::get<0>(logits.max(1, true)).detach();
  auto p = (logits - max).exp_();
  const auto sum = p.sum(1, true);
  const auto lse = (max + sum.log()).squeeze(1);
  // -log p_gold = lse - x_gold; mean_v(-log p_v) = lse - mean_v(x_v).
  const auto nll = lse - logits.gather(1, gold).squeeze(1);
  const auto smooth = lse - logits.mean(1);
  auto loss = ((1.0 - epsilon) * nll + epsilon * smooth).mul(keep_f).sum();
  if (grad != nullptr) {
    // softmax - (1 - eps) * onehot(gold) - eps / V, zero on ignored rows.
    p.div_(sum).sub_(epsilon / static_cast<double>(V));
    p.scatter_add_(1, gold, torch::full_like(gold, -(1.0 - epsilon), p.options()));
    if (!keep.all().item<bool>()) p.mul_(keep_f.unsqueeze(1));
    *grad = p;
  }
  return {loss, nll.mul(keep_f).sum()};
}

// The loss as one autograd node that keeps only its gradient matrix: the unfused graph kept the
// log-probabilities and built two more [N, V] tensors in backward.
struct SmoothedCrossEntropy : torch::autograd::Function<SmoothedCrossEntropy> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const torch::Tensor& logits,
                                                const torch::Tensor& target, double epsilon,
                                                int64_t ignore_index) {
    torch::Tensor grad;
    auto [loss, nll] = smoothed_sums(logits, target, epsilon, ignore_index, &grad);
    ctx->save_for_backward({grad});
    ctx->mark_non_differentiable({nll});
    return {loss, nll};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto grad = ctx->get_saved_variables()[0];
    // Scaled in place: the saved matrix is not needed again (the trainer never retains the
    // graph), and a copy would be the step's largest allocation.
    return {grad.mul_(grads[0]), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

void check_shapes(const torch::Tensor& logits, const torch::Tensor& target) {
  TORCH_CHECK(logits.dim() == 2 && target.dim() == 1 && target.size(0) == logits.size(0),
              "label_smoothed_loss: logits [N, V] and target [N] expected, got ", logits.sizes(),
              " and ", target.sizes());
}

}  // namespace

LossSums label_smoothed_loss_fused(const torch::Tensor& logits, const torch::Tensor& target,
                                   double epsilon, int64_t ignore_index) {
  check_shapes(logits, target);
  TORCH_CHECK(logits.device().is_cpu() && logits.scalar_type() == torch::kFloat,
              "label_smoothed_loss_fused: float CPU logits only");
  auto sums = SmoothedCrossEntropy::apply(logits, target, epsilon, ignore_index);
  return {sums[0], sums[1]};
}

LossSums label_smoothed_loss_aten(const torch::Tensor& logits, const torch::Tensor& target,
                                  double epsilon, int64_t ignore_index) {
  check_shapes(logits, target);
  auto [loss, nll] =
      smoothed_sums(logits.to(torch::kFloat), target, epsilon, ignore_index, nullptr);
  return {loss, nll};
}

LossSums label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target,
                             double epsilon, int64_t ignore_index) {
  const bool fused = torch::GradMode::is_enabled() && logits.requires_grad() &&
                     logits.device().is_cpu() && logits.scalar_type() == torch::kFloat;
  return fused ? label_smoothed_loss_fused(logits, target, epsilon, ignore_index)
               : label_smoothed_loss_aten(logits, target, epsilon, ignore_index);
}

}  // namespace nmt
