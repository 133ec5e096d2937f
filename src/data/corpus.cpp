#include "data/corpus.h"

#include <algorithm>

#include "util/util.h"

namespace nmt {

std::vector<int64_t> sequence_lengths(const std::vector<std::vector<int>>& seqs) {
  std::vector<int64_t> out;
  out.reserve(seqs.size());
  for (const auto& s : seqs) out.push_back(static_cast<int64_t>(s.size()));
  return out;
}

bool PairFilter::valid_text(std::string_view text) {
  return is_valid_utf8(text) && text.find('\0') == std::string_view::npos;
}

bool PairFilter::keep(std::vector<int>& x, std::vector<int>& y, CorpusStats& s) const {
  const auto nx = static_cast<int64_t>(x.size()), ny = static_cast<int64_t>(y.size());
  if (nx == 0 || ny == 0) {
    ++s.empty;
    return false;
  }
  if (max_len > 0 && (nx > max_len || ny > max_len)) {
    ++s.too_long;
    if (!truncate) return false;
    x.resize(std::min(x.size(), static_cast<size_t>(max_len)));
    y.resize(std::min(y.size(), static_cast<size_t>(max_len)));
  }
  if (max_len_ratio > 0 && static_cast<double>(std::max(nx, ny)) >
                               max_len_ratio * static_cast<double>(std::min(nx, ny))) {
    ++s.ratio;
    return false;
  }
  return true;
}

Corpus encode_corpus(const std::vector<std::string>& src_lines,
                     const std::vector<std::string>& tgt_lines, const SentencePiece& src_vocab,
                     const SentencePiece& tgt_vocab, int64_t max_len, bool truncate,
                     CorpusStats* stats) {
  if (src_lines.size() != tgt_lines.size())
    throw Error("encode_corpus: " + std::to_string(src_lines.size()) + " source lines but " +
                std::to_string(tgt_lines.size()) + " target lines");
  const PairFilter filter{max_len, 0, truncate};
  CorpusStats s;
  Corpus corpus;
  s.total = static_cast<int64_t>(src_lines.size());
  for (size_t i = 0; i < src_lines.size(); ++i) {
    if (!PairFilter::valid_text(src_lines[i]) || !PairFilter::valid_text(tgt_lines[i])) {
      ++s.invalid_utf8;
      continue;
    }
    auto x = src_vocab.encode(src_lines[i]);
    auto y = tgt_vocab.encode(tgt_lines[i]);
    if (!filter.keep(x, y, s)) continue;
    corpus.src.push_back(std::move(x));
    corpus.tgt.push_back(std::move(y));
  }
  s.kept = static_cast<int64_t>(corpus.size());
  if (stats != nullptr) *stats = s;
  return corpus;
}

}  // namespace nmt
