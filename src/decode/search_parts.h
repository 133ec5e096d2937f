// What the search strategies (search.cpp, beam.cpp, constrained.cpp) share: a step's
// candidates, finishing a hypothesis, the output limits, host and device copies, the terms'
// masks and moving a batch's rows between steps.
#pragma once

#include <torch/torch.h>

#include <utility>
#include <vector>

#include "decode/search.h"
#include "decode/terms.h"

namespace nmt {

// One candidate of a beam step: the row it extends, its token and its score (beam score plus
// the token's log-probability).
struct Candidate {
  int64_t row, token;
  float score;
};

// One sentence's candidates of a step and what each leads to: its bank (constraint pieces met
// after it; 0 for every candidate without constraints) and, with constraints, its state.
struct SentenceCandidates {
  std::vector<Candidate> list;
  std::vector<int64_t> bank;
  std::vector<ConstraintState> after;  // empty without constraints
};

// Per-sentence output limits. BOS takes one position, so outputs stop at max_positions - 1.
std::vector<int64_t> output_limits(Scorer& scorer, const torch::Tensor& src,
                                   const SearchOptions& options);

// A hypothesis from its tokens and log-probability, scored with the length penalty alpha.
Hypothesis finish(std::vector<int> tokens, double log_prob, bool ended, double alpha);

// Host vectors to the device: explicit copies, once per step.
torch::Tensor long_tensor(const std::vector<int64_t>& values, const torch::Device& device);

// Float scores and int64 ids of one step on the host, read there by accessors. Off the CPU they
// travel as one double tensor (ids below 2^53 are exact): one device-to-host copy a step.
std::pair<torch::Tensor, torch::Tensor> to_host(const torch::Tensor& scores,
                                                const torch::Tensor& ids);

// Which pieces continue a word ([V] bool on `device`), from the terms' vocabulary; undefined
// when no sentence has terms.
torch::Tensor continues_mask(const std::vector<SentenceTerms>& terms, const torch::Device& device);

// What the terms ask of one row of a step: its output so far, its sentence's terms (null for
// none), and whether its last token completed a phrase to include.
struct RowTerms {
  const std::vector<int>* prefix;
  const SentenceTerms* terms;
  bool just_met;
};

// Applies the rows' terms to a step's logits [n, V] in place (-inf): the avoid phrases' last
// pieces after their other pieces; every token that would end the word, on a row whose output
// ends with an avoided phrase as a word; every token that would continue the word, on a row
// that has just completed a phrase to include.
void apply_terms(torch::Tensor& logits, const torch::Tensor& continues,
                 const std::vector<RowTerms>& rows);

// Moves the scorer's state to the next step's rows: `keep` (one entry per next row, the row it
// continues) selects whole groups when a sentence left the batch, else reorders rows inside
// their groups. Returns `keep` on the device.
torch::Tensor move_rows(ScorerState& state, const std::vector<int64_t>& keep, bool left,
                        const torch::Device& device);

}  // namespace nmt
