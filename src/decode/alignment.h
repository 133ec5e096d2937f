// Word alignments from cross-attention (`translate --alignment`): the pure steps from a piece
// matrix to words, unit-tested by hand. Words are the whitespace-separated tokens of the source
// line and of the detokenized hypothesis; a piece that starts with U+2581 starts a word.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "config/config.h"  // AlignmentMode

namespace nmt {

// The word of each piece: a piece that starts with U+2581 opens the next word (the first piece
// opens word 0 whatever it starts with), clamped to words - 1 where SentencePiece's
// normalisation split a token the text keeps whole.
std::vector<int64_t> piece_words(const std::vector<std::string>& pieces, int64_t words);

// The whitespace-separated tokens of a line.
std::vector<std::string> words_of(const std::string& line);

// Word-level alignment [target words][source words] from piece attention [target pieces][source
// pieces]: a word pair's weight sums, over the target word's pieces, the mean weight of the
// source word's pieces (a word split into many pieces does not outweigh a one-piece word by its
// count), and each row is normalised to sum 1 over the source words (the caller leaves the EOS
// and tag columns out). A target word without pieces gets a zero row.
std::vector<std::vector<float>> word_alignment(const std::vector<std::vector<float>>& attention,
                                               const std::vector<int64_t>& target_word,
                                               int64_t target_words,
                                               const std::vector<int64_t>& source_word,
                                               int64_t source_words);

// Each target word aligned to one source word, as (source, target) pairs in target order;
// nothing when there is no source word. The link maximises p(s|t) * p(t|s) (the first among
// equals): the row weight times the weight normalised over the column, the two directions of
// one attention matrix. A source word that many target words attend (a final period, a noun
// with its article) then goes to the word that attends it most, not to each of them.
std::vector<std::pair<int64_t, int64_t>> hard_alignment(
    const std::vector<std::vector<float>>& words);

// The symmetrized links of two directions' hard alignments over S source and T target words,
// by grow-diag-final-and (Koehn et al. 2005, as Moses and fast_align's atools run it): the
// intersection, grown by neighbours (diagonals included) from the union that link a word not yet
// linked, then the union's links of two unlinked words (forward's first, then reverse's).
// Pairs are (source, target), sorted by target then source.
std::vector<std::pair<int64_t, int64_t>> grow_diag_final_and(
    const std::vector<std::pair<int64_t, int64_t>>& forward,
    const std::vector<std::pair<int64_t, int64_t>>& reverse, int64_t source_words,
    int64_t target_words);

// For each of `target_words` target words, the source word of its links with the largest
// weight (weights[t][s]; the first among equals), or -1 when it has no link: the one position a
// word's markup follows.
std::vector<int64_t> target_sources(const std::vector<std::pair<int64_t, int64_t>>& links,
                                    const std::vector<std::vector<float>>& weights,
                                    int64_t target_words);

// "0-0 1-2 ...": source-target pairs, as Marian and fast_align write them.
std::string format_alignment(const std::vector<std::pair<int64_t, int64_t>>& pairs);

// One hypothesis' word alignment: the words of the source line and of the hypothesis, the word
// matrix [target words][source words] (empty when either side has no words), and the hard
// links (source, target) in target order: hard_alignment(weights), or with a reverse model the
// two directions' links symmetrized.
struct WordAlignment {
  std::vector<std::string> source, target;
  std::vector<std::vector<float>> weights;
  std::vector<std::pair<int64_t, int64_t>> links;
};

// As --alignment writes it: "i-j ..." (the links, hard), or the JSON object {"source", "target",
// "alignment"} with weights to four decimals (soft), to which the caller adds the hypothesis.
std::string hard_alignment_text(const WordAlignment& a);
nlohmann::json soft_alignment_object(const WordAlignment& a);

}  // namespace nmt
