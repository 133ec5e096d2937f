// Word alignments from cross-attention (`translate --alignment`): the pure steps from a piece
// matrix to words, unit-tested by hand. Words are the whitespace-separated tokens of the source
// line and of the detokenized hypothesis; a piece that starts with U+2581 starts a word.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace nmt {

enum class AlignmentMode { kNone, kHard, kSoft };

// "hard" or "soft"; throws Error naming the flag otherwise.
AlignmentMode parse_alignment_mode(const std::string& text);

// The word of each piece: a piece that starts with U+2581 opens the next word (the first piece
// opens word 0 whatever it starts with), clamped to words - 1 where SentencePiece's
// normalisation split a token the text keeps whole.
std::vector<int64_t> piece_words(const std::vector<std::string>& pieces, int64_t words);

// The whitespace-separated tokens of a line.
std::vector<std::string> words_of(const std::string& line);

// Word-level alignment [target words][source words] from piece attention [target pieces][source
// pieces]: a word pair's weight sums its pieces' weights, and each row is normalised to sum 1
// over the source words (the caller leaves the EOS and tag columns out).
// A target word without pieces gets a zero row.
std::vector<std::vector<float>> word_alignment(const std::vector<std::vector<float>>& attention,
                                               const std::vector<int64_t>& target_word,
                                               int64_t target_words,
                                               const std::vector<int64_t>& source_word,
                                               int64_t source_words);

// Each target word aligned to its source word of highest weight (the first among equals), as
// (source, target) pairs in target order; nothing when there is no source word.
std::vector<std::pair<int64_t, int64_t>> hard_alignment(
    const std::vector<std::vector<float>>& words);

// "0-0 1-2 ...": source-target pairs, as Marian and fast_align write them.
std::string format_alignment(const std::vector<std::pair<int64_t, int64_t>>& pairs);

}  // namespace nmt
