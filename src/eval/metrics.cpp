// sacreBLEU-exact corpus BLEU and chrF. The rules and the order of floating-point operations
// follow sacreBLEU 2.x (metrics/bleu.py, metrics/chrf.py, tokenizers/tokenizer_13a.py) so that
// scores agree to the last bit, not just to the printed decimals.
#include "eval/metrics.h"

#include <locale.h>
#include <wctype.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "util/util.h"

namespace nmt {
namespace {

using Text = std::u32string;

constexpr int kBleuOrder = 4;
constexpr int kChrfOrder = 6;
constexpr int kChrfBeta = 2;
// Invalid byte b decodes to U+DC00 + b, Python's surrogateescape: distinct bytes stay distinct.
constexpr char32_t kEscapeBase = 0xDC00;

// Strict UTF-8, with each byte that does not start a valid sequence escaped as Python's
// surrogateescape does, so distinct bad bytes stay distinct characters.
Text decode_text(const std::string& s) { return decode_utf8(s, true); }

// Inverse of decode_text: escaped bytes are written back unchanged.
std::string encode_utf8(const Text& t) {
  std::string out;
  out.reserve(t.size());
  for (const char32_t c : t) {
    if (c >= kEscapeBase + 0x80 && c <= kEscapeBase + 0xFF)
      out.push_back(static_cast<char>(c - kEscapeBase));
    else
      append_utf8(out, c);
  }
  return out;
}

// Python's str.isspace() (also what str.split(), str.rstrip() and re's \s use): control
// separators 0x1C-0x1F count, zero-width space U+200B does not.
bool is_space(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_digit(char32_t c) { return c >= U'0' && c <= U'9'; }  // re's [0-9]: ASCII only
bool is_dot_or_comma(char32_t c) { return c == U'.' || c == U','; }

// The 13a punctuation class [\{-\~\[-\` -\&\(-\+\:-\@\/]: ASCII punctuation and space except
// ' , - . (those have rules of their own or stay attached).
bool is_13a_punct(char32_t c) {
  return (c >= U'{' && c <= U'~') || (c >= U'[' && c <= U'`') || (c >= U' ' && c <= U'&') ||
         (c >= U'(' && c <= U'+') || (c >= U':' && c <= U'@') || c == U'/';
}

std::vector<Text> split_whitespace(const Text& s) {
  std::vector<Text> out;
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    while (i < n && is_space(s[i])) ++i;
    const size_t start = i;
    while (i < n && !is_space(s[i])) ++i;
    if (i > start) out.emplace_back(s, start, i - start);
  }
  return out;
}

// Python str.replace: left to right, non-overlapping, replaced text is not rescanned.
void replace_all(Text& s, const Text& from, const Text& to) {
  if (s.find(from) == Text::npos) return;
  Text out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit = s.find(from); hit != Text::npos; hit = s.find(from, pos)) {
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
  }
  out.append(s, pos, Text::npos);
  s.swap(out);
}

// One re.sub pass of a two-character pattern: leftmost matches, resuming after each match, which
// is why "a.." splits the first '.' here but leaves the second for the next rule. A match "xy"
// becomes "x y " (replacement \1 \2 ) or, with lead_space, " x y" ( \1 \2).
template <typename Match>
Text sub_pairs(const Text& s, Match match, bool lead_space) {
  Text out;
  out.reserve(s.size() + s.size() / 2);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && match(s[i], s[i + 1])) {
      if (lead_space) out.push_back(U' ');
      out.push_back(s[i]);
      out.push_back(U' ');
      out.push_back(s[i + 1]);
      if (!lead_space) out.push_back(U' ');
      i += 2;
    } else {
      out.push_back(s[i]);
      ++i;
    }
  }
  return out;
}

// Tokens joined by single spaces: every word n-gram is then a contiguous slice of the result.
Text tokenize_13a_text(const std::string& line) {
  Text s = decode_text(line);
  // BLEU's preprocessing strips trailing whitespace before the tokenizer sees the line.
  size_t end = s.size();
  while (end > 0 && is_space(s[end - 1])) --end;
  s.resize(end);

  replace_all(s, U"<skipped>", U"");
  replace_all(s, U"-\n", U"");
  replace_all(s, U"\n", U" ");
  // Sequential, like mteval: "&amp;lt;" becomes "<" but "&amp;quot;" stays "&quot;".
  replace_all(s, U"&quot;", U"\"");
  replace_all(s, U"&amp;", U"&");
  replace_all(s, U"&lt;", U"<");
  replace_all(s, U"&gt;", U">");

  // Padding lets the pair rules see a neighbour at both ends of the line.
  Text padded;
  padded.reserve(s.size() * 2 + 2);
  padded.push_back(U' ');
  for (const char32_t c : s) {
    if (is_13a_punct(c)) {
      padded.push_back(U' ');
      padded.push_back(c);
      padded.push_back(U' ');
    } else {
      padded.push_back(c);
    }
  }
  padded.push_back(U' ');

  // Period and comma split off unless preceded by a digit...
  Text t = sub_pairs(
      padded, [](char32_t a, char32_t b) { return !is_digit(a) && is_dot_or_comma(b); }, false);
  // ...or unless followed by one, so "3.5" and "1,000" survive but "end." does not.
  t = sub_pairs(
      t, [](char32_t a, char32_t b) { return is_dot_or_comma(a) && !is_digit(b); }, true);
  // A dash after a digit splits ("5-6" -> "5 - 6"); other dashes stay inside words.
  t = sub_pairs(
      t, [](char32_t a, char32_t b) { return is_digit(a) && b == U'-'; }, false);

  Text joined;
  joined.reserve(t.size());
  for (const Text& tok : split_whitespace(t)) {
    if (!joined.empty()) joined.push_back(U' ');
    joined += tok;
  }
  return joined;
}

