// Terminology: target phrases a translation must contain (lexically constrained beam search with
// dynamic beam allocation, Post & Vilar 2018, batched as Hu et al. 2019 do it) and phrases it
// must not contain. The pure parts live here, unit-tested on hand-made cases: how a hypothesis
// advances through its phrases, how candidates share a beam among banks, which tokens an avoid
// list blocks. The searches run them (constrained.cpp, search_parts.cpp); translate.cpp reads
// and encodes the phrases.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nmt {

class LineReader;

// What the word-level checks need of the target vocabulary, per piece id: its text (U+2581 as a
// space) and whether it continues the word before it (it does not start with U+2581 and starts
// with a letter, a digit, a hyphen or an apostrophe, as in "Hund" + "e" or "T" + "-Shirt";
// not with punctuation or quotes).
struct PieceTexts {
  std::vector<std::string> text;
  std::vector<char> continues;
};

PieceTexts piece_texts(const std::vector<std::string>& pieces);

// One sentence's terms as target piece ids (no BOS/EOS). Phrases are words: a phrase to include
// must be followed by a word boundary, and a phrase to avoid is also kept out when the output
// spells it with other pieces (the word it ends must go on).
struct SentenceTerms {
  std::vector<std::vector<int64_t>> constraints;  // phrases that must appear (--constraints)
  std::vector<std::vector<int64_t>> avoid;        // phrases that must not appear (--avoid)
  std::vector<std::string> avoid_text;            // the avoided phrases as text
  const PieceTexts* pieces = nullptr;             // the target vocabulary's (for terms)
  bool empty() const { return constraints.empty() && avoid.empty(); }
};

// Whether any sentence has phrases to include (a search must allocate beams) or to avoid.
bool any_constraints(const std::vector<SentenceTerms>& terms);
bool any_avoid(const std::vector<SentenceTerms>& terms);

// The phrases of one line of a --constraints or --avoid file: tab-separated, each trimmed of
// spaces; empty fields are skipped, so an empty line has none.
std::vector<std::string> split_phrases(const std::string& line);

// Where one hypothesis stands with its sentence's phrases.
struct ConstraintState {
  std::vector<char> met;  // per phrase: produced in full
  int64_t phrase = -1;    // the phrase being produced now (-1: none)
  int64_t pos = 0;        // its pieces produced so far
  int64_t done = 0;       // pieces of met phrases plus pos: the hypothesis' bank
  bool just_met = false;  // the last token completed a phrase: the next must end the word
};

ConstraintState start_constraints(const std::vector<std::vector<int64_t>>& phrases);

// The state after the hypothesis emits `token`. A phrase in progress advances when the token is
// its next piece and is abandoned otherwise (its pieces no longer count); then, when no phrase
// is in progress, a token that starts an unmet phrase starts it (the first such phrase).
ConstraintState advance(const ConstraintState& state,
                        const std::vector<std::vector<int64_t>>& phrases, int64_t token);

// The tokens that move `state` forward: the next piece of the phrase in progress, else the
// first piece of every unmet phrase (each token once).
std::vector<int64_t> constraint_tokens(const ConstraintState& state,
                                       const std::vector<std::vector<int64_t>>& phrases);

// Pieces of all phrases: the bank of a hypothesis that has met them all.
int64_t total_pieces(const std::vector<std::vector<int64_t>>& phrases);

// A candidate of one sentence's step: its score and bank (constraint pieces met after it).
struct BankCandidate {
  float score;
  int64_t bank;
};

// Dynamic beam allocation as a ranking (Hu et al.'s round robin): the best candidate of each
// bank, highest bank first, then the second best of each, and so on, so the first K indices
// spread a beam of K over the banks and a bank with fewer candidates leaves its share to the
// others. Among equal scores the earlier candidate comes first.
std::vector<size_t> allocation_order(const std::vector<BankCandidate>& candidates);

// The tokens `avoid` blocks after `prefix`: the last piece of every phrase whose other pieces
// end the prefix (a one-piece phrase always), each once.
std::vector<int64_t> blocked_tokens(const std::vector<int>& prefix,
                                    const std::vector<std::vector<int64_t>>& avoid);

// Whether the output `prefix` ends with `phrase` (text) as a whole word so far: it ends with
// the phrase, after a character that is not part of a word (a space, a quote; the output's
// start counts as a space).
bool ends_with_phrase(const std::vector<int>& prefix, const PieceTexts& pieces,
                      const std::string& phrase);

// Reads a --constraints and an --avoid file (either may be "") in step with the input, a chunk
// of lines at a time. Throws Error when a file ends before the input does, or (at finish) goes
// on after it.
class TermFiles {
 public:
  TermFiles(const std::string& constraints, const std::string& avoid);
  ~TermFiles();
  bool active() const { return constraints_ != nullptr || avoid_ != nullptr; }
  // Skips `n` lines of each file (--resume).
  void skip(int64_t n);
  // The phrases of the next `n` lines: constraints and avoid, one entry per line.
  void read(int64_t n, std::vector<std::vector<std::string>>& constraints,
            std::vector<std::vector<std::string>>& avoid);
  // After the input's last line: the files must have ended too.
  void finish();

 private:
  std::unique_ptr<LineReader> constraints_, avoid_;
};

}  // namespace nmt
