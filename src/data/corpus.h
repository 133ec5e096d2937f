// Parallel corpus: read, validate, encode once, filter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/pairs.h"
#include "text/spm.h"

namespace nmt {

// Encoded pairs in memory (validation and test sets, tests).
struct Corpus : Pairs {
  std::vector<std::vector<int>> src;
  std::vector<std::vector<int>> tgt;
  int64_t size() const override { return static_cast<int64_t>(src.size()); }
  int64_t src_len(int64_t i) const override { return static_cast<int64_t>(src[i].size()); }
  int64_t tgt_len(int64_t i) const override { return static_cast<int64_t>(tgt[i].size()); }
  void append_src(int64_t i, std::vector<int64_t>& out) const override {
    out.insert(out.end(), src[i].begin(), src[i].end());
  }
  void append_tgt(int64_t i, std::vector<int64_t>& out) const override {
    out.insert(out.end(), tgt[i].begin(), tgt[i].end());
  }
};

struct CorpusStats {
  int64_t total = 0;         // pairs read
  int64_t kept = 0;          // pairs kept
  int64_t empty = 0;         // dropped: a side is empty (or whitespace only)
  int64_t too_long = 0;      // dropped (or truncated): a side has more than max_len pieces
  int64_t invalid_utf8 = 0;  // dropped: a side is not valid UTF-8
  int64_t ratio = 0;         // dropped: longer side / shorter side over data.max_len_ratio
  int64_t duplicate = 0;     // dropped: the same pair as an earlier one (data.dedup)

  // Adds another chunk's or corpus's counts.
  CorpusStats& operator+=(const CorpusStats& o) {
    total += o.total;
    kept += o.kept;
    empty += o.empty;
    too_long += o.too_long;
    invalid_utf8 += o.invalid_utf8;
    ratio += o.ratio;
    duplicate += o.duplicate;
    return *this;
  }
};

// Piece counts of each sequence (no BOS/EOS), as make_batches takes them.
std::vector<int64_t> sequence_lengths(const std::vector<std::vector<int>>& seqs);

// Encodes aligned lines in memory (validation and test sets): drops invalid UTF-8 and empty
// pairs; over-long pairs are cut to max_len with `truncate`, else dropped (counted in too_long
// either way). Throws Error when the line counts differ.
Corpus encode_corpus(const std::vector<std::string>& src_lines,
                     const std::vector<std::string>& tgt_lines, const SentencePiece& src_vocab,
                     const SentencePiece& tgt_vocab, int64_t max_len, bool truncate,
                     CorpusStats* stats);

}  // namespace nmt
