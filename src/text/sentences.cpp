#include "text/sentences.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "util/util.h"

namespace nmt {

// Generated at configure time from src/text/nonbreaking_prefixes (embed.cmake): the text of a
// language's list, "" for an unknown language.
std::string_view builtin_nonbreaking_prefixes(const std::string& language);

namespace {

// Upper- and title-case letters (Lu, Lt) of Unicode 14, from Python's unicodedata, as runs of
// every stride-th code point from first to last (Latin Extended alternates upper and lower).
struct CaseRun {
  char32_t first, last;
  uint32_t stride;
};
constexpr CaseRun kUpperCase[] = {
    {0x0041, 0x005A, 1},   {0x00C0, 0x00D6, 1},   {0x00D8, 0x00DE, 1},   {0x0100, 0x0136, 2},
    {0x0139, 0x0147, 2},   {0x014A, 0x0178, 2},   {0x0179, 0x017D, 2},   {0x0181, 0x0182, 1},
    {0x0184, 0x0186, 2},   {0x0187, 0x0189, 2},   {0x018A, 0x018B, 1},   {0x018E, 0x0191, 1},
    {0x0193, 0x0194, 1},   {0x0196, 0x0198, 1},   {0x019C, 0x019D, 1},   {0x019F, 0x01A0, 1},
    {0x01A2, 0x01A6, 2},   {0x01A7, 0x01A9, 2},   {0x01AC, 0x01AE, 2},   {0x01AF, 0x01B1, 2},
    {0x01B2, 0x01B3, 1},   {0x01B5, 0x01B7, 2},   {0x01B8, 0x01B8, 1},   {0x01BC, 0x01BC, 1},
    {0x01C4, 0x01C5, 1},   {0x01C7, 0x01C8, 1},   {0x01CA, 0x01CB, 1},   {0x01CD, 0x01DB, 2},
    {0x01DE, 0x01EE, 2},   {0x01F1, 0x01F2, 1},   {0x01F4, 0x01F6, 2},   {0x01F7, 0x01F8, 1},
    {0x01FA, 0x0232, 2},   {0x023A, 0x023B, 1},   {0x023D, 0x023E, 1},   {0x0241, 0x0243, 2},
    {0x0244, 0x0246, 1},   {0x0248, 0x024E, 2},   {0x0370, 0x0372, 2},   {0x0376, 0x0376, 1},
    {0x037F, 0x037F, 1},   {0x0386, 0x0388, 2},   {0x0389, 0x038A, 1},   {0x038C, 0x038E, 2},
    {0x038F, 0x0391, 2},   {0x0392, 0x03A1, 1},   {0x03A3, 0x03AB, 1},   {0x03CF, 0x03CF, 1},
    {0x03D2, 0x03D4, 1},   {0x03D8, 0x03EE, 2},   {0x03F4, 0x03F4, 1},   {0x03F7, 0x03F9, 2},
    {0x03FA, 0x03FA, 1},   {0x03FD, 0x042F, 1},   {0x0460, 0x0480, 2},   {0x048A, 0x04C0, 2},
    {0x04C1, 0x04CD, 2},   {0x04D0, 0x052E, 2},   {0x0531, 0x0556, 1},   {0x10A0, 0x10C5, 1},
    {0x10C7, 0x10C7, 1},   {0x10CD, 0x10CD, 1},   {0x13A0, 0x13F5, 1},   {0x1C90, 0x1CBA, 1},
    {0x1CBD, 0x1CBF, 1},   {0x1E00, 0x1E94, 2},   {0x1E9E, 0x1EFE, 2},   {0x1F08, 0x1F0F, 1},
    {0x1F18, 0x1F1D, 1},   {0x1F28, 0x1F2F, 1},   {0x1F38, 0x1F3F, 1},   {0x1F48, 0x1F4D, 1},
    {0x1F59, 0x1F5F, 2},   {0x1F68, 0x1F6F, 1},   {0x1F88, 0x1F8F, 1},   {0x1F98, 0x1F9F, 1},
    {0x1FA8, 0x1FAF, 1},   {0x1FB8, 0x1FBC, 1},   {0x1FC8, 0x1FCC, 1},   {0x1FD8, 0x1FDB, 1},
    {0x1FE8, 0x1FEC, 1},   {0x1FF8, 0x1FFC, 1},   {0x2102, 0x2102, 1},   {0x2107, 0x2107, 1},
    {0x210B, 0x210D, 1},   {0x2110, 0x2112, 1},   {0x2115, 0x2115, 1},   {0x2119, 0x211D, 1},
    {0x2124, 0x212A, 2},   {0x212B, 0x212D, 1},   {0x2130, 0x2133, 1},   {0x213E, 0x213F, 1},
    {0x2145, 0x2145, 1},   {0x2183, 0x2183, 1},   {0x2C00, 0x2C2F, 1},   {0x2C60, 0x2C62, 2},
    {0x2C63, 0x2C64, 1},   {0x2C67, 0x2C6D, 2},   {0x2C6E, 0x2C70, 1},   {0x2C72, 0x2C72, 1},
    {0x2C75, 0x2C75, 1},   {0x2C7E, 0x2C80, 1},   {0x2C82, 0x2CE2, 2},   {0x2CEB, 0x2CED, 2},
    {0x2CF2, 0x2CF2, 1},   {0xA640, 0xA66C, 2},   {0xA680, 0xA69A, 2},   {0xA722, 0xA72E, 2},
    {0xA732, 0xA76E, 2},   {0xA779, 0xA77D, 2},   {0xA77E, 0xA786, 2},   {0xA78B, 0xA78D, 2},
    {0xA790, 0xA792, 2},   {0xA796, 0xA7AA, 2},   {0xA7AB, 0xA7AE, 1},   {0xA7B0, 0xA7B4, 1},
    {0xA7B6, 0xA7C4, 2},   {0xA7C5, 0xA7C7, 1},   {0xA7C9, 0xA7C9, 1},   {0xA7D0, 0xA7D0, 1},
    {0xA7D6, 0xA7D8, 2},   {0xA7F5, 0xA7F5, 1},   {0xFF21, 0xFF3A, 1},   {0x10400, 0x10427, 1},
    {0x104B0, 0x104D3, 1}, {0x10570, 0x1057A, 1}, {0x1057C, 0x1058A, 1}, {0x1058C, 0x10592, 1},
    {0x10594, 0x10595, 1}, {0x10C80, 0x10CB2, 1}, {0x118A0, 0x118BF, 1}, {0x16E40, 0x16E5F, 1},
    {0x1D400, 0x1D419, 1}, {0x1D434, 0x1D44D, 1}, {0x1D468, 0x1D481, 1}, {0x1D49C, 0x1D49E, 2},
    {0x1D49F, 0x1D49F, 1}, {0x1D4A2, 0x1D4A2, 1}, {0x1D4A5, 0x1D4A6, 1}, {0x1D4A9, 0x1D4AC, 1},
    {0x1D4AE, 0x1D4B5, 1}, {0x1D4D0, 0x1D4E9, 1}, {0x1D504, 0x1D505, 1}, {0x1D507, 0x1D50A, 1},
    {0x1D50D, 0x1D514, 1}, {0x1D516, 0x1D51C, 1}, {0x1D538, 0x1D539, 1}, {0x1D53B, 0x1D53E, 1},
    {0x1D540, 0x1D544, 1}, {0x1D546, 0x1D546, 1}, {0x1D54A, 0x1D550, 1}, {0x1D56C, 0x1D585, 1},
    {0x1D5A0, 0x1D5B9, 1}, {0x1D5D4, 0x1D5ED, 1}, {0x1D608, 0x1D621, 1}, {0x1D63C, 0x1D655, 1},
    {0x1D670, 0x1D689, 1}, {0x1D6A8, 0x1D6C0, 1}, {0x1D6E2, 0x1D6FA, 1}, {0x1D71C, 0x1D734, 1},
    {0x1D756, 0x1D76E, 1}, {0x1D790, 0x1D7A8, 1}, {0x1D7CA, 0x1D7CA, 1}, {0x1E900, 0x1E921, 1},
};

bool is_upper(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z';
  const auto* run = std::upper_bound(std::begin(kUpperCase), std::end(kUpperCase), c,
                                     [](char32_t v, const CaseRun& r) { return v < r.first; });
  if (run == std::begin(kUpperCase)) return false;
  --run;
  return c <= run->last && (c - run->first) % run->stride == 0;
}

bool is_digit(char32_t c) { return c >= '0' && c <= '9'; }

// Whitespace of Unicode (Zs, line and paragraph separators) and the ASCII controls.
constexpr std::u32string_view kSpaces =
    U" \t\n\v\f\r\u0085\u00A0\u1680\u2028\u2029\u202F\u205F\u3000";

bool is_space(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= '\t' && c <= '\r');
  return (c >= 0x2000 && c <= 0x200A) || (c <= 0x3000 && kSpaces.find(c) != kSpaces.npos);
}

// What sentence-final punctuation does: a period is subject to the prefix rules, an ellipsis
// ends a sentence only before a sentence start, as ? and ! (kStrong) do, and a CJK full stop
// always ends one, spaces or not (Chinese and Japanese put none between sentences).
enum class Ender { kNone, kPeriod, kEllipsis, kStrong, kCjk };

// ? ! ‼ ⁇ ⁈ ⁉, the Greek question mark, Armenian full stop, Arabic question mark and full
// stop, danda, double danda and the Ethiopic full stop.
constexpr std::u32string_view kStrongEnders = U"?!‼⁇⁈⁉\u037E\u0589\u061F\u06D4\u0964\u0965\u1362";
constexpr std::u32string_view kCjkEnders = U"。！？｡";

Ender ender_of(char32_t c) {
  if (c == '.') return Ender::kPeriod;
  if (c == U'…') return Ender::kEllipsis;
  if (c < 0x80) return c == '?' || c == '!' ? Ender::kStrong : Ender::kNone;
  if (kStrongEnders.find(c) != kStrongEnders.npos) return Ender::kStrong;
  if (kCjkEnders.find(c) != kCjkEnders.npos) return Ender::kCjk;
  return Ender::kNone;
}

// Quotes and brackets that may follow a sentence's final punctuation and stay with it. German
// closes with “ ‘ « ‹ and French with » ”, so both directions count; then the closing
// punctuation of Unicode (Pf) and the CJK and full-width brackets.
constexpr std::u32string_view kClosers =
    U"\"')]}«»‘’“”‹›\u2E03\u2E05\u2E0A\u2E0D\u2E1D\u2E21〉》」』】〕＂＇）］｝";
// Quotes, brackets and marks that may come before a sentence's first letter.
constexpr std::u32string_view kOpeners =
    U"\"'([{¡¿«»‘’‚‛“”„‟‹›\u2E02\u2E04\u2E09\u2E0C\u2E1C\u2E20〈《「『【〔＂＇（［｛";
// List bullets written as words of their own ("Done. - Next item").
constexpr std::u32string_view kBullets = U"-*–—•·";

bool is_closer(char32_t c) { return c > 0x20 && kClosers.find(c) != kClosers.npos; }
bool is_opener(char32_t c) { return c > 0x20 && kOpeners.find(c) != kOpeners.npos; }
bool is_bullet(char32_t c) { return c > 0x20 && kBullets.find(c) != kBullets.npos; }

// A closer that stands alone between spaces after a sentence ("Bonjour. » Il"): not « ‹ “ ‘,
// which alone between spaces open the next sentence (French « Bonjour »).
bool is_spaced_closer(char32_t c) {
  return is_closer(c) && c != U'«' && c != U'‹' && c != U'“' && c != U'‘';
}

// A letter, roughly: ASCII letters, and from U+00C0 on whatever is not in a block of
// punctuation, symbols or spaces, nor a mark above: precise enough to find where a word's
// prefix starts. Invalid bytes (U+DC80..U+DCFF) are not letters.
bool is_letter(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  if (c < 0xC0 || c == 0xD7 || c == 0xF7 || c == 0x060C || c == 0x061B) return false;
  if ((c >= 0x2000 && c <= 0x2BFF) || (c >= 0x2E00 && c <= 0x2E7F) ||
      (c >= 0x3000 && c <= 0x303F) || (c >= 0xD800 && c <= 0xDFFF) ||
      (c >= 0xFE30 && c <= 0xFE6F) || (c >= 0xFF00 && c <= 0xFF20) ||
      (c >= 0xFF3B && c <= 0xFF40) || (c >= 0xFF5B && c <= 0xFF65))
    return false;
  return ender_of(c) == Ender::kNone && !is_opener(c) && !is_closer(c);
}

// A letter of a script without case, which starts a sentence as an upper-case letter does
// (Moses adds such blocks per language: Devanagari, Hangul, CJK, ...).
bool is_caseless_letter(char32_t c) {
  if (c < 0x0590 || !is_letter(c)) return false;
  return c <= 0x08FF ||                   // Hebrew, Arabic, Syriac, Thaana, ...
         (c >= 0x0900 && c <= 0x0FFF) ||  // Indic scripts, Thai, Lao, Tibetan
         (c >= 0x10D0 && c <= 0x10FF) ||  // Georgian Mkhedruli
         (c >= 0x1100 && c <= 0x139F) ||  // Hangul Jamo, Ethiopic
         (c >= 0x3040 && c <= 0x30FF) ||  // Hiragana, Katakana
         (c >= 0x3400 && c <= 0x9FFF) ||  // CJK ideographs
         (c >= 0xAC00 && c <= 0xD7AF) ||  // Hangul syllables
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x20000 && c <= 0x3FFFF);
}

