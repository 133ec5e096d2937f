#include "decode/greedy.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "data/tensors.h"
#include "text/spm.h"
#include "util/util.h"

namespace nmt {

std::vector<std::vector<int>> greedy_decode(Transformer& model, const torch::Tensor& src,
                                            const DecodeLimits& limits) {
  torch::InferenceMode guard;
  const int64_t B = src.size(0);
  // Source length without its EOS, as the a * len + b limit is usually stated.
  const auto src_lens = src.ne(kPadId).sum(1) - 1;
  // Per-row limit, and never beyond the position table (BOS takes one position).
  const int64_t cap = model->config().max_positions - 1;
  std::vector<int64_t> max_len(B);
  int64_t longest = 0;
  for (int64_t i = 0; i < B; ++i) {
    const double l = limits.max_len_a * static_cast<double>(src_lens[i].item<int64_t>()) +
                     static_cast<double>(limits.max_len_b);
    max_len[i] = std::clamp<int64_t>(static_cast<int64_t>(std::floor(l)), 1, cap);
    longest = std::max(longest, max_len[i]);
  }
  const auto enc = model->encode(src);
  auto ys = torch::full({B, 1}, kBosId, torch::kLong);
  std::vector<std::vector<int>> out(B);
  std::vector<bool> finished(B, false);
  int64_t active = B;
  for (int64_t t = 0; t < longest && active > 0; ++t) {
    const auto hidden = model->decode(ys, enc);
    const auto next = model->project(hidden.select(1, -1)).argmax(-1);
    auto next_acc = next.accessor<int64_t, 1>();
    for (int64_t i = 0; i < B; ++i) {
      if (finished[i]) continue;
      const int64_t tok = next_acc[i];
      if (tok == kEosId) {
        finished[i] = true;
        --active;
        continue;
      }
      out[i].push_back(static_cast<int>(tok));
      if (static_cast<int64_t>(out[i].size()) >= max_len[i]) {
        finished[i] = true;
        --active;
      }
    }
    ys = torch::cat({ys, next.unsqueeze(1)}, 1);
  }
  return out;
}

std::vector<std::string> translate_lines(LoadedModel& m, const std::vector<std::string>& lines,
                                         int64_t batch_tokens, const DecodeLimits& limits,
                                         TranslateStats* stats) {
  TranslateStats s;
  s.lines = static_cast<int64_t>(lines.size());
  const int64_t max_src = m.config.model.max_positions - 1;  // room for EOS
  std::vector<std::vector<int64_t>> ids(lines.size());
  std::vector<size_t> todo;
  for (size_t i = 0; i < lines.size(); ++i) {
    int64_t replaced = 0;
    const std::string clean = sanitize_utf8(lines[i], &replaced);
    s.replaced_bytes += replaced;
    if (trim(clean).empty()) continue;
    auto pieces = m.vocabs.src.encode(clean);
    if (pieces.empty()) continue;
    if (static_cast<int64_t>(pieces.size()) > max_src) {
      pieces.resize(max_src);
      ++s.truncated;
    }
    ids[i].assign(pieces.begin(), pieces.end());
    ids[i].push_back(kEosId);
    todo.push_back(i);
  }
  std::stable_sort(todo.begin(), todo.end(),
                   [&](size_t a, size_t b) { return ids[a].size() < ids[b].size(); });

  std::vector<std::string> out(lines.size());
  size_t start = 0;
  while (start < todo.size()) {
    // Sorted ascending, so the last row sets the batch width.
    size_t end = start + 1;
    while (end < todo.size() &&
           static_cast<int64_t>((end - start + 1) * ids[todo[end]].size()) <= batch_tokens)
      ++end;
    std::vector<std::vector<int64_t>> rows;
    for (size_t k = start; k < end; ++k) rows.push_back(ids[todo[k]]);
    const auto hyps = greedy_decode(m.model, pad_sequences(rows, kPadId), limits);
    for (size_t k = start; k < end; ++k) {
      const auto& h = hyps[k - start];
      s.output_tokens += static_cast<int64_t>(h.size()) + 1;
      std::string text = m.vocabs.tgt.decode(h);
      // One output line per input line, whatever the vocabulary holds.
      std::replace_if(
          text.begin(), text.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
      out[todo[k]] = std::move(text);
    }
    start = end;
  }
  if (stats != nullptr) *stats = s;
  return out;
}

}  // namespace nmt
