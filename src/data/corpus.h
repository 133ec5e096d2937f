// Parallel corpus: read, validate, encode once, filter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "text/spm.h"

namespace nmt {

// Encoded pairs without BOS/EOS; the tensor layer adds them.
struct Corpus {
  std::vector<std::vector<int>> src;
  std::vector<std::vector<int>> tgt;
  size_t size() const { return src.size(); }
};

struct CorpusStats {
  int64_t total = 0;         // pairs read
  int64_t kept = 0;          // pairs kept
  int64_t empty = 0;         // dropped: a side is empty (or whitespace only)
  int64_t too_long = 0;      // dropped (or truncated): a side has more than max_len pieces
  int64_t invalid_utf8 = 0;  // dropped: a side is not valid UTF-8
};

// Piece counts of each sequence (no BOS/EOS), as make_batches takes them.
std::vector<int64_t> sequence_lengths(const std::vector<std::vector<int>>& seqs);

// Reads aligned files; drops invalid UTF-8, empty and over-long pairs (max_len <= 0: keep all
// non-empty valid pairs). Throws Error when the line counts differ.
Corpus load_corpus(const std::string& src_path, const std::string& tgt_path,
                   const SentencePiece& src_vocab, const SentencePiece& tgt_vocab, int64_t max_len,
                   CorpusStats* stats);

// As load_corpus, on lines in memory; with `truncate`, over-long pairs are cut to max_len
// instead of dropped (still counted in too_long).
Corpus encode_corpus(const std::vector<std::string>& src_lines,
                     const std::vector<std::string>& tgt_lines, const SentencePiece& src_vocab,
                     const SentencePiece& tgt_vocab, int64_t max_len, bool truncate,
                     CorpusStats* stats);

// The valid, non-empty lines of the given files, one a line (vocabulary training input); their
// number in *lines.
std::string clean_text(const std::vector<std::string>& inputs, int64_t* lines);

}  // namespace nmt
