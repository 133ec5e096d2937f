// Tests for eval/metrics: hand-computed cases from the published definitions (Papineni et al.
// BLEU with brevity penalty, mteval-v13a tokenization, NIST/exp smoothing as in sacreBLEU and
// Chen & Cherry 2014 method 3, Popović chrF with beta = 2), then a table of tricky corpora whose
// expected values come from sacreBLEU 2.3.1 itself.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "eval/metrics.h"

using namespace nmt;

namespace {

using Lines = std::vector<std::string>;

double bleu(const Lines& hyps, const Lines& refs) { return corpus_bleu(hyps, refs).score; }
double chrf(const Lines& hyps, const Lines& refs) { return corpus_chrf(hyps, refs).score; }

}  // namespace

TEST(Bleu, PerfectMatchIs100) {
  // 6 tokens: precisions 6/6, 5/5, 4/4, 3/3 and equal lengths, so BP = 1 and BLEU = 100.
  const auto r = corpus_bleu({"the cat sat on the mat"}, {"the cat sat on the mat"});
  EXPECT_NEAR(r.score, 100.0, 1e-12);
  EXPECT_EQ(r.counts, (std::vector<int64_t>{6, 5, 4, 3}));
  EXPECT_EQ(r.totals, (std::vector<int64_t>{6, 5, 4, 3}));
  EXPECT_EQ(r.bp, 1.0);
  EXPECT_EQ(r.sys_len, 6);
  EXPECT_EQ(r.ref_len, 6);
}

TEST(Bleu, EmptyHypothesisScoresZero) {
  // No hypothesis tokens: every precision is 0/0 and BP = 0 (sys_len 0 < ref_len 4).
  const auto r = corpus_bleu({""}, {"a b c d"});
  EXPECT_EQ(r.score, 0.0);
  EXPECT_EQ(r.bp, 0.0);
  EXPECT_EQ(r.sys_len, 0);
  EXPECT_EQ(r.ref_len, 4);
  EXPECT_EQ(r.totals, (std::vector<int64_t>{0, 0, 0, 0}));
}

