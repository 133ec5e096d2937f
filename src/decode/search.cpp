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
                                            const std::vector<int64_t>& lines) {
  if (options.beam_size < 1) throw Error("beam size must be >= 1");
  if (options.sampling.enabled) {
    if (options.beam_size != 1) throw Error("sampling draws one token a step: beam size 1");
    if (options.nbest < 1) throw Error("nbest (samples per line) must be >= 1");
    return sample_search(scorer, src, options, lines);
  }
  if (options.nbest < 1 || options.nbest > options.beam_size)
    throw Error("nbest must be between 1 and the beam size " + std::to_string(options.beam_size));
  return options.beam_size == 1 ? greedy_search(scorer, src, options)
                                : beam_search(scorer, src, options);
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
  auto input = torch::full({N}, kBosId, torch::dtype(torch::kLong).device(device));
  for (int64_t step = 0; !rows.empty(); ++step) {
    const auto n = static_cast<int64_t>(rows.size());
    const auto [next, values] = draw(scorer.step(input, *state), rows, step);
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
                                                   const SearchOptions& options) {
  const Draw argmax = [](const torch::Tensor& scores, const std::vector<int64_t>& rows, int64_t) {
    const auto n = static_cast<int64_t>(rows.size());
    const auto top = top_candidates(
        scores, torch::zeros({n}, torch::dtype(torch::kFloat).device(scores.device())), 1, 1);
    return std::make_pair(top.second.view({n}), top.first.view({n}));
  };
  return draw_search(scorer, src, options, 1, argmax);
}

std::vector<std::vector<Hypothesis>> sample_search(Scorer& scorer, const torch::Tensor& src,
                                                   const SearchOptions& options,
                                                   const std::vector<int64_t>& lines) {
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
  return draw_search(scorer, src, options, group, sample);
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

}  // namespace

std::vector<std::vector<Hypothesis>> beam_search(Scorer& scorer, const torch::Tensor& src,
                                                 const SearchOptions& options) {
  torch::InferenceMode guard;
  const int64_t B = src.size(0), K = options.beam_size;
  const double alpha = options.length_penalty;
  const auto limits = output_limits(scorer, src, options);
  const torch::Device device = scorer.device();
  // Source-side caches are computed and stored once per sentence; its K beams share them.
  auto state = scorer.start(src.to(device), K);

  std::vector<int64_t> sentences(B);  // active sentences; sentence i owns rows [i*K, (i+1)*K)
  std::iota(sentences.begin(), sentences.end(), 0);
  std::vector<std::vector<int>> prefixes(B * K);
  // Only the first beam is live at the start, so the K beams do not repeat one hypothesis.
  auto scores = torch::full({B, K}, -std::numeric_limits<float>::infinity(),
                            torch::dtype(torch::kFloat).device(device));
  scores.select(1, 0).zero_();
  auto input = torch::full({B * K}, kBosId, torch::dtype(torch::kLong).device(device));
  std::vector<std::vector<Hypothesis>> finished(B);
  int64_t length = 0;  // output tokens per live hypothesis after this step

  while (!sentences.empty()) {
    const auto n = static_cast<int64_t>(sentences.size());
    const auto logits = scorer.step(input, *state);
    const int64_t V = logits.size(1);
    const int64_t width = std::min<int64_t>(2 * K, K * V);
    const auto [top_scores, top_ids] = top_candidates(logits, scores.view({n * K}), K, width);
    const auto [top_scores_h, top_ids_h] = to_host(top_scores, top_ids);
    const auto top_s = top_scores_h.accessor<float, 2>();
    const auto top_i = top_ids_h.accessor<int64_t, 2>();
    ++length;

    std::vector<int64_t> next_sentences, next_rows, next_tokens;
    std::vector<float> next_scores;
    std::vector<std::vector<int>> next_prefixes;
    bool left = false;
    for (int64_t b = 0; b < n; ++b) {
      const int64_t s = sentences[b];
      auto live = next_beams(top_s[b], top_i[b], b, K, V, prefixes, finished[s], length,
                             limits[s], alpha);
      if (live.empty()) {
        left = true;
        continue;
      }
      // A vocabulary smaller than the beam can leave it short: pad with dead copies.
      while (static_cast<int64_t>(live.size()) < K)
        live.push_back(
            {live.front().row, live.front().token, -std::numeric_limits<float>::infinity()});
      next_sentences.push_back(s);
      for (const auto& cand : live) {
        next_rows.push_back(cand.row);
        next_tokens.push_back(cand.token);
        next_scores.push_back(cand.score);
        next_prefixes.push_back(prefixes[cand.row]);
        next_prefixes.back().push_back(static_cast<int>(cand.token));
      }
    }
    if (next_sentences.empty()) break;
    const auto index = long_tensor(next_rows, device);
    // Rows only move inside their sentence's block unless a sentence left.
    if (left)
      state->select(index);
    else
      state->reorder(index);
    sentences = std::move(next_sentences);
    prefixes = std::move(next_prefixes);
    input = long_tensor(next_tokens, device);
    scores =
        torch::tensor(next_scores).to(device).view({static_cast<int64_t>(sentences.size()), K});
  }

  for (auto& hyps : finished) {
    std::stable_sort(hyps.begin(), hyps.end(),
                     [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
    if (static_cast<int64_t>(hyps.size()) > options.nbest) hyps.resize(options.nbest);
  }
  return finished;
}

}  // namespace nmt
