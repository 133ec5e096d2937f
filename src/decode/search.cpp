#include "decode/search.h"

#include <algorithm>
#include <cmath>
#include <numeric>

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

namespace {

// Per-sentence output limits. BOS takes one position, so outputs stop at max_positions - 1.
std::vector<int64_t> output_limits(Seq2Seq& model, const torch::Tensor& src,
                                   const SearchOptions& options) {
  // Source length without its EOS, as the a * len + b limit is usually stated.
  const auto src_lens = (src.ne(kPadId).sum(1) - 1).to(torch::kCPU).contiguous();
  const auto* lens = src_lens.data_ptr<int64_t>();
  std::vector<int64_t> limits(static_cast<size_t>(src.size(0)));
  for (size_t i = 0; i < limits.size(); ++i)
    limits[i] = max_output_length(lens[i], options, model->max_positions() - 1);
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

// Log-probabilities [N, V] in float32 of the rows' next tokens.
torch::Tensor next_log_probs(Seq2Seq& model, const torch::Tensor& input, DecoderState& state) {
  return torch::log_softmax(model->project(model->decode_step(input, state)).to(torch::kFloat), -1);
}

}  // namespace

std::vector<std::vector<Hypothesis>> search(Seq2Seq& model, const torch::Tensor& src,
                                            const SearchOptions& options) {
  if (options.beam_size < 1) throw Error("beam size must be >= 1");
  if (options.nbest < 1 || options.nbest > options.beam_size)
    throw Error("nbest must be between 1 and the beam size " + std::to_string(options.beam_size));
  return options.beam_size == 1 ? greedy_search(model, src, options)
                                : beam_search(model, src, options);
}

std::vector<std::vector<Hypothesis>> greedy_search(Seq2Seq& model, const torch::Tensor& src,
                                                   const SearchOptions& options) {
  torch::InferenceMode guard;
  const int64_t B = src.size(0);
  const auto limits = output_limits(model, src, options);
  const torch::Device device = model->device();
  auto state = model->start_decoding(model->encode(src.to(device)));
  std::vector<std::vector<int>> tokens(B);
  std::vector<double> log_probs(B, 0.0);
  std::vector<std::vector<Hypothesis>> out(B);
  std::vector<int64_t> rows(B);  // sentence of each active row
  std::iota(rows.begin(), rows.end(), 0);
  auto input = torch::full({B}, kBosId, torch::dtype(torch::kLong).device(device));
  while (!rows.empty()) {
    const auto [best, next] = next_log_probs(model, input, *state).max(-1);
    const auto [best_h, next_h] = to_host(best, next);
    const auto best_a = best_h.accessor<float, 1>();
    const auto next_a = next_h.accessor<int64_t, 1>();
    std::vector<int64_t> keep;
    for (size_t r = 0; r < rows.size(); ++r) {
      const int64_t s = rows[r];
      const int64_t tok = next_a[static_cast<int64_t>(r)];
      log_probs[s] += best_a[static_cast<int64_t>(r)];
      const bool ended = tok == kEosId;
      if (!ended) tokens[s].push_back(static_cast<int>(tok));
      if (ended || static_cast<int64_t>(tokens[s].size()) >= limits[s]) {
        out[s].push_back(finish(std::move(tokens[s]), log_probs[s], ended, options.length_penalty));
      } else {
        keep.push_back(static_cast<int64_t>(r));
      }
    }
    if (keep.size() == rows.size()) {
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

std::vector<std::vector<Hypothesis>> beam_search(Seq2Seq& model, const torch::Tensor& src,
                                                 const SearchOptions& options) {
  torch::InferenceMode guard;
  const int64_t B = src.size(0), K = options.beam_size;
  const double alpha = options.length_penalty;
  const auto limits = output_limits(model, src, options);
  const torch::Device device = model->device();
  // Source-side caches are computed and stored once per sentence; its K beams share them.
  auto state = model->start_decoding(model->encode(src.to(device)), K);

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

  struct Candidate {
    int64_t row, token;
    float score;
  };
  while (!sentences.empty()) {
    const auto n = static_cast<int64_t>(sentences.size());
    const auto logp = next_log_probs(model, input, *state);
    const int64_t V = logp.size(1);
    const auto totals = (logp.view({n, K, V}) + scores.unsqueeze(2)).view({n, K * V});
    const int64_t width = std::min<int64_t>(2 * K, K * V);
    const auto [top_scores, top_ids] = totals.topk(width, 1);
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
      std::vector<Candidate> live;
      for (int64_t c = 0; c < width; ++c) {
        const float value = top_s[b][c];
        if (!std::isfinite(value)) break;  // sorted: only dead beams follow
        const int64_t row = b * K + top_i[b][c] / V, token = top_i[b][c] % V;
        if (token == kEosId) {
          // Only EOS among the K best candidates ends a hypothesis (as fairseq does).
          if (c < K) finished[s].push_back(finish(prefixes[row], value, true, alpha));
        } else if (static_cast<int64_t>(live.size()) < K) {
          live.push_back({row, token, value});
        }
      }
      bool done = live.empty() || (static_cast<int64_t>(finished[s].size()) >= K &&
                                   !can_improve(finished[s], K, live.front().score, length, alpha));
      if (!done && length >= limits[s]) {
        for (const auto& cand : live) {
          auto tokens = prefixes[cand.row];
          tokens.push_back(static_cast<int>(cand.token));
          finished[s].push_back(finish(std::move(tokens), cand.score, false, alpha));
        }
        done = true;
      }
      if (done) {
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
    scores = torch::tensor(next_scores).to(device).view({static_cast<int64_t>(sentences.size()), K});
  }

  for (auto& hyps : finished) {
    std::stable_sort(hyps.begin(), hyps.end(),
                     [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
    if (static_cast<int64_t>(hyps.size()) > options.nbest) hyps.resize(options.nbest);
  }
  return finished;
}

}  // namespace nmt
