// Label-smoothed cross-entropy over vocabulary logits.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace nmt {

struct LossSums {
  torch::Tensor loss;  // sum of label-smoothed losses over counted rows (differentiable), float32
  torch::Tensor nll;   // sum of plain negative log-likelihoods (for perplexity), float32
};

// logits [N, V] (any floating dtype; computed in float32), target [N]. Smoothing follows
// PyTorch's cross_entropy(label_smoothing=eps): the gold class gets 1 - eps + eps/V and every
// class eps/V, so loss = (1 - eps) * nll + eps * mean_v(-log p_v). Rows whose target is
// ignore_index count for nothing. With gradients, float CPU logits go through one fused autograd
// node that keeps only its [N, V] gradient; others (CUDA) through ATen ops.
LossSums label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target,
                             double epsilon, int64_t ignore_index);

// The two implementations with gradients, for tests: the fused node (float CPU logits) and the
// ATen ops autograd differentiates (any device).
LossSums label_smoothed_loss_fused(const torch::Tensor& logits, const torch::Tensor& target,
                                   double epsilon, int64_t ignore_index);
LossSums label_smoothed_loss_aten(const torch::Tensor& logits, const torch::Tensor& target,
                                  double epsilon, int64_t ignore_index);

// exp(x) for x in [-87.3, 88.7] within 2e-7 relative (a branch-free polynomial, so that the
// fused loss's loops vectorize); below -87.3 it returns exp(-87.3). For the fused loss and tests.
float exp_approx(float x);

}  // namespace nmt