// The code point that starts at s[i], and its length in bytes. A byte that does not start a
// valid sequence is one character of its own, U+DC00 + byte (as Python's surrogateescape).
char32_t decode_at(std::string_view s, size_t i, size_t* length) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const char32_t c = byte(i);
  const char32_t invalid = 0xDC00 + c;
  *length = 1;
  if (c < 0x80) return c;
  size_t n;
  char32_t cp, min;
  if ((c & 0xE0) == 0xC0) {
    n = 2, cp = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, cp = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, cp = c & 0x07, min = 0x10000;
  } else {
    return invalid;
  }
  if (n > s.size() - i) return invalid;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return invalid;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return invalid;
  *length = n;
  return cp;
}

// One code point of the paragraph and the offset of its first byte.
struct Char {
  char32_t cp;
  size_t at;
};

// A word: characters [first, last) between whitespace.
struct Token {
  size_t first, last;
};

// One split() call: the paragraph as characters and words, and the decisions on them. Every
// rule looks at one word, its neighbours and its ends, so a paragraph takes linear time.
class Paragraph {
 public:
  Paragraph(std::string_view text, const NonbreakingPrefixes& prefixes);
  std::vector<SentenceSpan> split();

 private:
  size_t byte_of(size_t i) const { return i < chars_.size() ? chars_[i].at : text_.size(); }
  bool spaced_closers(size_t t) const;
  size_t end_before_closers(size_t t) const;
  Ender final_ender(size_t t, size_t end, size_t* run) const;
  bool starts_sentence(size_t n) const;
  bool is_list_number(size_t t) const;
  bool period_exempt(size_t t, size_t period, size_t next, bool first_of_sentence) const;
  bool boundary_after(size_t t, size_t sentence_first) const;
  void cut_inside(size_t t, size_t* begin, std::vector<SentenceSpan>* out) const;

