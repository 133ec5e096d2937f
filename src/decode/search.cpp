#include "decode/search.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>

#include "decode/search_parts.h"
#include "decode/top_candidates.h"
#include "text/spm.h"
#include "util/util.h"

namespace nmt {

double length_penalty(int64_t length, double alpha) {
  if (alpha == 0.0) return 1.0;
  return std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

int64_t max_output_length(int64_t source_length, const SearchOptions& options, int64_t cap) {
  const double l = options.max_len_a * static_cast<double>(source_length) +
                   static_cast<double>(options.max_len_b);
  return std::clamp<int64_t>(static_cast<int64_t>(std::floor(l)), 1, cap);
}

SearchMode resolve_search_mode(const SearchOptions& options, bool constraints) {
  if (options.beam_size < 1) throw Error("--beam must be >= 1");
  if (options.sampling.enabled) {
    check_sampling_options(options.sampling);
    if (options.beam_size != 1)
      throw Error("--sampling draws one token a step: drop --beam (or give --beam 1)");
    if (options.nbest < 1) throw Error("--nbest (samples per line) must be >= 1");
    if (constraints) throw Error("--constraints needs beam search: drop --sampling");
    return SearchMode::kSampling;
  }
  if (options.nbest < 1) throw Error("--nbest must be >= 1");
  if (options.nbest > options.beam_size)
    throw Error("--nbest " + std::to_string(options.nbest) + " exceeds the beam size " +
                std::to_string(options.beam_size) + " (raise --beam)");
  if (constraints) {
    if (options.beam_size < 2)
      throw Error("--constraints needs beam search: give --beam 2 or more");
    return SearchMode::kConstrainedBeam;
  }
  return options.beam_size == 1 ? SearchMode::kGreedy : SearchMode::kBeam;
}

int64_t rows_per_sentence(const SearchOptions& options) {
  return options.mode == SearchMode::kSampling ? options.nbest : options.beam_size;
}

std::vector<std::vector<Hypothesis>> search(Scorer& scorer, const torch::Tensor& src,
                                            const SearchOptions& options,
                                            const std::vector<int64_t>& lines,
                                            const std::vector<SentenceTerms>& terms) {
  if (!terms.empty() && static_cast<int64_t>(terms.size()) != src.size(0))
    throw Error("search: one entry of terms per sentence expected");
  if (options.mode != SearchMode::kConstrainedBeam && any_constraints(terms))
    throw Error("search: constraints need SearchMode::kConstrainedBeam");
  switch (options.mode) {
    case SearchMode::kGreedy:
      return greedy_search(scorer, src, options, terms);
    case SearchMode::kSampling:
      return sample_search(scorer, src, options, lines, terms);
    case SearchMode::kBeam:
    case SearchMode::kConstrainedBeam:
      break;
  }
  return beam_search(scorer, src, options, terms);
}

namespace {

// Picks each active row's next token from its scores [n, V]: returns the tokens [n] (on the
// scores' device) and their log-probabilities [n]. rows: each active row's global row
// (sentence * group + k); step: the output position.
using Draw = std::function<std::pair<torch::Tensor, torch::Tensor>(
    const torch::Tensor& scores, const std::vector<int64_t>& rows, int64_t step)>;

// The rows of a draw search between two steps: each active row's global row, and per global
// row its tokens, log-probability and whether it has ended.
struct DrawRows {
  std::vector<int64_t> active;
  std::vector<std::vector<int>> tokens;
  std::vector<double> log_probs;
  std::vector<char> ended;

  explicit DrawRows(int64_t n) : active(n), tokens(n), log_probs(n, 0.0), ended(n, 0) {
    std::iota(active.begin(), active.end(), 0);
  }

  // The active rows whose group (a sentence's `group` rows) still has a live row: whole groups
  // stay, since a scorer state keeps whole groups.
  std::vector<int64_t> live_groups(int64_t group) const {
    std::vector<int64_t> keep;
    const auto n = static_cast<int64_t>(active.size());
    for (int64_t r0 = 0; r0 < n; r0 += group) {
      bool live = false;
      for (int64_t k = 0; k < group; ++k) live = live || !ended[active[r0 + k]];
      if (live)
        for (int64_t k = 0; k < group; ++k) keep.push_back(r0 + k);
    }
    return keep;
  }
};

// One token per row per step, chosen by `draw`, for `group` rows per sentence (greedy: 1;
// samples: nbest). A row ends at EOS or its sentence's limit; a sentence's rows leave the batch
// together when all have ended (a scorer state keeps whole groups), the ended ones' tokens
// ignored meanwhile. Returns `group` hypotheses per sentence, in row order.
std::vector<std::vector<Hypothesis>> draw_search(Scorer& scorer, const torch::Tensor& src,
                                                 const SearchOptions& options, int64_t group,
                                                 const std::vector<SentenceTerms>& terms,
                                                 const Draw& draw) {
  torch::InferenceMode guard;
  const int64_t B = src.size(0), N = B * group;
  const auto limits = output_limits(scorer, src, options);
  const torch::Device device = scorer.device();
  auto state = scorer.start(src.to(device), group);
  DrawRows rows(N);
  std::vector<std::vector<Hypothesis>> out(B, std::vector<Hypothesis>(group));
  const bool avoiding = any_avoid(terms);
  const auto continues = avoiding ? continues_mask(terms, device) : torch::Tensor();
  auto input = torch::full({N}, kBosId, torch::dtype(torch::kLong).device(device));
  for (int64_t step = 0; !rows.active.empty(); ++step) {
    const auto n = static_cast<int64_t>(rows.active.size());
    auto logits = scorer.step(input, *state);
    if (avoiding) {
      std::vector<RowTerms> row_terms;
      for (const int64_t g : rows.active)
        row_terms.push_back({&rows.tokens[g], &terms[static_cast<size_t>(g / group)], false});
      apply_terms(logits, continues, row_terms);
    }
    const auto [next, values] = draw(logits, rows.active, step);
    const auto [values_h, next_h] = to_host(values, next);
    const auto value_a = values_h.accessor<float, 1>();
    const auto next_a = next_h.accessor<int64_t, 1>();
    for (int64_t r = 0; r < n; ++r) {
      const int64_t g = rows.active[r], s = g / group;
      if (rows.ended[g]) continue;
      const int64_t tok = next_a[r];
      rows.log_probs[g] += value_a[r];
      const bool ended = tok == kEosId;
      if (!ended) rows.tokens[g].push_back(static_cast<int>(tok));
      if (ended || static_cast<int64_t>(rows.tokens[g].size()) >= limits[s]) {
        out[s][g % group] =
            finish(std::move(rows.tokens[g]), rows.log_probs[g], ended, options.length_penalty);
        rows.ended[g] = 1;
      }
    }
    const auto keep = rows.live_groups(group);
    if (static_cast<int64_t>(keep.size()) == n) {
      input = next;
      continue;
    }
    if (keep.empty()) break;
    // Finished sentences leave the batch.
    input = next.index_select(0, move_rows(*state, keep, true, device));
    std::vector<int64_t> kept_rows;
    for (const int64_t r : keep) kept_rows.push_back(rows.active[r]);
    rows.active = std::move(kept_rows);
  }
  return out;
}

}  // namespace

std::vector<std::vector<Hypothesis>> greedy_search(Scorer& scorer, const torch::Tensor& src,
                                                   const SearchOptions& options,
                                                   const std::vector<SentenceTerms>& terms) {
  const Draw argmax = [](const torch::Tensor& scores, const std::vector<int64_t>& rows, int64_t) {
    const auto n = static_cast<int64_t>(rows.size());
    const auto top = top_candidates(
        scores, torch::zeros({n}, torch::dtype(torch::kFloat).device(scores.device())), 1, 1);
    return std::make_pair(top.second.view({n}), top.first.view({n}));
  };
  return draw_search(scorer, src, options, 1, terms, argmax);
}

std::vector<std::vector<Hypothesis>> sample_search(Scorer& scorer, const torch::Tensor& src,
                                                   const SearchOptions& options,
                                                   const std::vector<int64_t>& lines,
                                                   const std::vector<SentenceTerms>& terms) {
  const int64_t group = options.nbest;
  if (!lines.empty() && static_cast<int64_t>(lines.size()) != src.size(0))
    throw Error("sample_search: one line number per sentence expected");
  const Draw sample = [&](const torch::Tensor& scores, const std::vector<int64_t>& rows,
                          int64_t step) {
    std::vector<uint64_t> keys;
    for (const int64_t g : rows) {
      const int64_t s = g / group;
      const auto line = static_cast<uint64_t>(lines.empty() ? s : lines[static_cast<size_t>(s)]);
      keys.push_back(stream_key(options.sampling.seed, line, static_cast<uint64_t>(g % group),
                                static_cast<uint64_t>(step)));
    }
    return sample_tokens(scores, gumbel_noise(keys, scores.size(1)), options.sampling);
  };
  return draw_search(scorer, src, options, group, terms, sample);
}

}  // namespace nmt
