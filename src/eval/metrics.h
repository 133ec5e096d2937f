// Corpus BLEU and chrF that reproduce sacreBLEU's default scores exactly. No LibTorch: the
// standard library and util's UTF-8 helpers only.
//
// Inputs are UTF-8 lines, one reference per hypothesis. Text is handled as Unicode code points
// with Python's str semantics (what sacreBLEU sees): whitespace is the set str.split() splits on
// (U+0085, U+00A0, U+3000 and friends included), digits in the 13a rules are ASCII 0-9 only.
// Bytes that are not valid UTF-8 never throw: each becomes a character of its own, as Python's
// errors="surrogateescape" would decode it.
//
// Where sacreBLEU refuses the input we still return a score: an empty reference line counts as a
// reference with no tokens (sacreBLEU raises "Empty or `None` reference sentence found"), and an
// empty corpus scores BLEU 0 (bp 1) and chrF 0 (sacreBLEU raises IndexError).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nmt {

// The sacreBLEU release these results were checked against (a Python reconstruction of it scored
// thousands of random and real corpora identically); it is the signatures' version field.
inline constexpr const char* kSacrebleuVersion = "2.3.1";

// sacreBLEU's default BLEU tokenization of one line: rstrip(), then mteval-v13a rules (drop
// <skipped>, unescape &quot; &amp; &lt; &gt;, split off punctuation, split . and , unless between
// digits, split - after a digit). Tokens are joined by single spaces.
std::string tokenize_13a(const std::string& line);

struct BleuResult {
  double score = 0.0;              // 0..100
  std::vector<int64_t> counts;     // clipped n-gram matches for n = 1..4
  std::vector<int64_t> totals;     // hypothesis n-grams for n = 1..4
  std::vector<double> precisions;  // percent, smoothed as sacreBLEU reports them (0 when unused)
  double bp = 1.0;                 // brevity penalty from the summed lengths
  int64_t sys_len = 0;             // hypothesis tokens, summed over the corpus
  int64_t ref_len = 0;             // reference tokens, summed over the corpus
};

// Python's str.lower() of a UTF-8 line (what sacreBLEU -lc applies before tokenizing): the
// Unicode simple lowercase mapping, and U+0130 to "i" + U+0307 as Python does. Greek final sigma
// is not contextual here (Python writes U+03C2 at a word end). Invalid bytes stay as they are.
std::string lowercase(const std::string& line);

// Corpus BLEU: tok 13a, mixed case (or with `lowercase` sacreBLEU's -lc), max order 4, exp
// smoothing, statistics summed over sentences before the precisions and brevity penalty are taken.
// Throws std::invalid_argument when hyps and refs differ in length.
BleuResult corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                       bool lowercase = false);

struct ChrfResult {
  double score = 0.0;  // 0..100
};

// Corpus chrF2: character n-grams 1..6 with whitespace removed, no word n-grams, beta 2,
// statistics summed over sentences, then averaged over the orders both sides have (eff:yes).
// Throws std::invalid_argument when hyps and refs differ in length.
ChrfResult corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::string>& refs);

// The same scores a line pair at a time, for inputs that are streamed: the statistics are
// summed over sentences, so adding every pair in order gives corpus_bleu's and corpus_chrf's
// results exactly.
class BleuStats {
 public:
  explicit BleuStats(bool lowercase = false);
  void add(const std::string& hyp, const std::string& ref);
  BleuResult result() const;

 private:
  bool lowercase_;
  BleuResult r_;
};

class ChrfStats {
 public:
  ChrfStats();
  void add(const std::string& hyp, const std::string& ref);
  ChrfResult result() const;

 private:
  std::vector<int64_t> hyp_total_, ref_total_, match_;
};

// sacreBLEU 2.x signatures of the two configurations above.
// nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:X (case:lc with lowercase)
std::string bleu_signature(bool lowercase = false);
std::string chrf_signature();  // nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:X

}  // namespace nmt
