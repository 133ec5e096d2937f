// Rule-based sentence splitting for documents (`translate --format text|html`), after the Moses
// splitter (scripts/ems/support/split-sentences.perl) and browsermt/ssplit-cpp. A paragraph's
// sentences come back as byte spans, so the caller translates each one and rebuilds the
// paragraph with the source's own whitespace between them.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace nmt {

// Non-breaking prefixes of one language, as the Moses lists give them: words that, followed by a
// period, do not end a sentence ("Dr", "z.B"), and #NUMERIC_ONLY# words that do not end one
// before a number ("No" in "No. 5"). Case-sensitive, without the final period.
struct NonbreakingPrefixes {
  std::unordered_set<std::string> always, numeric_only;
};

// Parses the text of a Moses nonbreaking_prefix file: '#' starts a comment line, blank lines are
// skipped, "word #NUMERIC_ONLY#" is a numeric-only prefix, surrounding spaces are trimmed. A word
// listed twice takes its last kind, as in Moses.
NonbreakingPrefixes parse_nonbreaking_prefixes(std::string_view text);

// The built-in list of a language ("en", "de", "fr", "es", "cs"; "en-GB" and "EN" read as "en"),
// compiled into the binary from src/text/nonbreaking_prefixes. Empty lists for any other
// language, which then gets only the generic rules.
const NonbreakingPrefixes& nonbreaking_prefixes(const std::string& language);

// One sentence of a paragraph: bytes [begin, end) of it. The bytes before the first, between two
// and after the last are the paragraph's own whitespace (none between sentences that CJK full
// stops end), which the caller keeps.
struct SentenceSpan {
  size_t begin = 0, end = 0;
  bool operator==(const SentenceSpan& o) const { return begin == o.begin && end == o.end; }
};

// Splits paragraphs as Moses does: a sentence ends at . ? ! (and runs of them, "...", "…",
// CJK full stops), with any closing quotes and brackets after it, where whitespace and then a
// sentence start follow (an upper-case letter, a digit or a letter of a caseless script, after
// any opening quotes, brackets, ¿ and ¡). A period does not end one after a listed prefix, a
// numeric-only prefix before a number, a single upper-case letter (initials), an acronym with
// periods inside ("U.S.", "z.B."), or a list number that starts a sentence ("1. Buy milk.").
class SentenceSplitter {
 public:
  explicit SentenceSplitter(const std::string& language);
  explicit SentenceSplitter(NonbreakingPrefixes prefixes);

  // The sentences of one paragraph, in order; none for blank text. Any whitespace, newlines
  // included, separates words. Linear in the text's length; never throws: a byte that is not
  // valid UTF-8 is an ordinary character.
  std::vector<SentenceSpan> split(std::string_view paragraph) const;

 private:
  NonbreakingPrefixes prefixes_;
};

}  // namespace nmt