TEST(Bleu, EmptyCorpusScoresZero) {
  // Nothing to count: BLEU 0, BP 1 (0 < 0 is false), four zero entries in every vector.
  const auto r = corpus_bleu({}, {});
  EXPECT_EQ(r.score, 0.0);
  EXPECT_EQ(r.bp, 1.0);
  EXPECT_EQ(r.sys_len, 0);
  EXPECT_EQ(r.ref_len, 0);
  EXPECT_EQ(r.counts, (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(r.precisions, (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(chrf({}, {}), 0.0);
}

TEST(Bleu, NoMatchAtAnyOrderIsZeroWithoutSmoothing) {
  const auto r = corpus_bleu({"a b"}, {"c d"});
  EXPECT_EQ(r.score, 0.0);
  EXPECT_EQ(r.totals, (std::vector<int64_t>{2, 1, 0, 0}));
  EXPECT_EQ(r.precisions, (std::vector<double>{0, 0, 0, 0}));
}

TEST(Bleu, ExpSmoothingForZeroMatchesAtOrders3And4) {
  // hyp a b c d e / ref a b x d e. Matches: 1-grams a b d e = 4/5, 2-grams "a b" "d e" = 2/4,
  // 3-grams 0/3, 4-grams 0/2. exp smoothing: the k-th zero order gets 1 / (2^k * total):
  // p3 = 100 / (2 * 3) = 16.6667, p4 = 100 / (4 * 2) = 12.5.
  // BLEU = (80 * 50 * 16.6667 * 12.5)^(1/4) = 833333.33^(1/4) = 30.213754.
  const auto r = corpus_bleu({"a b c d e"}, {"a b x d e"});
  EXPECT_EQ(r.counts, (std::vector<int64_t>{4, 2, 0, 0}));
  EXPECT_EQ(r.totals, (std::vector<int64_t>{5, 4, 3, 2}));
  EXPECT_NEAR(r.precisions[0], 80.0, 1e-12);
  EXPECT_NEAR(r.precisions[1], 50.0, 1e-12);
  EXPECT_NEAR(r.precisions[2], 100.0 / 6.0, 1e-12);
  EXPECT_NEAR(r.precisions[3], 12.5, 1e-12);
  EXPECT_NEAR(r.score, std::pow(80.0 * 50.0 * (100.0 / 6.0) * 12.5, 0.25), 1e-9);
  EXPECT_NEAR(r.score, 30.213754, 1e-6);
}

TEST(Bleu, NoFourGramsAtAllScoresZero) {
  // Three tokens give no 4-gram, so p4 stays 0 and (eff:no) the geometric mean is 0,
  // even though everything that exists matches.
  const auto r = corpus_bleu({"a b c"}, {"a b c"});
  EXPECT_EQ(r.totals, (std::vector<int64_t>{3, 2, 1, 0}));
  EXPECT_EQ(r.score, 0.0);
}

TEST(Bleu, HypothesisLongerThanReferenceHasNoPenalty) {
  // 7 vs 6 tokens, BP = 1. Precisions 6/7, 5/6, 4/5, 3/4 ("the" clipped to its 2 ref uses):
  // the product telescopes to 3/7, BLEU = 100 * (3/7)^(1/4) = 80.910671.
  const auto r = corpus_bleu({"the cat sat on the mat today"}, {"the cat sat on the mat"});
  EXPECT_EQ(r.bp, 1.0);
  EXPECT_EQ(r.counts, (std::vector<int64_t>{6, 5, 4, 3}));
  EXPECT_EQ(r.totals, (std::vector<int64_t>{7, 6, 5, 4}));
  EXPECT_NEAR(r.score, 100.0 * std::pow(3.0 / 7.0, 0.25), 1e-9);
  EXPECT_NEAR(r.score, 80.910671, 1e-6);
}

TEST(Bleu, HypothesisShorterThanReferenceIsPenalised) {
  // 5 vs 6 tokens, all n-grams match: BLEU = BP = exp(1 - 6/5) = exp(-0.2) = 0.818731.
  const auto r = corpus_bleu({"the cat sat on the"}, {"the cat sat on the mat"});
  EXPECT_NEAR(r.bp, std::exp(-0.2), 1e-15);
  EXPECT_NEAR(r.score, 100.0 * std::exp(-0.2), 1e-9);
  EXPECT_NEAR(r.score, 81.873075, 1e-6);
}

TEST(Bleu, StatisticsAreSummedOverTheCorpus) {
  // Line 1 matches fully (4 tokens), line 2 "x" vs "y z" matches nothing. Summed: sys 5, ref 6,
  // precisions 4/5, 3/3, 2/2, 1/1, BP = exp(1 - 6/5).
  // BLEU = exp(-0.2) * (0.8)^(1/4) * 100 = 0.818731 * 0.945742 * 100 = 77.430774.
  const auto r = corpus_bleu({"a b c d", "x"}, {"a b c d", "y z"});
  EXPECT_EQ(r.sys_len, 5);
  EXPECT_EQ(r.ref_len, 6);
  EXPECT_NEAR(r.score, 100.0 * std::exp(-0.2) * std::pow(0.8, 0.25), 1e-9);
  EXPECT_NEAR(r.score, 77.430774, 1e-6);
}

TEST(Bleu, ClippingCountsEachReferenceWordOnce) {
  // Papineni et al.'s example: "the" x7 against a reference with two "the": p1 = 2/7.
  const auto r = corpus_bleu({"the the the the the the the"}, {"the cat is on the mat"});
  EXPECT_EQ(r.counts[0], 2);
  EXPECT_EQ(r.totals[0], 7);
  EXPECT_NEAR(r.precisions[0], 100.0 * 2.0 / 7.0, 1e-12);
}

TEST(Bleu, DetokenizedAndTokenizedTextScoreTheSame) {
  // 13a splits "bike." and "kids," itself, so pre-tokenized output matches detokenized refs.
  EXPECT_NEAR(bleu({"A man is riding a bike ."}, {"A man is riding a bike."}), 100.0, 1e-12);
}

TEST(Bleu, CaseMatters) {
  // Mixed case: "The" and "the" are different tokens, so nothing matches.
  EXPECT_EQ(bleu({"The Cat"}, {"the cat"}), 0.0);
}

TEST(Bleu, LowercasedScoresAsSacrebleuLc) {
  // -lc: "The Cat" and "the cat" are the same tokens, so everything matches.
  EXPECT_NEAR(corpus_bleu({"The Cat sat on the Mat ."}, {"the cat sat on the mat."}, true).score,
              100.0, 1e-12);
  EXPECT_EQ(bleu_signature(true),
            std::string("nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|version:") + kSacrebleuVersion);
  // Lowercasing both sides first is the same computation.
  const Lines hyps = {"Ein MANN fährt Rad.", "Zwei Hunde"},
              refs = {"Ein Mann fährt ein Rad.", "zwei Hunde rennen"};
  const BleuResult lc = corpus_bleu(hyps, refs, true);
  const BleuResult pre = corpus_bleu({lowercase(hyps[0]), lowercase(hyps[1])},
                                     {lowercase(refs[0]), lowercase(refs[1])});
  EXPECT_EQ(lc.score, pre.score);
  EXPECT_EQ(lc.counts, pre.counts);
  EXPECT_GT(lc.score, corpus_bleu(hyps, refs).score);
}

TEST(Lowercase, FollowsPythonStrLower) {
  // Values from Python 3: "...".lower().
  EXPECT_EQ(lowercase("ÄÖÜ ẞ Straße"), "äöü ß straße");
  EXPECT_EQ(lowercase("ÉCOLE À ÇA Œuvre Ÿ"), "école à ça œuvre ÿ");
  EXPECT_EQ(lowercase("ΑΒΓ АБВ Ё"), "αβγ абв ё");
  EXPECT_EQ(lowercase("İ"), "i\u0307");  // the one two-code-point case in these scripts
  EXPECT_EQ(lowercase("ＡＢ 123 ?!"), "ａｂ 123 ?!");
  // Invalid bytes pass through unchanged.
  EXPECT_EQ(lowercase(std::string("A\xff\xc3"
                                  "B")),
            std::string("a\xff\xc3"
                        "b"));
}

TEST(Bleu, MismatchedLengthsThrow) {
  EXPECT_THROW(corpus_bleu({"a"}, {}), std::invalid_argument);
  EXPECT_THROW(corpus_bleu({"a", "b"}, {"a"}), std::invalid_argument);
  EXPECT_THROW(corpus_chrf({"a"}, {"a", "b"}), std::invalid_argument);
  try {
    corpus_bleu({"a", "b"}, {"a"});
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("2 hypotheses but 1 references"), std::string::npos);
  }
}

TEST(Tokenize13a, SplitsAsciiPunctuation) {
  EXPECT_EQ(tokenize_13a("Hello, world!"), "Hello , world !");
  EXPECT_EQ(tokenize_13a("A(b)[c]{d} $5 @home #1 50% a/b x_y"),
            "A ( b ) [ c ] { d } $ 5 @ home # 1 50 % a / b x _ y");
  // Apostrophes and in-word hyphens are not in the 13a class and stay attached.
  EXPECT_EQ(tokenize_13a("don't e-mail 'quoted'"), "don't e-mail 'quoted'");
}

TEST(Tokenize13a, PeriodsAndCommasBetweenDigitsStay) {
  // "3.5" and "1,000" keep their separators (digit on both sides); "dollars," and the
  // sentence-final "cents." split; "2020." splits because the period is followed by a space.
  EXPECT_EQ(tokenize_13a("It costs 3.5 dollars, or 1,000 cents."),
            "It costs 3.5 dollars , or 1,000 cents .");
  EXPECT_EQ(tokenize_13a("in 2020."), "in 2020 .");
  EXPECT_EQ(tokenize_13a("3.5."), "3.5 .");
  // A dash splits only after a digit.
  EXPECT_EQ(tokenize_13a("5-6 e-mail -5"), "5 - 6 e-mail -5");
  // Each rule is one left-to-right pass: in "a..b" the first pair "a." is consumed, so the
  // second '.' is only split off by the next rule.
  EXPECT_EQ(tokenize_13a("a..b"), "a . . b");
}

TEST(Tokenize13a, UnicodePunctuationIsNotSplit) {
  // 13a only knows ASCII punctuation: „ “ – … stay glued to their words.
  EXPECT_EQ(tokenize_13a("„Das ist’s“, sagte er – „nein…“"), "„Das ist’s“ , sagte er – „nein…“");
  EXPECT_EQ(tokenize_13a("„Haus.“"), "„Haus . “");
}

TEST(Tokenize13a, UnescapesEntitiesInOrder) {
  EXPECT_EQ(tokenize_13a("He said &quot;hi&quot; &amp; left"), "He said \" hi \" & left");
  // &amp; is undone after &quot; but before &lt;: "&amp;lt;" becomes "<", "&amp;quot;" stays.
  EXPECT_EQ(tokenize_13a("a &amp;lt; b"), "a < b");
  EXPECT_EQ(tokenize_13a("x &amp;quot; y"), "x & quot ; y");
  EXPECT_EQ(tokenize_13a("x<skipped>y"), "xy");
}

TEST(Tokenize13a, WhitespaceFollowsPythonStrSplit) {
  // U+00A0, U+3000 and the 0x1C..0x1F separators split tokens; U+200B does not.
  EXPECT_EQ(tokenize_13a("a\u00a0b\u200bc\u3000d\x1c"
                         "e"),
            "a b\u200bc d e");
  EXPECT_EQ(tokenize_13a("  \tpadded \u3000 "), "padded");
  // The line is rstripped before the tokenizer sees it, so a trailing "-\n" keeps its dash;
  // inside the line "-\n" joins the two halves of a word.
  EXPECT_EQ(tokenize_13a("end-\n"), "end-");
  EXPECT_EQ(tokenize_13a("wrap-\nped\nline"), "wrapped line");
  EXPECT_EQ(tokenize_13a(""), "");
}

TEST(Tokenize13a, InvalidUtf8BytesPassThrough) {
  // Each invalid byte is a character of its own and comes back unchanged.
  EXPECT_EQ(tokenize_13a("caf\xc3 (x)\xff"), "caf\xc3 ( x ) \xff");
  EXPECT_EQ(tokenize_13a("\xed\xa0\x80,a"), "\xed\xa0\x80 , a");
}

TEST(Chrf, PerfectMatchIs100) {
  EXPECT_NEAR(chrf({"the cat sat on the mat"}, {"the cat sat on the mat"}), 100.0, 1e-12);
}

TEST(Chrf, SimplePairByHand) {
  // hyp "ab", ref "abc". Order 1: P 2/2, R 2/3. Order 2: P 1/1 ("ab"), R 1/2.
  // Order 3: the hyp has none, orders 4-6: neither side has any -> averaged over 2 orders:
  // P = 1, R = (2/3 + 1/2) / 2 = 7/12. F2 = 5PR / (4P + R) = (35/12) / (55/12) = 7/11.
  EXPECT_NEAR(chrf({"ab"}, {"abc"}), 700.0 / 11.0, 1e-9);
  EXPECT_NEAR(chrf({"ab"}, {"abc"}), 63.636364, 1e-6);
  // Whitespace is removed before counting, so "a b" vs "ab c" is the same pair.
  EXPECT_NEAR(chrf({"a b"}, {"ab c"}), 700.0 / 11.0, 1e-9);
}

TEST(Chrf, CountsCodePointsNotBytes) {
  // "Straße" (6 chars) vs "Strasse" (7). Matches per order: 5, 3, 2, 1, 0, 0 of hyp 6, 5, 4, 3,
  // 2, 1 and ref 7, 6, 5, 4, 3, 2 n-grams. P = (5/6 + 3/5 + 2/4 + 1/3) / 6 = 17/45,
  // R = (5/7 + 3/6 + 2/5 + 1/4) / 6 = 87/280, F2 = 5PR / (4P + R) = 7395 / 22955 = 0.322152.
  EXPECT_NEAR(chrf({"Straße"}, {"Strasse"}), 739500.0 / 22955.0, 1e-9);
  EXPECT_NEAR(chrf({"Straße"}, {"Strasse"}), 32.215204, 1e-6);
  // U+3000 is whitespace and removed like a space.
  EXPECT_NEAR(chrf({"ab\u3000c"}, {"abc"}), 100.0, 1e-12);
}

TEST(Chrf, ShortReferenceLeavesHigherOrdersOut) {
  // sacreBLEU counts hypothesis n-grams only for orders the reference has. hyp "abcdef",
  // ref "ab": order 1 P 2/6 R 2/2, order 2 P 1/5 R 1/1, orders 3-6 ignored.
  // P = (1/3 + 1/5) / 2 = 4/15, R = 1, F2 = 5 * 4/15 / (16/15 + 1) = 20/31 = 0.645161.
  EXPECT_NEAR(chrf({"abcdef"}, {"ab"}), 2000.0 / 31.0, 1e-9);
}

TEST(Chrf, EmptyHypothesisScoresZero) {
  EXPECT_EQ(chrf({""}, {"abc"}), 0.0);
  EXPECT_EQ(chrf({"abc"}, {""}), 0.0);
}

TEST(Metrics, EmptyReferenceCountsAsNoTokens) {
  // sacreBLEU refuses empty reference lines; here they are a reference of length 0.
  const auto r = corpus_bleu({"a b c d", "x y"}, {"a b c d", ""});
  EXPECT_EQ(r.ref_len, 4);
  EXPECT_EQ(r.sys_len, 6);
  EXPECT_EQ(r.counts, (std::vector<int64_t>{4, 3, 2, 1}));
  EXPECT_EQ(r.totals, (std::vector<int64_t>{6, 4, 2, 1}));
}

TEST(Metrics, Signatures) {
  EXPECT_EQ(bleu_signature(), std::string("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:") +
                                  kSacrebleuVersion);
  EXPECT_EQ(
      chrf_signature(),
      std::string("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:") + kSacrebleuVersion);
  EXPECT_STREQ(kSacrebleuVersion, "2.3.1");
}

namespace {

struct SacrebleuCase {
  const char* name;
  Lines hyps, refs;
  double bleu, chrf;
};

// Values from sacreBLEU 2.3.1 (corpus_bleu / corpus_chrf defaults, one reference stream),
// generated by gen_table.py next to the reconstructed sacreBLEU; invalid bytes were decoded
// with errors="surrogateescape".
const std::vector<SacrebleuCase>& sacrebleu_cases() {
  static const std::vector<SacrebleuCase> cases = {
      {"readme_example",
       {"The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."},
       {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
       45.0675063211,
       50.0430636066},
      {"numbers_and_punct",
       {"The price rose 3.5% to $1,000.50 on Jan. 5-6.", "In 1990-2000, -5 and 5- were seen.",
        "Call 555-1234, ext. 12."},
       {"The price rose by 3.5 % to $1,000.50 on Jan. 5-6.",
        "In 1990 - 2000 , -5 and 5- were seen.", "Call 555-1234 (ext. 12)."},
       78.7779880822,
       88.1012607532},
      {"german_unicode_punct",
       {"„Das ist’s“, sagte er – „nein…“", "Ein Mann fährt Fahrrad.",
        "Zwei Hunde spielen im Schnee."},
       {"„Das ist es“, sagte er — „nein…“", "Ein Mann fährt auf einem Fahrrad.",
        "Zwei Hunde spielen im Schnee."},
       47.4535632026,
       76.5884827793},
      {"tokenized_hyp_vs_detok_ref",
       {"A man is riding a bike .", "The kids , who are playing , laugh ."},
       {"A man is riding a bike.", "The kids, who are playing, laugh."},
       100.0000000000,
       100.0000000000},
      {"entities",
       {"&quot;Hi&quot; &amp; bye &lt;b&gt;", "x &amp;quot; y &amp;lt; z", "<skipped> kept"},
       {"\"Hi\" & bye <b>", "x &quot; y < z", "kept"},
       66.7788359069,
       26.6592674420},
      {"unicode_whitespace",
       {"a\302\240man\343\200\200is\342\200\211here\011now", "zero\342\200\213width joins",
        "sep\034arated\037by\302\205ctl"},
       {"a man is here now", "zero width joins", "sep arated by ctl"},
       86.2328074365,
       91.6288544261},
      {"all_lines_shorter_than_4",
       {"a b c", "d e", "f"},
       {"a b c", "d e", "f"},
       0.0000000000,
       100.0000000000},
      {"empty_hypotheses",
       {"", "the cat sat on the mat", ""},
       {"a b c d", "the cat sat on the mat", "x y"},
       36.7879441171,
       91.2084848344},
      {"no_4gram_matches",
       {"a b c x d e f y", "g h i z j k"},
       {"a b c d e f", "g h i j k"},
       30.4470821408,
       34.5481324529},
      {"hyp_longer",
       {"the cat sat on the mat today and yesterday", "a dog ran in the park at noon"},
       {"the cat sat on the mat", "a dog ran in the park"},
       63.0429557001,
       85.7895248080},
      {"cjk_no_spaces",
       {"我爱北京天安门。", "東京は大きい都市です"},
       {"我爱北京。", "東京は大きな都市です"},
       0.0000000000,
       46.4250304589},
      {"emoji_combining",
       {"I 👍🏽 this café", "cafe\314\201 ok 😀!"},
       {"I 👍 this café", "café ok 😀 !"},
       39.1271145018,
       59.4675750548},
      {"case_mismatch",
       {"The Cat Sat On The Mat", "HELLO world"},
       {"the cat sat on the mat", "hello world"},
       7.2168783649,
       20.5149508231},
      {"clipping_papineni",
       {"the the the the the the the"},
       {"the cat is on the mat"},
       7.8098498423,
       14.2324268482},
      {"leading_trailing_space",
       {"  \011the cat sat on the mat \011 ", "\343\200\200a dog\343\200\200"},
       {"the cat sat on the mat", "a dog"},
       100.0000000000,
       100.0000000000},
      {"whitespace_only_ref",
       {"something here", "the cat sat on the mat"},
       {" ", "the cat sat on the mat"},
       88.9139705019,
       100.0000000000},
      {"short_refs_chrf_quirk",
       {"abcdefgh", "xy", "hello world"},
       {"ab", "x", "hello"},
       0.0000000000,
       68.9940260294},
      {"invalid_utf8",
       {"caf\303 ok \377\376 bytes", "trunc \342\202 here \355\240\200"},
       {"caf\303 ok \377\376 bytes", "trunc \342\202 there \355\240\200"},
       61.7965458511,
       84.0211163557},
      {"dots_and_commas",
       {"a..b ,,c 3.5. 1,000, 1.,2 x.y.z", "...hi... ,.,"},
       {"a . . b , , c 3.5 . 1,000 ,", "hi ..."},
       43.8078039160,
       85.7887745655},
      {"multi30k_like",
       {"Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
        "Mehrere Männer mit Schutzhelmen bedienen ein Antriebsradsystem.",
        "Ein kleines Mädchen klettert in ein Spielhaus aus Holz.",
        "Ein Mann in einem blauen Hemd steht auf einer Leiter und putzt ein Fenster."},
       {"Ein Mann in einem blauen Hemd steht auf einer Leiter und putzt ein Fenster.",
        "Ein kleines Mädchen klettert in ein Spielhaus aus Holz.",
        "Mehrere Männer mit Schutzhelmen bedienen ein Antriebsradsystem.",
        "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche."},
       1.4959259442,
       15.8621389675},
      {"newlines_inside_line",
       {"wrap-\012ped line\012here and there now", "end-\012"},
       {"wrapped line here and there now", "end-"},
       100.0000000000,
       89.1223624695},
  };
  return cases;
}

}  // namespace

TEST(MetricsSacrebleuTable, MatchesSacrebleu) {
  for (const auto& c : sacrebleu_cases()) {
    SCOPED_TRACE(c.name);
    EXPECT_NEAR(bleu(c.hyps, c.refs), c.bleu, 1e-8);
    EXPECT_NEAR(chrf(c.hyps, c.refs), c.chrf, 1e-8);
  }
}
