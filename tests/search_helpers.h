// The searches over one model, for the tests that drive a model directly: a ModelScorer around
// it, and the strategy resolved from the options' fields as a command resolves it (so a bad
// combination throws, as the command would).
#pragma once

#include <torch/torch.h>

#include <vector>

#include "decode/scorer.h"
#include "decode/search.h"
#include "model/seq2seq.h"

namespace nmt {

inline SearchOptions resolved(SearchOptions o, bool constraints = false) {
  o.mode = resolve_search_mode(o, constraints);
  return o;
}

inline std::vector<std::vector<Hypothesis>> search(Seq2Seq& model, const torch::Tensor& src,
                                                   const SearchOptions& options) {
  ModelScorer scorer(model);
  return search(scorer, src, resolved(options));
}

inline std::vector<std::vector<Hypothesis>> greedy_search(Seq2Seq& model, const torch::Tensor& src,
                                                          const SearchOptions& options) {
  ModelScorer scorer(model);
  return greedy_search(scorer, src, options);
}

inline std::vector<std::vector<Hypothesis>> beam_search(Seq2Seq& model, const torch::Tensor& src,
                                                        const SearchOptions& options) {
  ModelScorer scorer(model);
  return beam_search(scorer, src, options);
}

}  // namespace nmt
