// Label-smoothed cross-entropy.
#pragma once

#include <torch/torch.h>

namespace nmt {

struct LossSums {
  torch::Tensor loss;  // sum of label-smoothed losses over counted tokens (differentiable)
  torch::Tensor nll;   // sum of plain negative log-likelihoods (for perplexity)
  int64_t tokens = 0;  // tokens counted (target != ignore_index)
};

// logits [N, V], target [N]. Smoothing follows PyTorch's cross_entropy(label_smoothing=eps): the
// gold class gets 1 - eps + eps/V and every class eps/V, so
// loss = (1 - eps) * nll + eps * mean_v(-log p_v). Rows whose target is ignore_index count for
// nothing.
LossSums label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target,
                             double epsilon, int64_t ignore_index);

}  // namespace nmt
