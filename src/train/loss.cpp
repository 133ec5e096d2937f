#include "train/loss.h"

#include <torch/autograd.h>

#include <cmath>
#include <tuple>

#include "data/batching.h"
#include "data/tensors.h"
#include "text/spm.h"

namespace nmt {

namespace {

// The smoothed loss and NLL sums of logits [N, V]; with `grad`, also d(loss)/d(logits), built in
// the buffer that held the softmax. One [N, V] tensor is allocated either way: no log-probability
// matrix, one-hot or smoothed target is materialised.
std::pair<torch::Tensor, torch::Tensor> smoothed_sums(const torch::Tensor& logits,
                                                      const torch::Tensor& target, double epsilon,
                                                      int64_t ignore_index, torch::Tensor* grad) {
  const int64_t V = logits.size(-1);
  const auto keep = target.ne(ignore_index);
  const auto keep_f = keep.to(logits.scalar_type());
  const auto gold = target.masked_fill(~keep, 0).unsqueeze(1);
  const auto max = std::get<0>(logits.max(1, true));
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

}  // namespace

LossSums label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target,
                             double epsilon, int64_t ignore_index) {
  TORCH_CHECK(logits.dim() == 2 && target.dim() == 1 && target.size(0) == logits.size(0),
              "label_smoothed_loss: logits [N, V] and target [N] expected, got ", logits.sizes(),
              " and ", target.sizes());
  LossSums out;
  if (torch::GradMode::is_enabled() && logits.requires_grad()) {
    auto sums = SmoothedCrossEntropy::apply(logits, target, epsilon, ignore_index);
    out.loss = sums[0];
    out.nll = sums[1];
  } else {
    std::tie(out.loss, out.nll) = smoothed_sums(logits, target, epsilon, ignore_index, nullptr);
  }
  out.tokens = target.ne(ignore_index).sum().item<int64_t>();
  return out;
}

CorpusLoss corpus_loss(Transformer& model, const Corpus& corpus, int64_t batch_tokens) {
  const bool was_training = model->is_training();
  model->eval();
  torch::NoGradGuard no_grad;
  const auto plan =
      make_batches(sequence_lengths(corpus.src), sequence_lengths(corpus.tgt), batch_tokens, 0);
  double nll = 0;
  int64_t tokens = 0;
  for (const auto& rows : plan) {
    const auto b = make_tensor_batch(corpus, rows);
    auto logits = model->forward(b.src, b.tgt_in);
    auto sums =
        label_smoothed_loss(logits.view({-1, logits.size(-1)}), b.tgt_out.view(-1), 0.0, kPadId);
    nll += sums.nll.item<double>();
    tokens += sums.tokens;
  }
  model->train(was_training);
  CorpusLoss r;
  r.tokens = tokens;
  r.nll_per_token = tokens > 0 ? nll / static_cast<double>(tokens) : 0.0;
  r.ppl = std::exp(r.nll_per_token);
  return r;
}

}  // namespace nmt
