#include "decode/terms.h"

#include <algorithm>
#include <cctype>
#include <numeric>

#include "util/line_reader.h"
#include "util/util.h"

namespace nmt {

std::vector<std::string> split_phrases(const std::string& line) {
  std::vector<std::string> phrases;
  for (const auto& field : split(line, '\t')) {
    auto phrase = trim(field);
    if (!phrase.empty()) phrases.push_back(std::move(phrase));
  }
  return phrases;
}

namespace {

// Letters, digits, and the hyphen and apostrophe inside compounds ("T-Shirt"): what a word is
// made of. Other code points (spaces, quotes such as U+201E, punctuation) end words.
bool is_word_char(char32_t c) {
  if (c < 0x80) return std::isalnum(static_cast<int>(c)) || c == '-' || c == '\'';
  const bool punctuation = (c >= 0x2000 && c <= 0x206F) || (c >= 0xA0 && c <= 0xBF) ||
                           c == 0xD7 || c == 0xF7 || (c >= 0x3000 && c <= 0x303F);
  return !punctuation;
}

}  // namespace

bool any_constraints(const std::vector<SentenceTerms>& terms) {
  return std::any_of(terms.begin(), terms.end(),
                     [](const SentenceTerms& t) { return !t.constraints.empty(); });
}

bool any_avoid(const std::vector<SentenceTerms>& terms) {
  return std::any_of(terms.begin(), terms.end(),
                     [](const SentenceTerms& t) { return !t.avoid.empty(); });
}

PieceTexts piece_texts(const std::vector<std::string>& pieces) {
  static const std::string kSpace = "\xE2\x96\x81";  // U+2581
  PieceTexts out;
  for (const auto& p : pieces) {
    std::string text;
    for (size_t i = 0; i < p.size();) {
      if (p.compare(i, kSpace.size(), kSpace) == 0) {
        text += ' ';
        i += kSpace.size();
      } else {
        text += p[i++];
      }
    }
    // A vocabulary's special pieces (<unk>, </s>) start with '<' and end words.
    const auto cps = decode_utf8(text);
    out.continues.push_back(!cps.empty() && is_word_char(cps.front()) ? 1 : 0);
    out.text.push_back(std::move(text));
  }
  return out;
}

bool ends_with_phrase(const std::vector<int>& prefix, const PieceTexts& pieces,
                      const std::string& phrase) {
  // The output's end, one code point longer than the phrase (a space before its start).
  const auto want = decode_utf8(phrase);
  std::u32string tail;
  size_t k = prefix.size();
  while (k > 0 && tail.size() <= want.size())
    tail.insert(0, decode_utf8(pieces.text[static_cast<size_t>(prefix[--k])]));
  if (k == 0) tail.insert(tail.begin(), U' ');
  if (tail.size() <= want.size() ||
      tail.compare(tail.size() - want.size(), want.size(), want) != 0)
    return false;
  return !is_word_char(tail[tail.size() - want.size() - 1]);
}

ConstraintState start_constraints(const std::vector<std::vector<int64_t>>& phrases) {
  ConstraintState s;
  s.met.assign(phrases.size(), 0);
  return s;
}

namespace {

// Marks phrase j met or in progress after its first piece.
void start_phrase(ConstraintState& s, const std::vector<std::vector<int64_t>>& phrases,
                  size_t j) {
  ++s.done;
  if (phrases[j].size() == 1) {
    s.met[j] = 1;
    s.just_met = true;
  } else {
    s.phrase = static_cast<int64_t>(j);
    s.pos = 1;
  }
}

}  // namespace

ConstraintState advance(const ConstraintState& state,
                        const std::vector<std::vector<int64_t>>& phrases, int64_t token) {
  ConstraintState s = state;
  s.just_met = false;
  if (s.phrase >= 0) {
    const auto& p = phrases[static_cast<size_t>(s.phrase)];
    if (p[static_cast<size_t>(s.pos)] == token) {
      ++s.done;
      if (++s.pos == static_cast<int64_t>(p.size())) {
        s.met[static_cast<size_t>(s.phrase)] = 1;
        s.just_met = true;
        s.phrase = -1;
        s.pos = 0;
      }
      return s;
    }
    s.done -= s.pos;  // abandoned: its pieces no longer count
    s.phrase = -1;
    s.pos = 0;
  }
  for (size_t j = 0; j < phrases.size(); ++j)
    if (!s.met[j] && phrases[j].front() == token) {
      start_phrase(s, phrases, j);
      break;
    }
  return s;
}

std::vector<int64_t> constraint_tokens(const ConstraintState& state,
                                       const std::vector<std::vector<int64_t>>& phrases) {
  if (state.phrase >= 0)
    return {phrases[static_cast<size_t>(state.phrase)][static_cast<size_t>(state.pos)]};
  std::vector<int64_t> tokens;
  for (size_t j = 0; j < phrases.size(); ++j)
    if (!state.met[j] &&
        std::find(tokens.begin(), tokens.end(), phrases[j].front()) == tokens.end())
      tokens.push_back(phrases[j].front());
  return tokens;
}

int64_t total_pieces(const std::vector<std::vector<int64_t>>& phrases) {
  int64_t n = 0;
  for (const auto& p : phrases) n += static_cast<int64_t>(p.size());
  return n;
}

std::vector<size_t> allocation_order(const std::vector<BankCandidate>& candidates) {
  std::vector<size_t> by_score(candidates.size());
  std::iota(by_score.begin(), by_score.end(), 0);
  std::stable_sort(by_score.begin(), by_score.end(), [&](size_t a, size_t b) {
    return candidates[a].score > candidates[b].score;
  });
  // Each candidate's rank within its bank, counted in score order.
  std::vector<int64_t> rank(candidates.size());
  std::vector<int64_t> seen;
  for (const size_t i : by_score) {
    const auto bank = static_cast<size_t>(candidates[i].bank);
    if (seen.size() <= bank) seen.resize(bank + 1, 0);
    rank[i] = seen[bank]++;
  }
  std::vector<size_t> order = by_score;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (rank[a] != rank[b]) return rank[a] < rank[b];
    return candidates[a].bank > candidates[b].bank;
  });
  return order;
}

