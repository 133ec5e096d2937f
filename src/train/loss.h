// Label-smoothed cross-entropy.
#pragma once

#include <torch/torch.h>

#include "data/corpus.h"
#include "model/transformer.h"

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

struct CorpusLoss {
  double nll_per_token = 0;  // mean negative log-likelihood per target token (EOS included)
  double ppl = 0;            // exp(nll_per_token)
  int64_t tokens = 0;        // target tokens scored
};

// Teacher-forced loss of a corpus, batched by token budget. Switches the model to eval mode
// and back to the mode it was in.
CorpusLoss corpus_loss(Transformer& model, const Corpus& corpus, int64_t batch_tokens);

}  // namespace nmt
