#include "train/loss.h"

#include <cmath>

#include "data/batching.h"
#include "data/tensors.h"
#include "text/spm.h"

namespace nmt {

LossSums label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target,
                             double epsilon, int64_t ignore_index) {
  auto keep = target.ne(ignore_index);
  auto lprobs = torch::log_softmax(logits, -1);
  auto safe_target = target.masked_fill(~keep, 0);
  auto nll = -lprobs.gather(-1, safe_target.unsqueeze(-1)).squeeze(-1);
  auto smooth = -lprobs.mean(-1);
  auto keep_f = keep.to(lprobs.scalar_type());
  LossSums out;
  out.nll = (nll * keep_f).sum();
  out.loss = ((1.0 - epsilon) * nll + epsilon * smooth).mul(keep_f).sum();
  out.tokens = keep.sum().item<int64_t>();
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