std::vector<int64_t> blocked_tokens(const std::vector<int>& prefix,
                                    const std::vector<std::vector<int64_t>>& avoid) {
  std::vector<int64_t> blocked;
  for (const auto& phrase : avoid) {
    const size_t head = phrase.size() - 1;  // pieces that must end the prefix
    if (head > prefix.size()) continue;
    bool match = true;
    for (size_t k = 0; k < head && match; ++k)
      match = prefix[prefix.size() - head + k] == phrase[k];
    if (match && std::find(blocked.begin(), blocked.end(), phrase.back()) == blocked.end())
      blocked.push_back(phrase.back());
  }
  return blocked;
}

TermFiles::TermFiles(const std::string& constraints, const std::string& avoid) {
  if (!constraints.empty()) constraints_ = std::make_unique<LineReader>(constraints);
  if (!avoid.empty()) avoid_ = std::make_unique<LineReader>(avoid);
}

TermFiles::~TermFiles() = default;

namespace {

bool next_line(LineReader* in, std::string& line, const char* what) {
  if (in == nullptr) return false;
  if (!in->next(line))
    throw Error(std::string(what) + " file " + in->path() + " has " +
                std::to_string(in->lines()) + " lines, fewer than the input");
  return true;
}

}  // namespace

void TermFiles::skip(int64_t n) {
  std::string line;
  for (int64_t i = 0; i < n; ++i) {
    next_line(constraints_.get(), line, "--constraints");
    next_line(avoid_.get(), line, "--avoid");
  }
}

void TermFiles::read(int64_t n, std::vector<std::vector<std::string>>& constraints,
                     std::vector<std::vector<std::string>>& avoid) {
  constraints.assign(static_cast<size_t>(n), {});
  avoid.assign(static_cast<size_t>(n), {});
  std::string line;
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    if (next_line(constraints_.get(), line, "--constraints")) constraints[i] = split_phrases(line);
    if (next_line(avoid_.get(), line, "--avoid")) avoid[i] = split_phrases(line);
  }
}

void TermFiles::finish() {
  std::string line;
  for (LineReader* in : {constraints_.get(), avoid_.get()})
    if (in != nullptr && in->next(line))
      throw Error(in->path() + " has more lines than the input (line " +
                  std::to_string(in->lines()) + " has no input line)");
}

}  // namespace nmt