void check_sizes(const char* fn, const std::vector<std::string>& hyps,
                 const std::vector<std::string>& refs) {
  if (hyps.size() == refs.size()) return;
  throw std::invalid_argument(std::string(fn) + ": " + std::to_string(hyps.size()) +
                              " hypotheses but " + std::to_string(refs.size()) +
                              " references; each hypothesis needs exactly one reference line");
}

// Keys are views into the text being counted, which outlives the map.
using NgramCounts = std::unordered_map<std::u32string_view, int64_t>;

// All word n-grams of orders 1..4 of a tokenized line. Tokens hold no whitespace and are joined
// by single spaces, so the slice from the start of token i to the end of token i+n-1 identifies
// the n-gram, and its order is one more than its number of spaces.
NgramCounts word_ngrams(const Text& joined) {
  std::vector<size_t> starts, ends;
  for (size_t i = 0; i < joined.size(); ++i) {
    if (i == 0 || joined[i - 1] == U' ') starts.push_back(i);
    if (i + 1 == joined.size() || joined[i + 1] == U' ') ends.push_back(i + 1);
  }
  NgramCounts counts;
  counts.reserve(starts.size() * kBleuOrder);
  const std::u32string_view text(joined);
  for (size_t i = 0; i < starts.size(); ++i) {
    for (size_t n = 1; n <= kBleuOrder && i + n <= starts.size(); ++n) {
      ++counts[text.substr(starts[i], ends[i + n - 1] - starts[i])];
    }
  }
  return counts;
}

int64_t count_tokens(const Text& joined) {
  return joined.empty() ? 0 : 1 + std::count(joined.begin(), joined.end(), U' ');
}

int ngram_order(std::u32string_view key) {
  return 1 + static_cast<int>(std::count(key.begin(), key.end(), U' '));
}

// sacreBLEU's my_log: log(0) is floored instead of -inf, so the mean stays finite.
double floored_log(double x) { return x == 0.0 ? -9999999999.0 : std::log(x); }

}  // namespace

std::string tokenize_13a(const std::string& line) { return encode_utf8(tokenize_13a_text(line)); }

std::string lowercase(const std::string& line) {
  // glibc's C.UTF-8 carries the full Unicode simple case mappings, independent of the user's
  // locale settings.
  static const locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  if (utf8 == static_cast<locale_t>(nullptr))
    throw Error("lowercasing needs the C.UTF-8 locale, which this system lacks");
  std::string out;
  out.reserve(line.size());
  for (char32_t c : decode_utf8(line, /*escape_invalid=*/true)) {
    if (c >= 0xDC80 && c <= 0xDCFF) {  // an invalid byte, kept as it was
      out.push_back(static_cast<char>(c - 0xDC00));
    } else if (c == 0x130) {  // LATIN CAPITAL LETTER I WITH DOT ABOVE: Python's special case
      append_utf8(out, U'i');
      append_utf8(out, 0x307);
    } else {
      append_utf8(out, static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), utf8)));
    }
  }
  return out;
}

BleuStats::BleuStats(bool lowercase) : lowercase_(lowercase) {
  r_.counts.assign(kBleuOrder, 0);
  r_.totals.assign(kBleuOrder, 0);
  r_.precisions.assign(kBleuOrder, 0.0);
}

void BleuStats::add(const std::string& hyp_line, const std::string& ref_line) {
  const Text hyp = tokenize_13a_text(lowercase_ ? nmt::lowercase(hyp_line) : hyp_line);
  const Text ref = tokenize_13a_text(lowercase_ ? nmt::lowercase(ref_line) : ref_line);
  const NgramCounts hyp_counts = word_ngrams(hyp);
  const NgramCounts ref_counts = word_ngrams(ref);
  r_.sys_len += count_tokens(hyp);
  r_.ref_len += count_tokens(ref);
  for (const auto& [ngram, count] : hyp_counts) {
    const int n = ngram_order(ngram) - 1;
    r_.totals[n] += count;
    const auto it = ref_counts.find(ngram);
    if (it != ref_counts.end()) r_.counts[n] += std::min(count, it->second);
  }
}

