#include "decode/constrained.h"

#include <cmath>

#include "decode/top_candidates.h"
#include "text/spm.h"

namespace nmt {

namespace {

// Per row, the candidates of `rows` (active rows): the row's best token and the tokens that
// advance its phrases (`tokens`, one list per row), scored on the device in one gather and
// copied to the host at once. Returns the candidates of rows[i] at [i].
std::vector<std::vector<Candidate>> row_candidates(
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
    values = torch::cat(
        {values, sub.index({pr, pt}) - lse.index_select(0, pr) + sub_scores.index_select(0, pr)});
  }
  const auto host = torch::cat({values.to(torch::kDouble), best_ids.view({m}).to(torch::kDouble)})
                        .to(torch::kCPU);
  const auto h = host.accessor<double, 1>();
  const auto P = static_cast<int64_t>(pair_rows.size());
  std::vector<std::vector<Candidate>> out(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i)
    out[static_cast<size_t>(i)].push_back({rows[static_cast<size_t>(i)],
                                           static_cast<int64_t>(h[m + P + i]),
                                           static_cast<float>(h[i])});
  for (int64_t p = 0; p < P; ++p) {
    const auto i = static_cast<size_t>(pair_rows[static_cast<size_t>(p)]);
    out[i].push_back({rows[i], pair_tokens[static_cast<size_t>(p)], static_cast<float>(h[m + p])});
  }
  return out;
}

// Adds a candidate to a sentence's list with the state it leads to, unless it is dead, already
// there, or EOS from a hypothesis that has not met every phrase.
void add_candidate(SentenceCandidates& cands, const Candidate& c,
                   const std::vector<ConstraintState>& states,
                   const std::vector<std::vector<int64_t>>& phrases, int64_t total) {
  if (!std::isfinite(c.score)) return;
  for (const auto& d : cands.list)
    if (d.row == c.row && d.token == c.token) return;
  const auto& s = states[static_cast<size_t>(c.row)];
  if (c.token == kEosId) {
    if (s.done != total) return;
    cands.after.push_back(s);
  } else {
    cands.after.push_back(advance(s, phrases, c.token));
  }
  cands.bank.push_back(cands.after.back().done);
  cands.list.push_back(c);
}

}  // namespace

ConstrainedBeams::ConstrainedBeams(const std::vector<SentenceTerms>& terms, int64_t K)
    : terms_(terms), K_(K) {
  const auto rows = static_cast<int64_t>(terms.size()) * K;
  for (int64_t r = 0; r < rows; ++r)
    states_.push_back(start_constraints(terms[static_cast<size_t>(r / K)].constraints));
}

void ConstrainedBeams::gather(const torch::Tensor& logits, const torch::Tensor& scores,
                              const std::vector<int64_t>& sentences) {
  const auto n = static_cast<int64_t>(sentences.size());
  own_.assign(static_cast<size_t>(n * K_), {});
  std::vector<int64_t> rows;
  std::vector<std::vector<int64_t>> tokens;
  for (int64_t b = 0; b < n; ++b) {
    const auto& phrases = terms_[static_cast<size_t>(sentences[b])].constraints;
    if (phrases.empty()) continue;
    for (int64_t r = b * K_; r < (b + 1) * K_; ++r) {
      rows.push_back(r);
      tokens.push_back(constraint_tokens(states_[static_cast<size_t>(r)], phrases));
    }
  }
  if (rows.empty()) return;
  auto found = row_candidates(logits, scores, rows, tokens);
  for (size_t i = 0; i < rows.size(); ++i) own_[static_cast<size_t>(rows[i])] = std::move(found[i]);
}

SentenceCandidates ConstrainedBeams::candidates(at::TensorAccessor<float, 1> top_s,
                                                at::TensorAccessor<int64_t, 1> top_i, int64_t b,
                                                int64_t s, int64_t V) const {
  const auto& phrases = terms_[static_cast<size_t>(s)].constraints;
  const int64_t total = total_pieces(phrases);
  SentenceCandidates cands;
  for (int64_t c = 0; c < top_s.size(0); ++c)
    add_candidate(cands, {b * K_ + top_i[c] / V, top_i[c] % V, top_s[c]}, states_, phrases, total);
  for (int64_t r = b * K_; r < (b + 1) * K_; ++r)
    for (const auto& c : own_[static_cast<size_t>(r)])
      add_candidate(cands, c, states_, phrases, total);
  return cands;
}

int64_t ConstrainedBeams::total(int64_t s) const {
  return total_pieces(terms_[static_cast<size_t>(s)].constraints);
}

}  // namespace nmt
