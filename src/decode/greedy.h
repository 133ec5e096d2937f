// Batched greedy decoding and line-level translation.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "model/transformer.h"

namespace nmt {

struct DecodeLimits {
  double max_len_a = 1.5;  // output length limit: a * source_length + b
  int64_t max_len_b = 10;
};

// src: [B, S] padded with EOS-terminated rows. Returns each row's output ids without BOS/EOS.
std::vector<std::vector<int>> greedy_decode(Transformer& model, const torch::Tensor& src,
                                            const DecodeLimits& limits);

struct TranslateStats {
  int64_t lines = 0;
  int64_t truncated = 0;       // source lines cut to the model's longest input
  int64_t replaced_bytes = 0;  // invalid UTF-8 / NUL bytes replaced with U+FFFD
  int64_t output_tokens = 0;
};

// Translates lines, one output per input, in input order. Empty lines give empty outputs.
// Batches by source-token budget after sorting by length.
std::vector<std::string> translate_lines(LoadedModel& m, const std::vector<std::string>& lines,
                                         int64_t batch_tokens, const DecodeLimits& limits,
                                         TranslateStats* stats);

}  // namespace nmt
