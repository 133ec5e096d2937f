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

Corpus encode_corpus(const std::vector<std::string>& src_lines,
                     const std::vector<std::string>& tgt_lines, const SentencePiece& src_vocab,
                     const SentencePiece& tgt_vocab, int64_t max_len, bool truncate,
                     CorpusStats* stats) {
  if (src_lines.size() != tgt_lines.size())
    throw Error("encode_corpus: " + std::to_string(src_lines.size()) + " source lines but " +
                std::to_string(tgt_lines.size()) + " target lines");
  CorpusStats s;
  Corpus corpus;
  s.total = static_cast<int64_t>(src_lines.size());
  for (size_t i = 0; i < src_lines.size(); ++i) {
    const auto& a = src_lines[i];
    const auto& b = tgt_lines[i];
    if (!is_valid_utf8(a) || !is_valid_utf8(b) || a.find('\0') != std::string::npos ||
        b.find('\0') != std::string::npos) {
      ++s.invalid_utf8;
      continue;
    }
    auto x = src_vocab.encode(a);
    auto y = tgt_vocab.encode(b);
    if (x.empty() || y.empty()) {
      ++s.empty;
      continue;
    }
    if (max_len > 0 &&
        (static_cast<int64_t>(x.size()) > max_len || static_cast<int64_t>(y.size()) > max_len)) {
      ++s.too_long;
      if (!truncate) continue;
      x.resize(std::min<size_t>(x.size(), static_cast<size_t>(max_len)));
      y.resize(std::min<size_t>(y.size(), static_cast<size_t>(max_len)));
    }
    corpus.src.push_back(std::move(x));
    corpus.tgt.push_back(std::move(y));
  }
  s.kept = static_cast<int64_t>(corpus.size());
  if (stats != nullptr) *stats = s;
  return corpus;
}

}  // namespace nmt