  std::string_view text_;
  const NonbreakingPrefixes& prefixes_;
  std::vector<Char> chars_;
  std::vector<Token> tokens_;
};

Paragraph::Paragraph(std::string_view text, const NonbreakingPrefixes& prefixes)
    : text_(text), prefixes_(prefixes) {
  chars_.reserve(text.size());
  for (size_t i = 0, n = 0; i < text.size(); i += n) chars_.push_back({decode_at(text, i, &n), i});
  for (size_t i = 0; i < chars_.size();) {
    while (i < chars_.size() && is_space(chars_[i].cp)) ++i;
    const size_t first = i;
    while (i < chars_.size() && !is_space(chars_[i].cp)) ++i;
    if (i > first) tokens_.push_back({first, i});
  }
}

// Whether word t is only closing quotes and brackets, standing alone ("Bonjour. » Il").
bool Paragraph::spaced_closers(size_t t) const {
  for (size_t i = tokens_[t].first; i < tokens_[t].last; ++i)
    if (!is_spaced_closer(chars_[i].cp)) return false;
  return true;
}

// Where word t ends without its closing quotes and brackets.
size_t Paragraph::end_before_closers(size_t t) const {
  size_t end = tokens_[t].last;
  while (end > tokens_[t].first && is_closer(chars_[end - 1].cp)) --end;
  return end;
}

