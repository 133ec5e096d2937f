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

namespace {

// A grid of links over source x target words.
class LinkGrid {
 public:
  LinkGrid(int64_t source_words, int64_t target_words)
      : S_(source_words), T_(target_words), on_(static_cast<size_t>(S_ * T_), 0),
        source_linked_(static_cast<size_t>(S_), 0), target_linked_(static_cast<size_t>(T_), 0) {}
  bool inside(int64_t s, int64_t t) const { return s >= 0 && s < S_ && t >= 0 && t < T_; }
  bool has(int64_t s, int64_t t) const { return on_[index(s, t)] != 0; }
  void set(int64_t s, int64_t t) {
    if (has(s, t)) return;
    on_[index(s, t)] = 1;
    ++source_linked_[static_cast<size_t>(s)];
    ++target_linked_[static_cast<size_t>(t)];
  }
  bool source_linked(int64_t s) const { return source_linked_[static_cast<size_t>(s)] > 0; }
  bool target_linked(int64_t t) const { return target_linked_[static_cast<size_t>(t)] > 0; }
  int64_t source_words() const { return S_; }
  int64_t target_words() const { return T_; }
  std::vector<std::pair<int64_t, int64_t>> pairs() const {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (int64_t t = 0; t < T_; ++t)
      for (int64_t s = 0; s < S_; ++s)
        if (has(s, t)) out.emplace_back(s, t);
    return out;
  }

 private:
  size_t index(int64_t s, int64_t t) const { return static_cast<size_t>(s * T_ + t); }
  int64_t S_, T_;
  std::vector<char> on_;
  std::vector<int> source_linked_, target_linked_;
};

LinkGrid grid_of(const std::vector<std::pair<int64_t, int64_t>>& links, int64_t S, int64_t T) {
  LinkGrid g(S, T);
  for (const auto& [s, t] : links) {
    if (!g.inside(s, t)) throw Error("grow_diag_final_and: a link outside the words");
    g.set(s, t);
  }
  return g;
}

// Grow-diag: adds union links next to a link (diagonals too) that link a word not yet linked,
// until none is added.
void grow_diag(LinkGrid& a, const LinkGrid& both) {
  static const int64_t kNeighbours[8][2] = {{-1, 0}, {0, -1}, {1, 0},  {0, 1},
                                            {-1, -1}, {-1, 1}, {1, -1}, {1, 1}};
  for (bool added = true; added;) {
    added = false;
    for (int64_t t = 0; t < a.target_words(); ++t)
      for (int64_t s = 0; s < a.source_words(); ++s) {
        if (!a.has(s, t)) continue;
        for (const auto& d : kNeighbours) {
          const int64_t ns = s + d[0], nt = t + d[1];
          if (!a.inside(ns, nt) || a.has(ns, nt) || !both.has(ns, nt)) continue;
          if (a.source_linked(ns) && a.target_linked(nt)) continue;
          a.set(ns, nt);
          added = true;
        }
      }
  }
}

// Final-and: a direction's links between two words that are both still unlinked.
void final_and(LinkGrid& a, const std::vector<std::pair<int64_t, int64_t>>& direction) {
  for (const auto& [s, t] : direction)
    if (!a.source_linked(s) && !a.target_linked(t)) a.set(s, t);
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> grow_diag_final_and(
    const std::vector<std::pair<int64_t, int64_t>>& forward,
    const std::vector<std::pair<int64_t, int64_t>>& reverse, int64_t source_words,
    int64_t target_words) {
  const LinkGrid f = grid_of(forward, source_words, target_words);
  const LinkGrid r = grid_of(reverse, source_words, target_words);
  LinkGrid a(source_words, target_words), both(source_words, target_words);
  for (const auto& [s, t] : forward) {
    both.set(s, t);
    if (r.has(s, t)) a.set(s, t);
  }
  for (const auto& [s, t] : reverse) both.set(s, t);
  grow_diag(a, both);
  final_and(a, f.pairs());
  final_and(a, r.pairs());
  return a.pairs();
}

std::vector<int64_t> target_sources(const std::vector<std::pair<int64_t, int64_t>>& links,
                                    const std::vector<std::vector<float>>& weights,
                                    int64_t target_words) {
  std::vector<int64_t> out(static_cast<size_t>(std::max<int64_t>(target_words, 0)), -1);
  for (const auto& [s, t] : links) {
    if (t < 0 || t >= target_words || s < 0) throw Error("target_sources: a link outside the words");
    auto& best = out[static_cast<size_t>(t)];
    const auto weight = [&](int64_t source) {
      const auto& row = weights.at(static_cast<size_t>(t));
      return row.at(static_cast<size_t>(source));
    };
    if (best < 0 || weight(s) > weight(best) || (weight(s) == weight(best) && s < best)) best = s;
  }
  return out;
}

std::string format_alignment(const std::vector<std::pair<int64_t, int64_t>>& pairs) {
  std::string out;
  for (const auto& [s, t] : pairs) {
    if (!out.empty()) out += ' ';
    out += std::to_string(s) + "-" + std::to_string(t);
  }
  return out;
}

std::string hard_alignment_text(const WordAlignment& a) { return format_alignment(a.links); }

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
