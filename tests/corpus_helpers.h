// A synthetic copy-task corpus for tests that train: targets equal sources, so the loss falls
// fast and runs (devices, precisions, steps) can be compared.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "data/corpus.h"

namespace nmt_test {

// `pairs` rows of ids in [4, vocab), row i of length min_len + i % spread, drawn from
// LibTorch's generator seeded with `seed`.
inline nmt::Corpus copy_corpus(int64_t pairs, int64_t vocab, uint64_t seed, int64_t min_len,
                               int64_t spread) {
  torch::manual_seed(seed);
  nmt::Corpus c;
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t len = min_len + i % spread;
    const auto ids = torch::randint(4, vocab, {len}, torch::kLong);
    std::vector<int> row(static_cast<size_t>(len));
    for (int64_t k = 0; k < len; ++k) row[k] = static_cast<int>(ids[k].item<int64_t>());
    c.src.push_back(row);
    c.tgt.push_back(row);
  }
  return c;
}

}  // namespace nmt_test