// The kind of the run of final punctuation that ends at end in word t (its start in *run): the
// last mark's kind, and an ellipsis for "…" or more than one period ("Wait...").
Ender Paragraph::final_ender(size_t t, size_t end, size_t* run) const {
  size_t b = end;
  int periods = 0;
  bool ellipsis = false;
  while (b > tokens_[t].first && ender_of(chars_[b - 1].cp) != Ender::kNone) {
    --b;
    periods += chars_[b].cp == '.';
    ellipsis = ellipsis || chars_[b].cp == 0x2026;
  }
  *run = b;
  if (b == end) return Ender::kNone;
  const Ender last = ender_of(chars_[end - 1].cp);
  if (last == Ender::kCjk || last == Ender::kStrong) return last;
  return ellipsis || periods > 1 ? Ender::kEllipsis : Ender::kPeriod;
}

// Whether word n starts a sentence: after its opening quotes and brackets, an upper-case letter,
// a digit or a caseless letter. An opening quote or a bullet standing alone defers to the next
// word ("« Bonjour", "- Item").
bool Paragraph::starts_sentence(size_t n) const {
  const size_t first = tokens_[n].first;
  size_t i = first, last = tokens_[n].last;
  while (i < last && is_opener(chars_[i].cp)) ++i;
  if (i == last || (last - first == 1 && is_bullet(chars_[first].cp))) {
    if (n + 1 >= tokens_.size()) return false;
    i = tokens_[n + 1].first, last = tokens_[n + 1].last;
    while (i < last && is_opener(chars_[i].cp)) ++i;
    if (i == last) return false;
  }
  const char32_t c = chars_[i].cp;
  return is_upper(c) || is_digit(c) || is_caseless_letter(c);
}

