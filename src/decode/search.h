// Batched greedy, sampling and beam search: strategies over one scorer (decode/scorer.h), a
// model or an ensemble alike.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "decode/sampling.h"
#include "decode/scorer.h"
#include "decode/terms.h"
#include "model/seq2seq.h"

namespace nmt {

struct SearchOptions {
  int64_t beam_size = 1;        // 1 = greedy
  double length_penalty = 0.0;  // GNMT alpha (0 = none)
  int64_t nbest = 1;            // hypotheses per sentence (<= beam_size; samples when sampling)
  double max_len_a = 1.5;       // output length limit: a * source_length + b
  int64_t max_len_b = 10;
  SamplingOptions sampling;     // enabled: draw nbest samples per sentence (beam_size 1)
};

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

// src: [B, S] EOS-terminated rows, right-padded, on any device (moved to the scorer's). Returns,
// per sentence, up to nbest hypotheses, best score first (samples: nbest, in the order drawn).
// Sampling runs sample_search, beam_size 1 greedy_search. `lines`: each sentence's input line
// number, which keys its random streams when sampling (empty: 0, 1, ...). `terms`: each
// sentence's phrases to include (beam search only) and to avoid (every strategy), or empty for
// none; a sentence without terms decodes exactly as without the argument. Each step copies its
// scores to the host once (twice when some sentence has constraints).
std::vector<std::vector<Hypothesis>> search(Scorer& scorer, const torch::Tensor& src,
                                            const SearchOptions& options,
                                            const std::vector<int64_t>& lines = {},
                                            const std::vector<SentenceTerms>& terms = {});
// One model (a ModelScorer).
std::vector<std::vector<Hypothesis>> search(Seq2Seq& model, const torch::Tensor& src,
                                            const SearchOptions& options);

// Argmax at every step; sentences leave the batch when they emit EOS or reach their limit.
std::vector<std::vector<Hypothesis>> greedy_search(Scorer& scorer, const torch::Tensor& src,
                                                   const SearchOptions& options,
                                                   const std::vector<SentenceTerms>& terms = {});
std::vector<std::vector<Hypothesis>> greedy_search(Seq2Seq& model, const torch::Tensor& src,
                                                   const SearchOptions& options);

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
// A sentence with phrases to include searches with dynamic beam allocation (Post & Vilar 2018):
// each beam also proposes its best token and the tokens that advance its phrases, and the beam
// is shared among banks of hypotheses by constraint pieces met (decode/terms.h). Only a
// hypothesis that has met every phrase may end; at the length limit the ones that lack pieces
// are returned after the complete ones (Hypothesis::unmet).
std::vector<std::vector<Hypothesis>> beam_search(Scorer& scorer, const torch::Tensor& src,
                                                 const SearchOptions& options,
                                                 const std::vector<SentenceTerms>& terms = {});
std::vector<std::vector<Hypothesis>> beam_search(Seq2Seq& model, const torch::Tensor& src,
                                                 const SearchOptions& options);

}  // namespace nmt
