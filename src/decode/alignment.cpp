#include "decode/alignment.h"

#include <algorithm>
#include <sstream>

#include "util/util.h"

namespace nmt {

AlignmentMode parse_alignment_mode(const std::string& text) {
  if (text == "hard") return AlignmentMode::kHard;
  if (text == "soft") return AlignmentMode::kSoft;
  throw Error("--alignment: expected hard or soft, got '" + text + "'");
}

std::vector<int64_t> piece_words(const std::vector<std::string>& pieces, int64_t words) {
  static const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's word start
  std::vector<int64_t> out;
  int64_t word = -1;
  for (const auto& p : pieces) {
    if (word < 0 || p.compare(0, kSpace.size(), kSpace) == 0) ++word;
    out.push_back(std::clamp<int64_t>(word, 0, std::max<int64_t>(words - 1, 0)));
  }
  return out;
}

std::vector<std::string> words_of(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(std::move(w));
  return words;
}

std::vector<std::vector<float>> word_alignment(const std::vector<std::vector<float>>& attention,
                                               const std::vector<int64_t>& target_word,
                                               int64_t target_words,
                                               const std::vector<int64_t>& source_word,
                                               int64_t source_words) {
  if (attention.size() != target_word.size())
    throw Error("word_alignment: one target word per attention row expected");
  const auto T = static_cast<size_t>(target_words), S = static_cast<size_t>(source_words);
  std::vector<std::vector<float>> out(T, std::vector<float>(S, 0.0f));
  for (size_t t = 0; t < attention.size(); ++t) {
    if (attention[t].size() != source_word.size())
      throw Error("word_alignment: one source word per attention column expected");
    const auto w = static_cast<size_t>(target_word[t]);
    for (size_t s = 0; s < source_word.size(); ++s)
      out[w][static_cast<size_t>(source_word[s])] += attention[t][s];
  }
  for (size_t w = 0; w < T; ++w) {
    float sum = 0.0f;
    for (const float v : out[w]) sum += v;
    if (sum > 0.0f)
      for (float& v : out[w]) v /= sum;
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> hard_alignment(
    const std::vector<std::vector<float>>& words) {
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (size_t t = 0; t < words.size(); ++t) {
    const auto& row = words[t];
    if (row.empty()) continue;
    const auto best = std::max_element(row.begin(), row.end()) - row.begin();
    pairs.emplace_back(static_cast<int64_t>(best), static_cast<int64_t>(t));
  }
  return pairs;
}

std::string format_alignment(const std::vector<std::pair<int64_t, int64_t>>& pairs) {
  std::string out;
  for (const auto& [s, t] : pairs) {
    if (!out.empty()) out += ' ';
    out += std::to_string(s) + "-" + std::to_string(t);
  }
  return out;
}

}  // namespace nmt
