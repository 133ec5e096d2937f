// From token ids to model tensors: padding and masks, as pure functions.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "data/pairs.h"

namespace nmt {

// Right-pads sequences with pad_id into an int64 tensor [rows, longest] on the CPU.
torch::Tensor pad_sequences(const std::vector<std::vector<int64_t>>& seqs, int64_t pad_id);

// True where tokens == pad_id: [B, T] -> bool [B, T], on the tokens' device.
torch::Tensor key_padding_mask(const torch::Tensor& tokens, int64_t pad_id);

// True above the diagonal: position i may not look at j > i. bool [T, T] on `device`.
torch::Tensor causal_mask(int64_t length, const torch::Device& device = torch::kCPU);

// Additive attention bias from a "blocked" mask: 0 where allowed, -inf where blocked; on the
// mask's device, in `dtype` (the model's).
torch::Tensor mask_to_bias(const torch::Tensor& blocked, torch::ScalarType dtype = torch::kFloat);

struct TensorBatch {
  torch::Tensor src;            // [B, S]: x + EOS, padded
  torch::Tensor tgt_in;         // [B, T]: BOS + y, padded
  torch::Tensor tgt_out;        // [B, T]: y + EOS, padded
  torch::Tensor tgt_positions;  // [tgt_tokens]: flat indices of tgt_out's non-pad cells, in order
  int64_t src_tokens = 0;       // non-pad source tokens
  int64_t tgt_tokens = 0;       // non-pad target tokens (the loss's denominator)
};

// Built on the CPU; tgt_positions is known there, so selecting the real target positions on a
// device needs no device-to-host count.
TensorBatch make_tensor_batch(const Pairs& pairs, const std::vector<int64_t>& rows);

// The batch's tensors on `device` (the same batch when it is the CPU). CUDA copies go through
// pinned memory and do not block the host.
TensorBatch to_device(const TensorBatch& batch, const torch::Device& device);

}  // namespace nmt
