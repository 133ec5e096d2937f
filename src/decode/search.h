// Batched greedy, sampling and beam search: strategies of one search over a scorer
// (decode/scorer.h), a model or an ensemble alike. The strategy is a SearchMode, resolved once
// where the options are made (resolve_search_mode); search() dispatches on it.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "decode/sampling.h"
#include "decode/scorer.h"
#include "decode/terms.h"

namespace nmt {

// How a search picks each sentence's outputs.
enum class SearchMode {
  kGreedy,           // the argmax at every step
  kBeam,             // beam search over beam_size hypotheses
  kConstrainedBeam,  // beam search that must include phrases (dynamic beam allocation)
  kSampling,         // nbest draws from the model's distribution
};

struct SearchOptions {
  SearchMode mode = SearchMode::kGreedy;  // set from the fields below by resolve_search_mode
  int64_t beam_size = 1;        // 1 = greedy
  double length_penalty = 0.0;  // GNMT alpha (0 = none)
  int64_t nbest = 1;            // hypotheses per sentence (<= beam_size; samples when sampling)
  double max_len_a = 1.5;       // output length limit: a * source_length + b
  int64_t max_len_b = 10;
  SamplingOptions sampling;     // enabled: draw nbest samples per sentence (beam_size 1)
};

// The strategy the options ask for, checked once: sampling when sampling.enabled (beam 1, at
// least one sample, no constraints), constrained beam search with `constraints` (beam 2 or
// more), beam search when beam_size > 1, else greedy; nbest between 1 and the beam size. Throws
// Error naming the flag (--beam, --nbest, --sampling, --constraints) otherwise.
SearchMode resolve_search_mode(const SearchOptions& options, bool constraints);

// Rows a sentence takes in a batch: its beams, or its samples.
int64_t rows_per_sentence(const SearchOptions& options);

struct Hypothesis {
  std::vector<int> tokens;  // output ids without BOS/EOS
  double log_prob = 0.0;    // sum of token log-probabilities, EOS included when emitted
  double score = 0.0;       // log_prob / length_penalty(|Y|, alpha)
  bool ended = false;       // emitted EOS (false: stopped at the length limit)
  int64_t unmet = 0;        // constraint pieces it lacks (only at the length limit)
};

// GNMT length penalty ((5 + length) / 6)^alpha; length counts EOS when it was emitted.
double length_penalty(int64_t length, double alpha);

// Output length limit of one sentence: floor(a * source_length + b), within [1, cap].
int64_t max_output_length(int64_t source_length, const SearchOptions& options, int64_t cap);

// src: [B, S] EOS-terminated rows, right-padded, on any device (moved to the scorer's). Returns,
// per sentence, up to nbest hypotheses, best score first (samples: nbest, in the order drawn),
// from the strategy options.mode names. `lines`: each sentence's input line number, which keys
// its random streams when sampling (empty: 0, 1, ...). `terms`: each sentence's phrases to
// include (constrained beam search only) and to avoid (every strategy), or empty for none; a
// sentence without terms decodes exactly as without the argument. Each step copies its scores
// to the host once (twice when some sentence has constraints).
std::vector<std::vector<Hypothesis>> search(Scorer& scorer, const torch::Tensor& src,
                                            const SearchOptions& options,
                                            const std::vector<int64_t>& lines = {},
                                            const std::vector<SentenceTerms>& terms = {});

// The strategies, which search() picks among. Argmax at every step; sentences leave the batch
// when they emit EOS or reach their limit.
std::vector<std::vector<Hypothesis>> greedy_search(Scorer& scorer, const torch::Tensor& src,
                                                   const SearchOptions& options,
                                                   const std::vector<SentenceTerms>& terms = {});

// nbest samples per sentence (options.sampling), decoded side by side as one group of rows that
// shares the source encoding; a sentence leaves the batch when all of its samples have ended.
std::vector<std::vector<Hypothesis>> sample_search(Scorer& scorer, const torch::Tensor& src,
                                                   const SearchOptions& options,
                                                   const std::vector<int64_t>& lines = {},
                                                   const std::vector<SentenceTerms>& terms = {});

// Beam search batched over sentences and beams. A hypothesis that emits EOS (from the top
// beam_size candidates of its sentence) is set aside and replaced. A sentence is done, and
// leaves the batch, when its beams reach the length limit, or when it has beam_size finished
// hypotheses and its best live one, scored at its current length, no longer beats the
// beam_size-th of them (exact for length_penalty 0, where scores only fall).
// In SearchMode::kConstrainedBeam a sentence with phrases to include searches with dynamic beam
// allocation (Post & Vilar 2018; decode/constrained.h): each beam also proposes its best token
// and the tokens that advance its phrases, and the beam is shared among banks of hypotheses by
// constraint pieces met. Without constraints every candidate is in one bank, where the
// allocation is score order: one step serves both. Only a hypothesis that has met every phrase
// may end; at the length limit the ones that lack pieces are returned after the complete ones
// (Hypothesis::unmet).
std::vector<std::vector<Hypothesis>> beam_search(Scorer& scorer, const torch::Tensor& src,
                                                 const SearchOptions& options,
                                                 const std::vector<SentenceTerms>& terms = {});

}  // namespace nmt
