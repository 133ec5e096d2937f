// The candidates of one search step: a sentence's best (row, token) pairs by beam score plus
// log-probability, from a fused CPU kernel or from ATen ops on any device.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <utility>

namespace nmt {

// The candidates of one search step: for each group of `group` consecutive rows of logits
// [R, V] (a sentence's beams), the `width` largest of log_softmax(logits row) + scores[row]
// over the group's group * V (row, token) pairs, best first, as values [R / group, width] (float)
// and ids k * V + token (k: the row within its group) [R / group, width]. On float CPU logits a
// fused kernel (one pass for the normaliser, one for the selection, no [R, V] temporaries, equal
// values in id order); otherwise top_candidates_aten.
std::pair<torch::Tensor, torch::Tensor> top_candidates(const torch::Tensor& logits,
                                                       const torch::Tensor& scores, int64_t group,
                                                       int64_t width);

// The same from ATen ops (any device and dtype; ties in any order).
std::pair<torch::Tensor, torch::Tensor> top_candidates_aten(const torch::Tensor& logits,
                                                            const torch::Tensor& scores,
                                                            int64_t group, int64_t width);

}  // namespace nmt
