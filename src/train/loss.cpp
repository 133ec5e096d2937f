#include "train/loss.h"

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

}  // namespace nmt
