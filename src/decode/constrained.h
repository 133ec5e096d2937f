// Constrained beam search's part of a beam step (lexically constrained decoding with dynamic
// beam allocation, Post & Vilar 2018, batched as Hu et al. 2019 do it): the candidates that
// advance each hypothesis' phrases, and the state and bank each candidate leads to. beam.cpp
// runs one step for every sentence; this module only adds what phrases to include change.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "decode/search_parts.h"
#include "decode/terms.h"

namespace nmt {

// The constraint states of a batch's live rows (sentence b of the active ones owns rows
// [b*K, (b+1)*K)) and what one step adds to their candidates.
class ConstrainedBeams {
 public:
  // Every row of each of the `terms.size()` sentences starts with no piece met.
  ConstrainedBeams(const std::vector<SentenceTerms>& terms, int64_t K);

  // Whether row r's last token completed a phrase (its next token must end the word).
  bool just_met(int64_t r) const { return states_[static_cast<size_t>(r)].just_met; }

  // A step's own candidates for the rows of the active sentences that have phrases to include:
  // each row's best token and the tokens that advance its phrases, scored (beam score +
  // log-probability) on the device in one gather and copied to the host at once.
  void gather(const torch::Tensor& logits, const torch::Tensor& scores,
              const std::vector<int64_t>& sentences);

  // Active sentence b's candidates (global sentence s): the `width` best of the step (top_s,
  // top_i as top_candidates gives them, over V tokens) and its rows' own, each once, with the
  // state and bank each leads to. EOS is a candidate only from a hypothesis that has met every
  // phrase.
  SentenceCandidates candidates(at::TensorAccessor<float, 1> top_s,
                                at::TensorAccessor<int64_t, 1> top_i, int64_t b, int64_t s,
                                int64_t V) const;

  // Pieces of all of sentence s's phrases: the bank of a hypothesis that has met them all.
  int64_t total(int64_t s) const;

  // The next step's rows' states.
  void set_states(std::vector<ConstraintState> states) { states_ = std::move(states); }

 private:
  const std::vector<SentenceTerms>& terms_;
  int64_t K_;
  std::vector<ConstraintState> states_;      // per live row
  std::vector<std::vector<Candidate>> own_;  // per live row: gather's candidates
};

}  // namespace nmt
