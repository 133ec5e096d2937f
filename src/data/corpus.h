// Parallel corpus: read, validate, encode once, filter.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
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

// The filters every pair goes through, training data (nmt prepare) and validation and test sets
// alike, in this order: a side that is not valid UTF-8 or holds NUL, an empty side, a side over
// max_len pieces, a longer side over max_len_ratio x the shorter. (Duplicates, a training-data
// filter only, come after these: data/prepare.cpp.)
struct PairFilter {
  int64_t max_len = 0;       // pieces a side may have (0: any)
  double max_len_ratio = 0;  // longer side / shorter side, in pieces (0: off)
  bool truncate = false;     // a side over max_len is cut to it (and counted) instead of dropped

  // Whether a side may be encoded: valid UTF-8 without NUL.
  static bool valid_text(std::string_view text);
  // The length filters on an encoded pair: true when it stays (cut, with truncate); a drop or cut
  // is counted in `stats`.
  bool keep(std::vector<int>& x, std::vector<int>& y, CorpusStats& stats) const;
};

// Piece counts of each sequence (no BOS/EOS), as make_batches takes them.
std::vector<int64_t> sequence_lengths(const std::vector<std::vector<int>>& seqs);

// Encodes aligned lines in memory (validation and test sets) through PairFilter{max_len, 0,
// truncate}. Throws Error when the line counts differ.
Corpus encode_corpus(const std::vector<std::string>& src_lines,
                     const std::vector<std::string>& tgt_lines, const SentencePiece& src_vocab,
                     const SentencePiece& tgt_vocab, int64_t max_len, bool truncate,
                     CorpusStats* stats);

}  // namespace nmt