// "1.", "(2).", "iv.", "b." : the number of a list item (Moses' -i option).
bool Paragraph::is_list_number(size_t t) const {
  size_t i = tokens_[t].first, last = tokens_[t].last;
  if (last - i > 12 || chars_[last - 1].cp != '.') return false;
  --last;
  if (i < last && chars_[i].cp == '(') ++i;
  if (i < last && chars_[last - 1].cp == ')') --last;
  if (i == last) return false;
  const auto all = [&](auto pred) {
    for (size_t k = i; k < last; ++k)
      if (!pred(chars_[k].cp)) return false;
    return true;
  };
  const bool letter = last - i == 1 && chars_[i].cp < 0x80 && is_letter(chars_[i].cp);
  return letter || all(is_digit) ||
         all([](char32_t c) { return c == 'i' || c == 'v' || c == 'x'; });
}

// Whether the period at chars_[period], the last character of word t but closers, does not end
// a sentence although word next starts one.
bool Paragraph::period_exempt(size_t t, size_t period, size_t next, bool first_of_sentence) const {
  if (first_of_sentence && period + 1 == tokens_[t].last && is_list_number(t)) return true;
  // Moses' prefix: the letters, digits, periods and hyphens before the period, none when a
  // closing quote, bracket or '%' stands between them and it ("(see above). Then").
  const size_t first = tokens_[t].first;
  if (period > first && (is_closer(chars_[period - 1].cp) || chars_[period - 1].cp == '%'))
    return false;
  size_t b = period, part = period;  // part: after the prefix's last period
  for (; b > first; --b) {
    const char32_t c = chars_[b - 1].cp;
    if (!is_letter(c) && !is_digit(c) && c != '.' && c != '-') break;
    if (c == '.' && part == period) part = b;
  }
  if (b == period) return false;
  const std::string prefix(text_.substr(chars_[b].at, chars_[period].at - chars_[b].at));
  if (prefixes_.always.count(prefix)) return true;
  if (prefixes_.numeric_only.count(prefix) && is_digit(chars_[tokens_[next].first].cp)) return true;
  if (period - b == 1 && is_upper(chars_[b].cp)) return true;  // an initial: "J. R. R. Tolkien"
  // An acronym or abbreviation with periods inside whose last part is capitalised, as Moses
  // has it ("U.S.", "z.B.", "Ph.D."); not "example.com.", "v1.2." nor "p.m." before a capital.
  return part < period && is_upper(chars_[part].cp);
}