BleuResult BleuStats::result() const {
  BleuResult r = r_;
  // Operations below mirror sacreBLEU's compute_bleu() so that the doubles come out identical.
  if (r.sys_len < r.ref_len) {
    r.bp = r.sys_len > 0
               ? std::exp(1.0 - static_cast<double>(r.ref_len) / static_cast<double>(r.sys_len))
               : 0.0;
  }
  // No match at any order: score 0 without smoothing (sacreBLEU issue #141).
  if (std::all_of(r.counts.begin(), r.counts.end(), [](int64_t c) { return c == 0; })) return r;

  double smooth = 1.0;
  for (int n = 0; n < kBleuOrder; ++n) {
    // An order with no hypothesis n-grams ends the loop; its precision stays 0, whose floored
    // log then drives the score to 0 (eff:no keeps all four orders in the mean).
    if (r.totals[n] == 0) break;
    const auto total = static_cast<double>(r.totals[n]);
    if (r.counts[n] == 0) {
      // exp smoothing: the k-th order without matches gets 1 / (2^k * total).
      smooth *= 2.0;
      r.precisions[n] = 100.0 / (smooth * total);
    } else {
      r.precisions[n] = 100.0 * static_cast<double>(r.counts[n]) / total;
    }
  }
  double log_sum = 0.0;
  for (const double p : r.precisions) log_sum += floored_log(p);
  r.score = r.bp * std::exp(log_sum / kBleuOrder);
  return r;
}

BleuResult corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                       bool lowercase) {
  check_sizes("corpus_bleu", hyps, refs);
  BleuStats stats(lowercase);
  for (size_t i = 0; i < hyps.size(); ++i) stats.add(hyps[i], refs[i]);
  return stats.result();
}

ChrfStats::ChrfStats()
    : hyp_total_(kChrfOrder, 0), ref_total_(kChrfOrder, 0), match_(kChrfOrder, 0) {}

void ChrfStats::add(const std::string& hyp_line, const std::string& ref_line) {
  auto strip_spaces = [](const std::string& line) {
    Text t = decode_text(line);
    t.erase(std::remove_if(t.begin(), t.end(), is_space), t.end());
    return t;
  };
  const Text hyp = strip_spaces(hyp_line);
  const Text ref = strip_spaces(ref_line);
  NgramCounts hyp_ngrams, ref_ngrams;
  for (int n = 1; n <= kChrfOrder; ++n) {
    const auto hyp_count =
        static_cast<int64_t>(hyp.size() >= static_cast<size_t>(n) ? hyp.size() - n + 1 : 0);
    const auto ref_count =
        static_cast<int64_t>(ref.size() >= static_cast<size_t>(n) ? ref.size() - n + 1 : 0);
    // sacreBLEU counts hypothesis n-grams only where the reference has n-grams of that order,
    // so a reference shorter than n characters leaves the precision of order n untouched.
    if (ref_count == 0) continue;
    ref_ngrams.clear();
    for (int64_t k = 0; k < ref_count; ++k) ++ref_ngrams[std::u32string_view(ref).substr(k, n)];
    hyp_ngrams.clear();
    for (int64_t k = 0; k < hyp_count; ++k) ++hyp_ngrams[std::u32string_view(hyp).substr(k, n)];
    int64_t matched = 0;
    for (const auto& [ngram, count] : hyp_ngrams) {
      const auto it = ref_ngrams.find(ngram);
      if (it != ref_ngrams.end()) matched += std::min(count, it->second);
    }
    hyp_total_[n - 1] += hyp_count;
    ref_total_[n - 1] += ref_count;
    match_[n - 1] += matched;
  }
}

ChrfResult ChrfStats::result() const {
  // Effective order: average precision and recall over the orders where both sides have n-grams.
  double avg_prec = 0.0, avg_rec = 0.0;
  int effective_order = 0;
  for (int n = 0; n < kChrfOrder; ++n) {
    if (hyp_total_[n] > 0 && ref_total_[n] > 0) {
      avg_prec += static_cast<double>(match_[n]) / static_cast<double>(hyp_total_[n]);
      avg_rec += static_cast<double>(match_[n]) / static_cast<double>(ref_total_[n]);
      ++effective_order;
    }
  }
  ChrfResult r;
  if (effective_order == 0) return r;
  avg_prec /= effective_order;
  avg_rec /= effective_order;
  if (avg_prec + avg_rec == 0.0) return r;
  const double factor = kChrfBeta * kChrfBeta;
  double f = (1.0 + factor) * avg_prec * avg_rec;
  f /= factor * avg_prec + avg_rec;
  r.score = 100.0 * f;
  return r;
}

ChrfResult corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  check_sizes("corpus_chrf", hyps, refs);
  ChrfStats stats;
  for (size_t i = 0; i < hyps.size(); ++i) stats.add(hyps[i], refs[i]);
  return stats.result();
}

std::string bleu_signature(bool lowercase) {
  return std::string("nrefs:1|case:") + (lowercase ? "lc" : "mixed") +
         "|eff:no|tok:13a|smooth:exp|version:" + kSacrebleuVersion;
}

std::string chrf_signature() {
  return std::string("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:") + kSacrebleuVersion;
}

}  // namespace nmt
