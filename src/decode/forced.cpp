#include "decode/forced.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <ostream>

#include "data/tensors.h"
#include "decode/batches.h"
#include "decode/encode.h"
#include "util/line_reader.h"
#include "util/util.h"

namespace nmt {

std::vector<double> forced_log_probs(Scorer& scorer, const std::vector<std::vector<int64_t>>& src,
                                     const std::vector<std::vector<int64_t>>& tgt,
                                     Precision precision) {
  torch::InferenceMode guard;
  const AutocastGuard autocast(scorer.device(), precision);
  std::vector<std::vector<int64_t>> tgt_in, tgt_out;
  for (const auto& t : tgt) {
    tgt_in.push_back({kBosId});
    tgt_in.back().insert(tgt_in.back().end(), t.begin(), t.end());
    tgt_out.push_back(t);
    tgt_out.back().push_back(kEosId);
  }
  const torch::Device device = scorer.device();
  const auto gold = pad_sequences(tgt_out, kPadId).to(device);
  const auto scores = scorer.forward(pad_sequences(src, kPadId).to(device),
                                     pad_sequences(tgt_in, kPadId).to(device));
  const auto logp = torch::log_softmax(scores.to(torch::kFloat), -1)
                        .gather(2, gold.unsqueeze(2))
                        .squeeze(2)
                        .masked_fill(gold.eq(kPadId), 0.0f);
  const auto sums = logp.to(torch::kDouble).sum(1).cpu().contiguous();
  const auto* p = sums.data_ptr<double>();
  return std::vector<double>(p, p + sums.size(0));
}

std::vector<double> forced_decode(Scorer& scorer, const std::vector<std::vector<int64_t>>& src,
                                  const std::vector<std::vector<int64_t>>& tgt,
                                  int64_t batch_tokens, Precision precision) {
  std::vector<size_t> order(src.size());
  std::iota(order.begin(), order.end(), 0);
  auto width = [&](size_t i) {
    return static_cast<int64_t>(std::max(src[i].size(), tgt[i].size() + 1));
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return width(a) < width(b); });
  std::vector<int64_t> widths;
  for (const size_t i : order) widths.push_back(width(i));
  std::vector<double> out(src.size(), 0.0);
  for (const auto& [start, end] : plan_batches(widths, std::max<int64_t>(1, batch_tokens))) {
    std::vector<std::vector<int64_t>> s, t;
    for (size_t k = start; k < end; ++k) {
      s.push_back(src[order[k]]);
      t.push_back(tgt[order[k]]);
    }
    const auto sums = forced_log_probs(scorer, s, t, precision);
    for (size_t k = start; k < end; ++k) out[order[k]] = sums[k - start];
  }
  return out;
}

std::vector<double> score_pairs(Scorer& scorer, const Vocabs& vocabs,
                                const std::vector<std::string>& src,
                                const std::vector<std::string>& tgt, const ScoreOptions& options,
                                ScoreStats* stats) {
  if (src.size() != tgt.size())
    throw Error("score_pairs: " + std::to_string(src.size()) + " sources and " +
                std::to_string(tgt.size()) + " targets");
  const int64_t max_len = scorer.max_positions() - 1;  // room for EOS or BOS
  LineFixes fixes;
  std::vector<std::vector<int64_t>> src_ids(src.size()), tgt_ids(tgt.size());
  for (size_t i = 0; i < src.size(); ++i) {
    src_ids[i] = encode_line(vocabs.src, src[i], max_len, fixes, options.tag_id);
    src_ids[i].push_back(kEosId);
    tgt_ids[i] = encode_line(vocabs.tgt, tgt[i], max_len, fixes);
  }
  auto out = forced_decode(scorer, src_ids, tgt_ids, options.batch_tokens, options.precision);
  if (options.normalize)
    for (size_t i = 0; i < out.size(); ++i) out[i] /= static_cast<double>(tgt_ids[i].size()) + 1.0;
  if (stats != nullptr) {
    stats->pairs += static_cast<int64_t>(src.size());
    stats->truncated += fixes.truncated;
    stats->replaced_bytes += fixes.replaced_bytes;
  }
  return out;
}

ScoreStats score_stream(Scorer& scorer, const Vocabs& vocabs, LineReader& src, LineReader& tgt,
                        std::ostream& out, const ScoreOptions& options) {
  if (options.chunk_lines < 1) throw Error("chunk_lines must be >= 1");
  ScoreStats stats;
  std::vector<std::string> s, t;
  std::string a, b;
  for (;;) {
    const bool more_src = src.next(a);
    const bool more_tgt = tgt.next(b);
    if (more_src != more_tgt) {
      const LineReader& shorter = more_src ? tgt : src;
      throw Error(shorter.path() + " ends after " + std::to_string(shorter.lines()) +
                  " lines, before " + (more_src ? src : tgt).path() + " does");
    }
    if (more_src) {
      s.push_back(std::move(a));
      t.push_back(std::move(b));
    }
    if (!s.empty() && (!more_src || static_cast<int64_t>(s.size()) >= options.chunk_lines)) {
      for (const double v : score_pairs(scorer, vocabs, s, t, options, &stats)) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.6f\n", v);
        out << buf;
      }
      out.flush();
      if (!out) throw Error("cannot write output");
      s.clear();
      t.clear();
    }
    if (!more_src) break;
  }
  return stats;
}

}  // namespace nmt
