// From token ids to model tensors: padding and masks, as pure functions.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "data/corpus.h"

namespace nmt {

// Right-pads sequences with pad_id into an int64 tensor [rows, longest].
torch::Tensor pad_sequences(const std::vector<std::vector<int64_t>>& seqs, int64_t pad_id);

// True where tokens == pad_id: [B, T] -> bool [B, T].
torch::Tensor key_padding_mask(const torch::Tensor& tokens, int64_t pad_id);

// True above the diagonal: position i may not look at j > i. bool [T, T].
torch::Tensor causal_mask(int64_t length);

// Additive attention bias from a "blocked" mask: 0 where allowed, -inf where blocked.
torch::Tensor mask_to_bias(const torch::Tensor& blocked);

struct TensorBatch {
  torch::Tensor src;       // [B, S]: x + EOS, padded
  torch::Tensor tgt_in;    // [B, T]: BOS + y, padded
  torch::Tensor tgt_out;   // [B, T]: y + EOS, padded
  int64_t src_tokens = 0;  // non-pad source tokens
  int64_t tgt_tokens = 0;  // non-pad target tokens (the loss's denominator)
};

TensorBatch make_tensor_batch(const Corpus& corpus, const std::vector<int64_t>& rows);

}  // namespace nmt