// Whether a sentence ends after word t (sentence_first: the word that began the sentence).
bool Paragraph::boundary_after(size_t t, size_t sentence_first) const {
  const size_t next = t + 1;
  if (next >= tokens_.size()) return false;
  size_t run;
  // Closers alone after the final punctuation belong to this sentence: decide after them.
  if (spaced_closers(next) && final_ender(t, end_before_closers(t), &run) != Ender::kNone)
    return false;
  size_t w = t;
  if (t > 0 && spaced_closers(t) &&
      final_ender(t - 1, end_before_closers(t - 1), &run) != Ender::kNone)
    w = t - 1;
  const size_t end = end_before_closers(w);
  const bool closed = w != t || end < tokens_[w].last;
  switch (final_ender(w, end, &run)) {
    case Ender::kNone:
      return false;
    case Ender::kCjk:
      return true;
    case Ender::kStrong:
    case Ender::kEllipsis:
      return starts_sentence(next);
    case Ender::kPeriod:
      // After closers Moses skips the prefix rules ("He said "Stop." Then").
      if (!starts_sentence(next)) return false;
      return closed || !period_exempt(w, run, next, w == sentence_first);
  }
  return false;
}

// Ends a sentence inside word t after each CJK full stop (and its closers) that more text
// follows without a space: "你好。我很好。".
void Paragraph::cut_inside(size_t t, size_t* begin, std::vector<SentenceSpan>* out) const {
  const size_t last = tokens_[t].last;
  for (size_t i = tokens_[t].first; i < last; ++i) {
    if (ender_of(chars_[i].cp) != Ender::kCjk) continue;
    size_t j = i + 1;
    while (j < last && ender_of(chars_[j].cp) != Ender::kNone) ++j;
    while (j < last && is_closer(chars_[j].cp)) ++j;
    if (j == last) return;
    out->push_back({*begin, chars_[j].at});
    *begin = chars_[j].at;
    i = j - 1;
  }
}

std::vector<SentenceSpan> Paragraph::split() {
  std::vector<SentenceSpan> out;
  if (tokens_.empty()) return out;
  size_t begin = chars_[tokens_[0].first].at, sentence_first = 0;
  for (size_t t = 0; t < tokens_.size(); ++t) {
    cut_inside(t, &begin, &out);
    if (t + 1 == tokens_.size() || boundary_after(t, sentence_first)) {
      out.push_back({begin, byte_of(tokens_[t].last)});
      if (t + 1 < tokens_.size()) begin = chars_[tokens_[t + 1].first].at;
      sentence_first = t + 1;
    }
  }
  return out;
}

}  // namespace

NonbreakingPrefixes parse_nonbreaking_prefixes(std::string_view text) {
  static constexpr std::string_view kNumericOnly = "#NUMERIC_ONLY#";
  NonbreakingPrefixes out;
  for (size_t start = 0; start < text.size();) {
    const size_t newline = std::min(text.find('\n', start), text.size());
    std::string line = trim(text.substr(start, newline - start));
    start = newline + 1;
    if (line.empty() || line[0] == '#') continue;
    const size_t marker = line.find(kNumericOnly);
    if (marker == std::string::npos) {
      out.numeric_only.erase(line);
      out.always.insert(std::move(line));
      continue;
    }
    std::string word = trim(std::string_view(line).substr(0, marker));
    if (word.empty()) continue;
    out.always.erase(word);
    out.numeric_only.insert(std::move(word));
  }
  return out;
}

const NonbreakingPrefixes& nonbreaking_prefixes(const std::string& language) {
  static const NonbreakingPrefixes kNone;
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<const NonbreakingPrefixes>> parsed;
  std::string code;  // "en-GB", "EN" -> "en"
  for (const char c : language) {
    if (c == '-' || c == '_') break;
    code += c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  }
  const std::string_view text = builtin_nonbreaking_prefixes(code);
  if (text.empty()) return kNone;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& list = parsed[code];
  if (!list) list = std::make_unique<const NonbreakingPrefixes>(parse_nonbreaking_prefixes(text));
  return *list;
}

SentenceSplitter::SentenceSplitter(const std::string& language)
    : prefixes_(nonbreaking_prefixes(language)) {}

SentenceSplitter::SentenceSplitter(NonbreakingPrefixes prefixes) : prefixes_(std::move(prefixes)) {}

std::vector<SentenceSpan> SentenceSplitter::split(std::string_view paragraph) const {
  return Paragraph(paragraph, prefixes_).split();
}

}  // namespace nmt
