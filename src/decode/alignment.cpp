#include "decode/alignment.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "util/util.h"

namespace nmt {

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
  std::vector<float> share(S, 0.0f);  // 1 / the source word's piece count
  for (const auto w : source_word) share[static_cast<size_t>(w)] += 1.0f;
  for (float& v : share)
    if (v > 0.0f) v = 1.0f / v;
  std::vector<std::vector<float>> out(T, std::vector<float>(S, 0.0f));
  for (size_t t = 0; t < attention.size(); ++t) {
    if (attention[t].size() != source_word.size())
      throw Error("word_alignment: one source word per attention column expected");
    const auto w = static_cast<size_t>(target_word[t]);
    for (size_t s = 0; s < source_word.size(); ++s) {
      const auto sw = static_cast<size_t>(source_word[s]);
      out[w][sw] += attention[t][s] * share[sw];
    }
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
  if (words.empty() || words[0].empty()) return pairs;
  std::vector<float> column(words[0].size(), 0.0f);
  for (const auto& row : words)
    for (size_t s = 0; s < row.size(); ++s) column[s] += row[s];
  for (size_t t = 0; t < words.size(); ++t) {
    const auto& row = words[t];
    size_t best = 0;
    float best_score = -1.0f;
    for (size_t s = 0; s < row.size(); ++s) {
      const float score = column[s] > 0.0f ? row[s] * row[s] / column[s] : 0.0f;
      if (score > best_score) best = s, best_score = score;
    }
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

std::string hard_alignment_text(const WordAlignment& a) {
  return format_alignment(hard_alignment(a.weights));
}

nlohmann::json soft_alignment_object(const WordAlignment& a) {
  // Four decimals: the weights of a soft alignment, not float noise.
  nlohmann::json matrix = nlohmann::json::array();
  for (const auto& row : a.weights) {
    matrix.push_back(nlohmann::json::array());
    for (const float v : row)
      matrix.back().push_back(std::round(static_cast<double>(v) * 1e4) / 1e4);
  }
  return {{"source", a.source}, {"target", a.target}, {"alignment", matrix}};
}

}  // namespace nmt
