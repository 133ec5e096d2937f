#include "decode/search_parts.h"

#include <algorithm>
#include <limits>

#include "text/spm.h"

namespace nmt {

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

torch::Tensor long_tensor(const std::vector<int64_t>& values, const torch::Device& device) {
  return torch::tensor(values, torch::kLong).to(device);
}

std::pair<torch::Tensor, torch::Tensor> to_host(const torch::Tensor& scores,
                                                const torch::Tensor& ids) {
  if (scores.device().is_cpu()) return {scores.to(torch::kFloat), ids};
  const auto both = torch::stack({scores.to(torch::kDouble), ids.to(torch::kDouble)}).cpu();
  return {both[0].to(torch::kFloat), both[1].to(torch::kLong)};
}

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

namespace {

// Sets to -inf, in place, the rows `rows` of logits where `mask` [V] is true.
void mask_rows(torch::Tensor& logits, const std::vector<int64_t>& rows, const torch::Tensor& mask) {
  if (rows.empty()) return;
  const auto index = long_tensor(rows, logits.device());
  auto sub = logits.index_select(0, index);
  sub.masked_fill_(mask.unsqueeze(0), -std::numeric_limits<float>::infinity());
  logits.index_copy_(0, index, sub);
}

}  // namespace

void apply_terms(torch::Tensor& logits, const torch::Tensor& continues,
                 const std::vector<RowTerms>& rows) {
  std::vector<int64_t> blocked_rows, tokens, go_on, stop;
  for (int64_t r = 0; r < static_cast<int64_t>(rows.size()); ++r) {
    const SentenceTerms* t = rows[static_cast<size_t>(r)].terms;
    if (t == nullptr || t->empty()) continue;
    const std::vector<int>& p = *rows[static_cast<size_t>(r)].prefix;
    for (const int64_t token : blocked_tokens(p, t->avoid)) {
      blocked_rows.push_back(r);
      tokens.push_back(token);
    }
    if (t->pieces != nullptr)
      for (const auto& text : t->avoid_text)
        if (ends_with_phrase(p, *t->pieces, text)) {
          go_on.push_back(r);
          break;
        }
    if (t->pieces != nullptr && rows[static_cast<size_t>(r)].just_met) stop.push_back(r);
  }
  if (!blocked_rows.empty())
    logits.index_put_(
        {long_tensor(blocked_rows, logits.device()), long_tensor(tokens, logits.device())},
        -std::numeric_limits<float>::infinity());
  if (continues.defined()) {
    mask_rows(logits, go_on, continues.logical_not());
    mask_rows(logits, stop, continues);
  }
}

torch::Tensor move_rows(ScorerState& state, const std::vector<int64_t>& keep, bool left,
                        const torch::Device& device) {
  const auto index = long_tensor(keep, device);
  // Rows only move inside their sentence's block unless a sentence left.
  if (left)
    state.select(index);
  else
    state.reorder(index);
  return index;
}

}  // namespace nmt
