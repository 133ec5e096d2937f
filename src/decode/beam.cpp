// Beam search: one step for every sentence, constrained or not (decode/search.h).
#include <algorithm>
#include <limits>
#include <memory>
#include <numeric>

#include "decode/constrained.h"
#include "decode/search.h"
#include "decode/search_parts.h"
#include "decode/top_candidates.h"
#include "text/spm.h"

namespace nmt {

namespace {

// Whether the best live hypothesis, scored at its current length, would still beat the K-th best
// finished one. Stopping at the first K finished hypotheses instead would let short, poor ones
// end a sentence while a better, longer hypothesis is still growing.
bool can_improve(std::vector<Hypothesis>& finished, int64_t K, double best_live, int64_t length,
                 double alpha) {
  std::nth_element(finished.begin(), finished.begin() + (K - 1), finished.end(),
                   [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
  return best_live / length_penalty(length, alpha) > finished[K - 1].score;
}

// Where a step leaves one sentence's hypotheses.
struct BeamStep {
  const std::vector<std::vector<int>>& prefixes;  // per active row
  std::vector<Hypothesis>& finished;              // the sentence's
  int64_t K, length, limit;
  int64_t total;  // pieces of the sentence's phrases to include (0: none)
  double alpha;
};

// One sentence's step of beam search: its candidates ranked by allocation_order (over one bank,
// which is every candidate without constraints, that is score order). EOS among the first K
// ends a hypothesis into `finished`; the first K others are returned (indices into cands.list)
// as the next beams, or nothing when the sentence is done (no live candidate, no better one
// possible, or the length limit, where the live ones are finished as they are, with the pieces
// they lack).
std::vector<size_t> next_beams(const SentenceCandidates& cands, const BeamStep& step) {
  const int64_t K = step.K;
  std::vector<BankCandidate> banks;
  for (size_t i = 0; i < cands.list.size(); ++i)
    banks.push_back({cands.list[i].score, cands.bank[i]});
  std::vector<size_t> live;
  int64_t position = 0;
  for (const size_t i : allocation_order(banks)) {
    const auto& c = cands.list[i];
    if (c.token == kEosId) {
      // Only EOS among the K best candidates ends a hypothesis (as fairseq does).
      if (position++ < K)
        step.finished.push_back(finish(step.prefixes[c.row], c.score, true, step.alpha));
    } else if (static_cast<int64_t>(live.size()) < K) {
      ++position;
      live.push_back(i);
    }
  }
  float best = -std::numeric_limits<float>::infinity();
  for (const size_t i : live) best = std::max(best, cands.list[i].score);
  if (live.empty() || (static_cast<int64_t>(step.finished.size()) >= K &&
                       !can_improve(step.finished, K, best, step.length, step.alpha)))
    return {};
  if (step.length >= step.limit) {
    for (const size_t i : live) {
      auto tokens = step.prefixes[cands.list[i].row];
      tokens.push_back(static_cast<int>(cands.list[i].token));
      step.finished.push_back(finish(std::move(tokens), cands.list[i].score, false, step.alpha));
      step.finished.back().unmet = step.total - cands.bank[i];
    }
    return {};
  }
  return live;
}

// A sentence's candidates without constraints: the live ones among its `width` best, in one bank.
SentenceCandidates plain_candidates(at::TensorAccessor<float, 1> top_s,
                                    at::TensorAccessor<int64_t, 1> top_i, int64_t b, int64_t K,
                                    int64_t V) {
  SentenceCandidates cands;
  for (int64_t c = 0; c < top_s.size(0); ++c) {
    if (!std::isfinite(top_s[c])) break;  // sorted: only dead beams follow
    cands.list.push_back({b * K + top_i[c] / V, top_i[c] % V, top_s[c]});
    cands.bank.push_back(0);
  }
  return cands;
}

// The live hypotheses of a batch between two steps: the active sentences (sentence b of them
// owns rows [b*K, (b+1)*K)) and each row's prefix (and constraint state, under constraints),
// with what the step chose for each row.
struct LiveBeams {
  std::vector<int64_t> sentences;
  std::vector<std::vector<int>> prefixes;
  std::vector<ConstraintState> states;
  std::vector<int64_t> rows, tokens;  // the row each new beam extends, and its token
  std::vector<float> scores;
  bool left = false;  // a sentence finished and left the batch

  // Appends sentence s's next beams, cands' `live` ones (padded to K with dead copies when a
  // vocabulary smaller than the beam left it short), extending `before`'s rows.
  void add(int64_t s, const SentenceCandidates& cands, std::vector<size_t> live,
           const LiveBeams& before, int64_t K) {
    std::vector<float> live_scores;
    for (const size_t i : live) live_scores.push_back(cands.list[i].score);
    while (static_cast<int64_t>(live.size()) < K) {
      live.push_back(live.front());
      live_scores.push_back(-std::numeric_limits<float>::infinity());
    }
    sentences.push_back(s);
    for (size_t j = 0; j < live.size(); ++j) {
      const auto& cand = cands.list[live[j]];
      rows.push_back(cand.row);
      tokens.push_back(cand.token);
      scores.push_back(live_scores[j]);
      prefixes.push_back(before.prefixes[static_cast<size_t>(cand.row)]);
      prefixes.back().push_back(static_cast<int>(cand.token));
      if (!cands.after.empty()) states.push_back(cands.after[live[j]]);
    }
  }
};

// Each sentence's best candidates of one step, on the host.
struct StepTop {
  at::TensorAccessor<float, 2> top_s;
  at::TensorAccessor<int64_t, 2> top_i;
  int64_t V;
};

// The beams after one step, sentence by sentence; finished hypotheses go to `finished`.
LiveBeams next_live_beams(const LiveBeams& beams, const StepTop& top,
                          const ConstrainedBeams* constrained, const std::vector<int64_t>& limits,
                          int64_t K, int64_t length, double alpha,
                          std::vector<std::vector<Hypothesis>>& finished) {
  LiveBeams next;
  for (int64_t b = 0; b < static_cast<int64_t>(beams.sentences.size()); ++b) {
    const int64_t s = beams.sentences[static_cast<size_t>(b)];
    const SentenceCandidates cands =
        constrained != nullptr ? constrained->candidates(top.top_s[b], top.top_i[b], b, s, top.V)
                               : plain_candidates(top.top_s[b], top.top_i[b], b, K, top.V);
    const BeamStep step{
        beams.prefixes, finished[s], K,
        length,         limits[s],   constrained != nullptr ? constrained->total(s) : 0,
        alpha};
    auto live = next_beams(cands, step);
    if (live.empty())
      next.left = true;
    else
      next.add(s, cands, std::move(live), beams, K);
  }
  return next;
}

// Complete hypotheses first, then by score; the search's n best.
void rank_finished(std::vector<std::vector<Hypothesis>>& finished, int64_t nbest) {
  for (auto& hyps : finished) {
    std::stable_sort(hyps.begin(), hyps.end(), [](const Hypothesis& a, const Hypothesis& b) {
      if (a.unmet != b.unmet) return a.unmet < b.unmet;
      return a.score > b.score;
    });
    if (static_cast<int64_t>(hyps.size()) > nbest) hyps.resize(static_cast<size_t>(nbest));
  }
}

// Applies the sentences' terms to a step's logits: the rows' avoid lists, and the word ends
// after a completed phrase to include.
void apply_beam_terms(torch::Tensor& logits, const torch::Tensor& continues, const LiveBeams& beams,
                      const std::vector<SentenceTerms>& terms, const ConstrainedBeams* constrained,
                      int64_t K) {
  std::vector<RowTerms> rows;
  for (int64_t r = 0; r < static_cast<int64_t>(beams.prefixes.size()); ++r)
    rows.push_back({&beams.prefixes[static_cast<size_t>(r)],
                    &terms[static_cast<size_t>(beams.sentences[static_cast<size_t>(r / K)])],
                    constrained != nullptr && constrained->just_met(r)});
  apply_terms(logits, continues, rows);
}

}  // namespace

std::vector<std::vector<Hypothesis>> beam_search(Scorer& scorer, const torch::Tensor& src,
                                                 const SearchOptions& options,
                                                 const std::vector<SentenceTerms>& terms) {
  torch::InferenceMode guard;
  const int64_t B = src.size(0), K = options.beam_size;
  const auto limits = output_limits(scorer, src, options);
  const torch::Device device = scorer.device();
  // Source-side caches are computed and stored once per sentence; its K beams share them.
  auto state = scorer.start(src.to(device), K);
  LiveBeams beams;
  beams.sentences.resize(static_cast<size_t>(B));
  std::iota(beams.sentences.begin(), beams.sentences.end(), 0);
  beams.prefixes.resize(static_cast<size_t>(B * K));
  const bool avoiding = any_avoid(terms);
  std::unique_ptr<ConstrainedBeams> constrained;
  if (any_constraints(terms)) constrained = std::make_unique<ConstrainedBeams>(terms, K);
  const auto continues = avoiding || constrained ? continues_mask(terms, device) : torch::Tensor();
  // Only the first beam is live at the start, so the K beams do not repeat one hypothesis.
  auto scores = torch::full({B * K}, -std::numeric_limits<float>::infinity(),
                            torch::dtype(torch::kFloat).device(device));
  scores.view({B, K}).select(1, 0).zero_();
  auto input = torch::full({B * K}, kBosId, torch::dtype(torch::kLong).device(device));
  std::vector<std::vector<Hypothesis>> finished(B);
  for (int64_t length = 1; !beams.sentences.empty(); ++length) {
    auto logits = scorer.step(input, *state);
    if (avoiding || constrained)
      apply_beam_terms(logits, continues, beams, terms, constrained.get(), K);
    const int64_t V = logits.size(1);
    const auto [top_scores, top_ids] =
        top_candidates(logits, scores, K, std::min<int64_t>(2 * K, K * V));
    if (constrained) constrained->gather(logits, scores, beams.sentences);
    const auto [top_scores_h, top_ids_h] = to_host(top_scores, top_ids);
    const StepTop top{top_scores_h.accessor<float, 2>(), top_ids_h.accessor<int64_t, 2>(), V};
    LiveBeams next = next_live_beams(beams, top, constrained.get(), limits, K, length,
                                     options.length_penalty, finished);
    if (next.sentences.empty()) break;
    move_rows(*state, next.rows, next.left, device);
    input = long_tensor(next.tokens, device);
    scores = torch::tensor(next.scores).to(device);
    if (constrained) constrained->set_states(std::move(next.states));
    beams = std::move(next);
  }
  rank_finished(finished, options.nbest);
  return finished;
}

}  // namespace nmt
