#include "decode/search.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "text/spm.h"
#include "util/fast_math.h"
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

namespace {

// Per-sentence output limits. BOS takes one position, so outputs stop at max_positions - 1.
std::vector<int64_t> output_limits(Scorer& scorer, const torch::Tensor& src,
                                   const SearchOptions& options) {
  // Source length without its EOS, as the a * len + b limit is usually stated.
  const auto src_lens = (src.ne(kPadId).sum(1) - 1).to(torch::kCPU).contiguous();
  const auto* lens = src_lens.data_ptr<int64_t>();
  std::vector<int64_t> limits(static_cast<size_t>(src.size(0)));
  for (size_t i = 0; i < limits.size(); ++i)
    limits[i] = max_output_length(lens[i], options, scorer.max_positions() - 1);
  return limits;
}

Hypothesis finish(std::vector<int> tokens, double log_prob, bool ended, double alpha) {
  Hypothesis h;
  const auto length = static_cast<int64_t>(tokens.size()) + (ended ? 1 : 0);
  h.tokens = std::move(tokens);
  h.log_prob = log_prob;
  h.score = log_prob / length_penalty(length, alpha);
  h.ended = ended;
  return h;
}

// Whether the best live hypothesis, scored at its current length, would still beat the K-th best
// finished one. Stopping at the first K finished hypotheses instead would let short, poor ones
// end a sentence while a better, longer hypothesis is still growing.
bool can_improve(std::vector<Hypothesis>& finished, int64_t K, double best_live, int64_t length,
                 double alpha) {
  std::nth_element(finished.begin(), finished.begin() + (K - 1), finished.end(),
                   [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
  return best_live / length_penalty(length, alpha) > finished[K - 1].score;
}

// Host vectors to the device: explicit copies, once per step.
torch::Tensor long_tensor(const std::vector<int64_t>& values, const torch::Device& device) {
  return torch::tensor(values, torch::kLong).to(device);
}

// Float scores and int64 ids of one step on the host, read there by accessors. Off the CPU they
// travel as one double tensor (ids below 2^53 are exact): one device-to-host copy a step.
std::pair<torch::Tensor, torch::Tensor> to_host(const torch::Tensor& scores,
                                                const torch::Tensor& ids) {
  if (scores.device().is_cpu()) return {scores.to(torch::kFloat), ids};
  const auto both = torch::stack({scores.to(torch::kDouble), ids.to(torch::kDouble)}).cpu();
  return {both[0].to(torch::kFloat), both[1].to(torch::kLong)};
}

// Sixteen partial maxima or sums: GCC vectorizes these across lanes (one float reduction it may
// not reorder without -ffast-math).
constexpr int64_t kLanes = 16;

// log_softmax's normaliser of one row: its max and log(sum(exp(x - max))).
struct Normaliser {
  float max, log_sum;
};

NMT_CPU_CLONES
Normaliser row_normaliser(const float* __restrict x, int64_t V) {
  const int64_t body = V / kLanes * kLanes;
  const float max = lanes_max<kLanes>(x, V);
  float lanes[kLanes] = {};
  for (int64_t v = 0; v < body; v += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += exp_poly(x[v + l] - max);
  float sum = 0.0f;
  for (int64_t l = 0; l < kLanes; ++l) sum += lanes[l];
  for (int64_t v = body; v < V; ++v) sum += exp_poly(x[v] - max);
  return {max, std::log(sum)};
}

// The `width` largest (value, id) seen, best first; among equal values the first seen first.
class TopList {
 public:
  TopList(float* values, int64_t* ids, int64_t width) : values_(values), ids_(ids), width_(width) {}
  // Values below this cannot enter.
  float threshold() const { return size_ < width_ ? -INFINITY : values_[width_ - 1]; }
  void offer(float value, int64_t id) {
    if (size_ == width_ && !(value > values_[width_ - 1])) return;
    int64_t i = std::min(size_, width_ - 1);
    for (; i > 0 && value > values_[i - 1]; --i) {
      values_[i] = values_[i - 1];
      ids_[i] = ids_[i - 1];
    }
    values_[i] = value;
    ids_[i] = id;
    size_ = std::min(size_ + 1, width_);
  }
  bool full() const { return size_ == width_; }

 private:
  float* values_;
  int64_t* ids_;
  int64_t width_, size_ = 0;
};

// Offers every log_softmax(x)[v] + score of one row (ids offset + v) to `top`. The values of a
// chunk are computed (vectorized) before any is offered, and a chunk whose best cannot enter is
// skipped: after the first few chunks almost all are.
NMT_CPU_CLONES
void offer_row(const float* __restrict x, int64_t V, Normaliser norm, float score, int64_t offset,
               TopList& top) {
  constexpr int64_t kChunk = 64;
  float values[kChunk];
  for (int64_t v0 = 0; v0 < V; v0 += kChunk) {
    const int64_t n = std::min(kChunk, V - v0);
    for (int64_t v = 0; v < n; ++v) values[v] = ((x[v0 + v] - norm.max) - norm.log_sum) + score;
    if (top.full() && !(lanes_max<kLanes>(values, n) > top.threshold())) continue;
    for (int64_t v = 0; v < n; ++v) top.offer(values[v], offset + v0 + v);
  }
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> top_candidates_aten(const torch::Tensor& logits,
                                                            const torch::Tensor& scores,
                                                            int64_t group, int64_t width) {
  const int64_t R = logits.size(0), V = logits.size(1);
  const auto totals =
      torch::log_softmax(logits.to(torch::kFloat), -1) + scores.to(torch::kFloat).view({R, 1});
  auto [values, ids] = totals.view({R / group, group * V}).topk(width, 1);
  return {values, ids};
}

std::pair<torch::Tensor, torch::Tensor> top_candidates(const torch::Tensor& logits,
                                                       const torch::Tensor& scores, int64_t group,
                                                       int64_t width) {
  if (logits.dim() != 2 || scores.dim() != 1 || scores.size(0) != logits.size(0) || group < 1 ||
      logits.size(0) % group != 0 || width < 1 || width > group * logits.size(1))
    throw Error(
        "top_candidates: logits [R, V], scores [R], R a multiple of the group and width <= "
        "group * V expected");
  if (!logits.device().is_cpu() || logits.scalar_type() != torch::kFloat)
    return top_candidates_aten(logits, scores, group, width);
  const auto x = logits.contiguous();
  const auto s = scores.to(torch::kFloat).contiguous();
  const int64_t R = x.size(0), V = x.size(1), G = R / group;
  auto top_values = torch::empty({G, width}, torch::kFloat);
  auto top_ids = torch::empty({G, width}, torch::kLong);
  const float* px = x.data_ptr<float>();
  const float* ps = s.data_ptr<float>();
  float* pv = top_values.data_ptr<float>();
  int64_t* pi = top_ids.data_ptr<int64_t>();
  at::parallel_for(0, G, 1, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      TopList top(pv + g * width, pi + g * width, width);
      for (int64_t k = 0; k < group; ++k) {
        const int64_t r = g * group + k;
        const float* row = px + r * V;
        offer_row(row, V, row_normaliser(row, V), ps[r], k * V, top);
      }
    }
  });
  return {top_values, top_ids};
}

int64_t rows_per_sentence(const SearchOptions& options) {
  return options.sampling.enabled ? options.nbest : options.beam_size;
}

std::vector<std::vector<Hypothesis>> search(Scorer& scorer, const torch::Tensor& src,
                                            const SearchOptions& options,
                                            const std::vector<int64_t>& lines,
                                            const std::vector<SentenceTerms>& terms) {
  if (options.beam_size < 1) throw Error("beam size must be >= 1");
  if (!terms.empty() && static_cast<int64_t>(terms.size()) != src.size(0))
    throw Error("search: one entry of terms per sentence expected");
  const bool constrained = any_include(terms);
  if (options.sampling.enabled) {
    if (options.beam_size != 1) throw Error("sampling draws one token a step: beam size 1");
    if (options.nbest < 1) throw Error("nbest (samples per line) must be >= 1");
    if (constrained) throw Error("constraints need beam search, not sampling");
    return sample_search(scorer, src, options, lines, terms);
  }
  if (options.nbest < 1 || options.nbest > options.beam_size)
    throw Error("nbest must be between 1 and the beam size " + std::to_string(options.beam_size));
  if (constrained && options.beam_size < 2)
    throw Error("constraints need beam search: a beam of 2 or more");
  return options.beam_size == 1 ? greedy_search(scorer, src, options, terms)
                                : beam_search(scorer, src, options, terms);
}

std::vector<std::vector<Hypothesis>> search(Seq2Seq& model, const torch::Tensor& src,
                                            const SearchOptions& options) {
  ModelScorer scorer(model);
  return search(scorer, src, options);
}

std::vector<std::vector<Hypothesis>> greedy_search(Seq2Seq& model, const torch::Tensor& src,
                                                   const SearchOptions& options) {
  ModelScorer scorer(model);
  return greedy_search(scorer, src, options);
}

std::vector<std::vector<Hypothesis>> beam_search(Seq2Seq& model, const torch::Tensor& src,
                                                 const SearchOptions& options) {
  ModelScorer scorer(model);
  return beam_search(scorer, src, options);
}

namespace {

// Sets to -inf, in place, the rows `rows` of logits where `mask` [V] is true.
void mask_rows(torch::Tensor& logits, const std::vector<int64_t>& rows, const torch::Tensor& mask) {
  if (rows.empty()) return;
  const auto index = long_tensor(rows, logits.device());
  auto sub = logits.index_select(0, index);
  sub.masked_fill_(mask.unsqueeze(0), -std::numeric_limits<float>::infinity());
  logits.index_copy_(0, index, sub);
}

// Which pieces continue a word ([V] bool on `device`), from the terms' vocabulary; undefined
// when no sentence has terms.
torch::Tensor continues_mask(const std::vector<SentenceTerms>& terms, const torch::Device& device) {
  for (const auto& t : terms)
    if (t.pieces != nullptr && !t.empty()) {
      const auto& c = t.pieces->continues;
      return torch::tensor(std::vector<uint8_t>(c.begin(), c.end()), torch::kUInt8)
          .to(torch::kBool)
          .to(device);
    }
  return {};
}

// Applies the sentences' terms to a step's logits [n, V] in place (-inf): the avoid phrases'
// last pieces after their other pieces; every token that would end the word, on a row whose
// output ends with an avoided phrase as a word; every token that would continue the word, on a
// row that has just completed a phrase to include. terms(r): row r's terms or null; prefix(r):
// its output so far; just_met(r): whether its last token completed a phrase.
template <typename Prefix, typename Terms, typename JustMet>
void apply_terms(torch::Tensor& logits, const torch::Tensor& continues, const Prefix& prefix,
                 const Terms& terms, const JustMet& just_met) {
  std::vector<int64_t> rows, tokens, go_on, stop;
  for (int64_t r = 0; r < logits.size(0); ++r) {
    const SentenceTerms* t = terms(r);
    if (t == nullptr || t->empty()) continue;
    const std::vector<int>& p = prefix(r);
    for (const int64_t token : blocked_tokens(p, t->avoid)) {
      rows.push_back(r);
      tokens.push_back(token);
    }
    if (t->pieces != nullptr)
      for (const auto& text : t->avoid_text)
        if (ends_with_phrase(p, *t->pieces, text)) {
          go_on.push_back(r);
          break;
        }
    if (t->pieces != nullptr && just_met(r)) stop.push_back(r);
  }
  if (!rows.empty())
    logits.index_put_({long_tensor(rows, logits.device()), long_tensor(tokens, logits.device())},
                      -std::numeric_limits<float>::infinity());
  if (continues.defined()) {
    mask_rows(logits, go_on, continues.logical_not());
    mask_rows(logits, stop, continues);
  }
}

// Picks each active row's next token from its scores [n, V]: returns the tokens [n] (on the
// scores' device) and their log-probabilities [n]. rows: each active row's global row
// (sentence * group + k); step: the output position.
using Draw = std::function<std::pair<torch::Tensor, torch::Tensor>(
    const torch::Tensor& scores, const std::vector<int64_t>& rows, int64_t step)>;

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
  std::vector<std::vector<int>> tokens(N);
  std::vector<double> log_probs(N, 0.0);
  std::vector<char> ended_rows(N, 0);
  std::vector<std::vector<Hypothesis>> out(B, std::vector<Hypothesis>(group));
  std::vector<int64_t> rows(N);  // global row of each active row
  std::iota(rows.begin(), rows.end(), 0);
  const bool avoiding = any_avoid(terms);
  const auto continues = avoiding ? continues_mask(terms, device) : torch::Tensor();
  auto input = torch::full({N}, kBosId, torch::dtype(torch::kLong).device(device));
  for (int64_t step = 0; !rows.empty(); ++step) {
    const auto n = static_cast<int64_t>(rows.size());
    auto logits = scorer.step(input, *state);
    if (avoiding)
      apply_terms(
          logits, continues, [&](int64_t r) -> const std::vector<int>& { return tokens[rows[r]]; },
          [&](int64_t r) { return &terms[static_cast<size_t>(rows[r] / group)]; },
          [](int64_t) { return false; });
    const auto [next, values] = draw(logits, rows, step);
    const auto [values_h, next_h] = to_host(values, next);
    const auto value_a = values_h.accessor<float, 1>();
    const auto next_a = next_h.accessor<int64_t, 1>();
    for (int64_t r = 0; r < n; ++r) {
      const int64_t g = rows[r], s = g / group;
      if (ended_rows[g]) continue;
      const int64_t tok = next_a[r];
      log_probs[g] += value_a[r];
      const bool ended = tok == kEosId;
      if (!ended) tokens[g].push_back(static_cast<int>(tok));
      if (ended || static_cast<int64_t>(tokens[g].size()) >= limits[s]) {
        out[s][g % group] = finish(std::move(tokens[g]), log_probs[g], ended, options.length_penalty);
        ended_rows[g] = 1;
      }
    }
    // Whole groups stay while one of their rows is live.
    std::vector<int64_t> keep;
    for (int64_t r0 = 0; r0 < n; r0 += group) {
      bool live = false;
      for (int64_t k = 0; k < group; ++k) live = live || !ended_rows[rows[r0 + k]];
      if (live)
        for (int64_t k = 0; k < group; ++k) keep.push_back(r0 + k);
    }
    if (static_cast<int64_t>(keep.size()) == n) {
      input = next;
      continue;
    }
    if (keep.empty()) break;
    // Finished sentences leave the batch.
    const auto index = long_tensor(keep, device);
    state->select(index);
    input = next.index_select(0, index);
    std::vector<int64_t> kept_rows;
    for (const int64_t r : keep) kept_rows.push_back(rows[r]);
    rows = std::move(kept_rows);
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
  check_sampling_options(options.sampling);
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

namespace {

struct Candidate {
  int64_t row, token;
  float score;
};

// One sentence's step of beam search from its `width` best candidates (best first): EOS among
// the K best ends a hypothesis into `finished`; the K best others are returned as the next
// beams, or nothing when the sentence is done (no live candidate, no better one possible, or the
// length limit, where the live ones are finished as they are).
std::vector<Candidate> next_beams(at::TensorAccessor<float, 1> top_s,
                                  at::TensorAccessor<int64_t, 1> top_i, int64_t b, int64_t K,
                                  int64_t V, const std::vector<std::vector<int>>& prefixes,
                                  std::vector<Hypothesis>& finished, int64_t length, int64_t limit,
                                  double alpha) {
  std::vector<Candidate> live;
  for (int64_t c = 0; c < top_s.size(0); ++c) {
    const float value = top_s[c];
    if (!std::isfinite(value)) break;  // sorted: only dead beams follow
    const int64_t row = b * K + top_i[c] / V, token = top_i[c] % V;
    if (token == kEosId) {
      // Only EOS among the K best candidates ends a hypothesis (as fairseq does).
      if (c < K) finished.push_back(finish(prefixes[row], value, true, alpha));
    } else if (static_cast<int64_t>(live.size()) < K) {
      live.push_back({row, token, value});
    }
  }
  if (live.empty() || (static_cast<int64_t>(finished.size()) >= K &&
                       !can_improve(finished, K, live.front().score, length, alpha)))
    return {};
  if (length >= limit) {
    for (const auto& cand : live) {
      auto tokens = prefixes[cand.row];
      tokens.push_back(static_cast<int>(cand.token));
      finished.push_back(finish(std::move(tokens), cand.score, false, alpha));
    }
    return {};
  }
  return live;
}

// What constrained sentences add to a step's candidates, per active row of theirs: the row's
// best token and the tokens that advance its phrases, scored (beam score + log-probability) on
// the device in one gather and copied to the host at once. rows: active rows; tokens: each one's
// constraint tokens. Returns the candidates of rows[i] at [i].
std::vector<std::vector<Candidate>> constraint_candidates(
    const torch::Tensor& logits, const torch::Tensor& scores, const std::vector<int64_t>& rows,
    const std::vector<std::vector<int64_t>>& tokens) {
  const torch::Device device = logits.device();
  const auto m = static_cast<int64_t>(rows.size());
  const auto index = long_tensor(rows, device);
  const auto sub = logits.index_select(0, index).to(torch::kFloat);
  const auto sub_scores = scores.index_select(0, index).to(torch::kFloat);
  const auto [best_values, best_ids] = top_candidates(sub, sub_scores, 1, 1);
  std::vector<int64_t> pair_rows, pair_tokens;
  for (int64_t i = 0; i < m; ++i)
    for (const int64_t t : tokens[static_cast<size_t>(i)]) {
      pair_rows.push_back(i);
      pair_tokens.push_back(t);
    }
  auto values = best_values.view({m});
  if (!pair_rows.empty()) {
    const auto pr = long_tensor(pair_rows, device), pt = long_tensor(pair_tokens, device);
    const auto lse = torch::logsumexp(sub, 1);
    values = torch::cat({values, sub.index({pr, pt}) - lse.index_select(0, pr) +
                                     sub_scores.index_select(0, pr)});
  }
  const auto host = torch::cat({values.to(torch::kDouble), best_ids.view({m}).to(torch::kDouble)})
                        .to(torch::kCPU);
  const auto h = host.accessor<double, 1>();
  const auto P = static_cast<int64_t>(pair_rows.size());
  std::vector<std::vector<Candidate>> out(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i)
    out[static_cast<size_t>(i)].push_back(
        {rows[static_cast<size_t>(i)], static_cast<int64_t>(h[m + P + i]),
         static_cast<float>(h[i])});
  for (int64_t p = 0; p < P; ++p) {
    const auto i = static_cast<size_t>(pair_rows[static_cast<size_t>(p)]);
    out[i].push_back({rows[i], pair_tokens[static_cast<size_t>(p)], static_cast<float>(h[m + p])});
  }
  return out;
}

// A constrained sentence's candidates with the states they lead to. EOS is a candidate only
// from a hypothesis that has met every phrase.
struct ConstrainedCandidates {
  std::vector<Candidate> list;
  std::vector<ConstraintState> after;
  void add(const Candidate& c, const std::vector<ConstraintState>& states,
           const std::vector<std::vector<int64_t>>& phrases, int64_t total) {
    if (!std::isfinite(c.score)) return;
    for (const auto& d : list)
      if (d.row == c.row && d.token == c.token) return;
    const auto& s = states[static_cast<size_t>(c.row)];
    if (c.token == kEosId) {
      if (s.done != total) return;
      after.push_back(s);
    } else {
      after.push_back(advance(s, phrases, c.token));
    }
    list.push_back(c);
  }
};

// Where a step leaves one sentence's hypotheses.
struct BeamStep {
  const std::vector<std::vector<int>>& prefixes;     // per active row
  const std::vector<ConstraintState>& states;        // per active row
  std::vector<Hypothesis>& finished;                 // the sentence's
  int64_t K, length, limit;
  double alpha;
};

// next_beams for a sentence with phrases to include: the candidates (the `width` best, and each
// beam's `extra` ones) ranked by allocation_order; EOS among the first K ends a complete
// hypothesis, and the first K others are the next beams, their states in `next_states`.
std::vector<Candidate> next_constrained_beams(at::TensorAccessor<float, 1> top_s,
                                              at::TensorAccessor<int64_t, 1> top_i, int64_t b,
                                              int64_t V, const std::vector<Candidate>& extra,
                                              const std::vector<std::vector<int64_t>>& phrases,
                                              const BeamStep& step,
                                              std::vector<ConstraintState>& next_states) {
  const int64_t K = step.K, total = total_pieces(phrases);
  ConstrainedCandidates cands;
  for (int64_t c = 0; c < top_s.size(0); ++c)
    cands.add({b * K + top_i[c] / V, top_i[c] % V, top_s[c]}, step.states, phrases, total);
  for (const auto& c : extra) cands.add(c, step.states, phrases, total);
  std::vector<BankCandidate> banks;
  for (size_t i = 0; i < cands.list.size(); ++i)
    banks.push_back({cands.list[i].score, cands.after[i].done});
  std::vector<Candidate> live;
  std::vector<ConstraintState> live_states;
  int64_t position = 0;
  for (const size_t i : allocation_order(banks)) {
    const auto& c = cands.list[i];
    if (c.token == kEosId) {
      if (position++ < K)
        step.finished.push_back(finish(step.prefixes[c.row], c.score, true, step.alpha));
    } else if (static_cast<int64_t>(live.size()) < K) {
      ++position;
      live.push_back(c);
      live_states.push_back(cands.after[i]);
    }
  }
  float best = -std::numeric_limits<float>::infinity();
  for (const auto& c : live) best = std::max(best, c.score);
  if (live.empty() || (static_cast<int64_t>(step.finished.size()) >= K &&
                       !can_improve(step.finished, K, best, step.length, step.alpha)))
    return {};
  if (step.length >= step.limit) {
    for (size_t i = 0; i < live.size(); ++i) {
      auto tokens = step.prefixes[live[i].row];
      tokens.push_back(static_cast<int>(live[i].token));
      step.finished.push_back(finish(std::move(tokens), live[i].score, false, step.alpha));
      step.finished.back().unmet = total - live_states[i].done;
    }
    return {};
  }
  next_states.insert(next_states.end(), live_states.begin(), live_states.end());
  return live;
}

// Each active row's constraint candidates, for the rows of sentences with phrases to include
// (empty lists for the others).
std::vector<std::vector<Candidate>> step_constraint_candidates(
    const torch::Tensor& logits, const torch::Tensor& scores,
    const std::vector<int64_t>& sentences, int64_t K, const std::vector<SentenceTerms>& terms,
    const std::vector<ConstraintState>& states) {
  const auto n = static_cast<int64_t>(sentences.size());
  std::vector<std::vector<Candidate>> per_row(static_cast<size_t>(n * K));
  std::vector<int64_t> rows;
  std::vector<std::vector<int64_t>> tokens;
  for (int64_t b = 0; b < n; ++b) {
    const auto& phrases = terms[static_cast<size_t>(sentences[b])].include;
    if (phrases.empty()) continue;
    for (int64_t r = b * K; r < (b + 1) * K; ++r) {
      rows.push_back(r);
      tokens.push_back(constraint_tokens(states[static_cast<size_t>(r)], phrases));
    }
  }
  if (rows.empty()) return per_row;
  auto found = constraint_candidates(logits, scores, rows, tokens);
  for (size_t i = 0; i < rows.size(); ++i) per_row[static_cast<size_t>(rows[i])] = std::move(found[i]);
  return per_row;
}

// The live hypotheses of a batch between two steps: the active sentences (sentence b of them
// owns rows [b*K, (b+1)*K)) and each row's prefix and constraint state (states: only when some
// sentence has constraints), with what the step chose for each row.
struct LiveBeams {
  std::vector<int64_t> sentences;
  std::vector<std::vector<int>> prefixes;
  std::vector<ConstraintState> states;
  std::vector<int64_t> rows, tokens;  // the row each new beam extends, and its token
  std::vector<float> scores;
  bool left = false;  // a sentence finished and left the batch

  // Appends sentence s's next beams (padded to K with dead copies when a vocabulary smaller
  // than the beam left it short), extending `before`'s rows.
  void add(int64_t s, std::vector<Candidate> live, std::vector<ConstraintState> live_states,
           const LiveBeams& before, int64_t K) {
    while (static_cast<int64_t>(live.size()) < K) {
      live.push_back(
          {live.front().row, live.front().token, -std::numeric_limits<float>::infinity()});
      if (!live_states.empty()) live_states.push_back(ConstraintState(live_states.front()));
    }
    sentences.push_back(s);
    for (const auto& cand : live) {
      rows.push_back(cand.row);
      tokens.push_back(cand.token);
      scores.push_back(cand.score);
      prefixes.push_back(before.prefixes[static_cast<size_t>(cand.row)]);
      prefixes.back().push_back(static_cast<int>(cand.token));
    }
    states.insert(states.end(), live_states.begin(), live_states.end());
  }
};

// What one step of beam search saw: each sentence's best candidates on the host, and the
// constrained rows' own candidates.
struct StepCandidates {
  at::TensorAccessor<float, 2> top_s;
  at::TensorAccessor<int64_t, 2> top_i;
  const std::vector<std::vector<Candidate>>& extra;  // per row (empty unless constrained)
  int64_t V;
};

// The beams after one step, sentence by sentence; finished hypotheses go to `finished`.
LiveBeams next_live_beams(const LiveBeams& beams, const StepCandidates& c,
                          const std::vector<SentenceTerms>& terms, bool constrained,
                          const std::vector<int64_t>& limits, int64_t K, int64_t length,
                          double alpha, std::vector<std::vector<Hypothesis>>& finished) {
  LiveBeams next;
  for (int64_t b = 0; b < static_cast<int64_t>(beams.sentences.size()); ++b) {
    const int64_t s = beams.sentences[static_cast<size_t>(b)];
    const auto* phrases = constrained ? &terms[static_cast<size_t>(s)].include : nullptr;
    std::vector<Candidate> live;
    std::vector<ConstraintState> live_states;
    if (phrases != nullptr && !phrases->empty()) {
      std::vector<Candidate> mine;
      for (int64_t r = b * K; r < (b + 1) * K; ++r)
        mine.insert(mine.end(), c.extra[r].begin(), c.extra[r].end());
      const BeamStep step{beams.prefixes, beams.states, finished[s], K, length, limits[s], alpha};
      live = next_constrained_beams(c.top_s[b], c.top_i[b], b, c.V, mine, *phrases, step,
                                    live_states);
    } else {
      live = next_beams(c.top_s[b], c.top_i[b], b, K, c.V, beams.prefixes, finished[s], length,
                        limits[s], alpha);
      if (constrained)
        for (const auto& cand : live) live_states.push_back(beams.states[cand.row]);
    }
    if (live.empty())
      next.left = true;
    else
      next.add(s, std::move(live), std::move(live_states), beams, K);
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
  const bool constrained = any_include(terms);
  const auto continues =
      avoiding || constrained ? continues_mask(terms, device) : torch::Tensor();
  if (constrained)
    for (int64_t r = 0; r < B * K; ++r)
      beams.states.push_back(start_constraints(terms[static_cast<size_t>(r / K)].include));
  // Only the first beam is live at the start, so the K beams do not repeat one hypothesis.
  auto scores = torch::full({B * K}, -std::numeric_limits<float>::infinity(),
                            torch::dtype(torch::kFloat).device(device));
  scores.view({B, K}).select(1, 0).zero_();
  auto input = torch::full({B * K}, kBosId, torch::dtype(torch::kLong).device(device));
  std::vector<std::vector<Hypothesis>> finished(B);
  int64_t length = 0;  // output tokens per live hypothesis after this step

  while (!beams.sentences.empty()) {
    auto logits = scorer.step(input, *state);
    if (avoiding || constrained)
      apply_terms(
          logits, continues,
          [&](int64_t r) -> const std::vector<int>& { return beams.prefixes[r]; },
          [&](int64_t r) { return &terms[static_cast<size_t>(beams.sentences[r / K])]; },
          [&](int64_t r) { return constrained && beams.states[static_cast<size_t>(r)].just_met; });
    const int64_t V = logits.size(1);
    const auto [top_scores, top_ids] =
        top_candidates(logits, scores, K, std::min<int64_t>(2 * K, K * V));
    const auto extra = constrained ? step_constraint_candidates(logits, scores, beams.sentences,
                                                                K, terms, beams.states)
                                   : std::vector<std::vector<Candidate>>{};
    const auto [top_scores_h, top_ids_h] = to_host(top_scores, top_ids);
    const StepCandidates candidates{top_scores_h.accessor<float, 2>(),
                                    top_ids_h.accessor<int64_t, 2>(), extra, V};
    ++length;
    LiveBeams next = next_live_beams(beams, candidates, terms, constrained, limits, K, length,
                                     options.length_penalty, finished);
    if (next.sentences.empty()) break;
    const auto index = long_tensor(next.rows, device);
    // Rows only move inside their sentence's block unless a sentence left.
    if (next.left)
      state->select(index);
    else
      state->reorder(index);
    input = long_tensor(next.tokens, device);
    scores = torch::tensor(next.scores).to(device);
    beams = std::move(next);
  }
  rank_finished(finished, options.nbest);
  return finished;
}

}  // namespace nmt
