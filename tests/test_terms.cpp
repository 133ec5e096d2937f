// Terminology and alignments: the pure steps on hand-made cases, constrained and avoiding search
// on small random models, and translate --constraints / --avoid / --alignment on the shared
// quickstart model.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "decode/alignment.h"
#include "decode/search.h"
#include "decode/terms.h"
#include "search_helpers.h"
#include "helpers.h"
#include "model/transformer.h"
#include "model_helpers.h"
#include "quickstart_run.h"
#include "util/util.h"

using namespace nmt;
using nmt_test::read_lines_of;
using nmt_test::run_command;
using nmt_test::write_text;
using nmt_test::QuickstartRun;
using nmt_test::nmt_bin;

namespace {

const std::string kSpace = "\xE2\x96\x81";  // U+2581


// The fields of a line separated by `sep`.
std::vector<std::string> split_on(const std::string& line, const std::string& sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t at; (at = line.find(sep, start)) != std::string::npos; start = at + sep.size())
    out.push_back(line.substr(start, at - start));
  out.push_back(line.substr(start));
  return out;
}

// Whether `phrase` occurs in `tokens` as consecutive tokens.
bool contains(const std::vector<int>& tokens, const std::vector<int64_t>& phrase) {
  for (size_t i = 0; i + phrase.size() <= tokens.size(); ++i) {
    bool match = true;
    for (size_t k = 0; k < phrase.size() && match; ++k) match = tokens[i + k] == phrase[k];
    if (match) return true;
  }
  return false;
}

}  // namespace

TEST(Terms, SplitsTabSeparatedPhrases) {
  EXPECT_EQ(split_phrases("Hund\t roter Hut \t\tT-Shirt"),
            (std::vector<std::string>{"Hund", "roter Hut", "T-Shirt"}));
  EXPECT_TRUE(split_phrases("").empty());
  EXPECT_TRUE(split_phrases(" \t ").empty());
}

TEST(Terms, AdvanceTracksPhrasesAndAbandonsBrokenOnes) {
  const std::vector<std::vector<int64_t>> phrases{{5, 6}, {7}};
  EXPECT_EQ(total_pieces(phrases), 3);
  auto s = start_constraints(phrases);
  EXPECT_EQ(constraint_tokens(s, phrases), (std::vector<int64_t>{5, 7}));
  s = advance(s, phrases, 5);
  EXPECT_EQ(s.phrase, 0);
  EXPECT_EQ(s.done, 1);
  EXPECT_FALSE(s.just_met);
  EXPECT_EQ(constraint_tokens(s, phrases), (std::vector<int64_t>{6}));
  s = advance(s, phrases, 6);
  EXPECT_EQ(s.done, 2);
  EXPECT_TRUE(s.just_met);
  EXPECT_EQ(s.phrase, -1);
  EXPECT_EQ(constraint_tokens(s, phrases), (std::vector<int64_t>{7}));
  s = advance(s, phrases, 9);
  EXPECT_FALSE(s.just_met);
  EXPECT_EQ(s.done, 2);
  s = advance(s, phrases, 7);
  EXPECT_EQ(s.done, 3);
  EXPECT_TRUE(constraint_tokens(s, phrases).empty());

  // 5 then 7: the first phrase is abandoned (its piece no longer counts) and 7 meets the second.
  auto t = advance(advance(start_constraints(phrases), phrases, 5), phrases, 7);
  EXPECT_EQ(t.done, 1);
  EXPECT_EQ(t.met, (std::vector<char>{0, 1}));
  // 5 then 5: abandoned and started again.
  t = advance(advance(start_constraints(phrases), phrases, 5), phrases, 5);
  EXPECT_EQ(t.phrase, 0);
  EXPECT_EQ(t.done, 1);
}

TEST(Terms, AllocationOrderSharesTheBeamAmongBanks) {
  // Bank 0: candidates 0, 1, 4 (scores -1, -2, -5); bank 1: 2, 5; bank 2: 3.
  const std::vector<BankCandidate> c{{-1, 0}, {-2, 0}, {-3, 1}, {-4, 2}, {-5, 0}, {-6, 1}};
  EXPECT_EQ(allocation_order(c), (std::vector<size_t>{3, 2, 0, 5, 1, 4}));
  // One bank: plain score order, ties in input order.
  EXPECT_EQ(allocation_order({{-2, 0}, {-1, 0}, {-2, 0}}), (std::vector<size_t>{1, 0, 2}));
}

TEST(Terms, BlockedTokensFollowThePrefix) {
  const std::vector<std::vector<int64_t>> avoid{{4}, {5, 6}, {7, 8, 9}};
  EXPECT_EQ(blocked_tokens({}, avoid), (std::vector<int64_t>{4}));
  EXPECT_EQ(blocked_tokens({1, 5}, avoid), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(blocked_tokens({7, 8}, avoid), (std::vector<int64_t>{4, 9}));
  EXPECT_EQ(blocked_tokens({8, 7}, avoid), (std::vector<int64_t>{4}));
}

TEST(Terms, WordsEndAtSpacesAndPunctuation) {
  const auto p = piece_texts({"<pad>", kSpace + "Hund", "e", kSpace + "der", ".", "\xE2\x80\x9E",
                              "Hund", "-Shirt", "\xC3\xBC" "ber"});
  EXPECT_EQ(p.text[1], " Hund");
  EXPECT_EQ(p.continues, (std::vector<char>{0, 0, 1, 0, 0, 0, 1, 1, 1}));
  EXPECT_TRUE(ends_with_phrase({1}, p, "Hund"));
  EXPECT_TRUE(ends_with_phrase({3, 1}, p, "Hund"));
  EXPECT_TRUE(ends_with_phrase({3, 5, 6}, p, "Hund"));  // after an opening quote
  EXPECT_TRUE(ends_with_phrase({6}, p, "Hund"));        // the output's start
  EXPECT_FALSE(ends_with_phrase({1, 2}, p, "Hund"));
  EXPECT_FALSE(ends_with_phrase({3, 8, 6}, p, "Hund"));  // " derüberHund"
  EXPECT_TRUE(ends_with_phrase({3, 1}, p, "der Hund"));
}

TEST(Alignment, PiecesToWordsAndHardLinks) {
  EXPECT_EQ(piece_words({kSpace + "Ein", kSpace + "T", "-", "Shirt", "."}, 2),
            (std::vector<int64_t>{0, 1, 1, 1, 1}));
  EXPECT_EQ(piece_words({"a", kSpace + "b", kSpace + "c"}, 2), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(words_of("  Ein  T-Shirt. "), (std::vector<std::string>{"Ein", "T-Shirt."}));
  // Target pieces 0, 1 form word 0 and piece 2 word 1; source pieces 0 | 1, 2. Source word 1
  // counts the mean of its two pieces: word 0 gets 0.6 + 0.2, word 1 (0.3 + 0.1) / 2 +
  // (0.2 + 0.4) / 2 (summed, it would win with 1.0).
  const std::vector<std::vector<float>> att{{0.6f, 0.3f, 0.1f}, {0.2f, 0.2f, 0.4f},
                                            {0.1f, 0.1f, 0.3f}};
  const auto w = word_alignment(att, {0, 0, 1}, 2, {0, 1, 1}, 2);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NEAR(w[0][0], 0.8f / 1.3f, 1e-6);
  EXPECT_NEAR(w[0][1], 0.5f / 1.3f, 1e-6);
  EXPECT_NEAR(w[1][0], 0.1f / 0.3f, 1e-6);
  EXPECT_NEAR(w[1][1], 0.2f / 0.3f, 1e-6);
  const auto hard = hard_alignment(w);
  EXPECT_EQ(format_alignment(hard), "0-0 1-1");
  const WordAlignment a{{"a", "b"}, {"x", "y"}, w, hard};
  EXPECT_EQ(hard_alignment_text(a), "0-0 1-1");
  EXPECT_EQ(soft_alignment_object(a).dump(),
            R"({"alignment":[[0.6154,0.3846],[0.3333,0.6667]],"source":["a","b"],"target":["x","y"]})");
  EXPECT_EQ(format_alignment(hard_alignment({{0.5f, 0.5f}})), "0-0");  // first among equals
  // Target word 0 attends source word 0 most (0.6), but target word 1 attends it more (0.9):
  // word 0 gets 0.36 / 1.5 = 0.24 for source 0 and 0.16 / 0.5 = 0.32 for source 1.
  EXPECT_EQ(format_alignment(hard_alignment({{0.6f, 0.4f}, {0.9f, 0.1f}})), "1-0 0-1");
  EXPECT_EQ(parse_choice<AlignmentMode>("soft", "--alignment"), AlignmentMode::kSoft);
  EXPECT_THROW(parse_choice<AlignmentMode>("fast", "--alignment"), Error);
}

TEST(Alignment, GrowDiagFinalAndSymmetrizesTwoDirections) {
  // Forward (each target word one source word): t0-s0, t1-s1, t2-s3, t3-s3; reverse (each
  // source word one target word): s0-t0, s1-t1, s2-t3, s3-t0. The intersection is 0-0 1-1 and
  // no union link touches it, so nothing grows; final-and takes forward's 3-2 (both words
  // unlinked), not 3-3 (s3 now linked), then reverse's 2-3, not 3-0.
  const std::vector<std::pair<int64_t, int64_t>> forward{{0, 0}, {1, 1}, {3, 2}, {3, 3}};
  const std::vector<std::pair<int64_t, int64_t>> reverse{{0, 0}, {1, 1}, {2, 3}, {3, 0}};
  EXPECT_EQ(format_alignment(grow_diag_final_and(forward, reverse, 4, 4)), "0-0 1-1 3-2 2-3");
  // Grow-diag: the intersection is 0-0 1-2; the union's 1-1, diagonal to 0-0, links the
  // unlinked t1.
  EXPECT_EQ(format_alignment(grow_diag_final_and({{0, 0}, {1, 1}, {1, 2}}, {{0, 0}, {1, 2}}, 2, 3)),
            "0-0 1-1 1-2");
  EXPECT_EQ(format_alignment(grow_diag_final_and({}, {}, 0, 0)), "");
  EXPECT_THROW(grow_diag_final_and({{2, 0}}, {}, 2, 1), Error);
}

TEST(Alignment, TargetSourcesTakeTheHeaviestLink) {
  // t0 links s0 (0.2) and s1 (0.8): s1; t1 links s1; t2 has no link.
  const std::vector<std::vector<float>> w{{0.2f, 0.8f}, {0.5f, 0.5f}, {0.5f, 0.5f}};
  EXPECT_EQ(target_sources({{0, 0}, {1, 0}, {1, 1}}, w, 3), (std::vector<int64_t>{1, 1, -1}));
  EXPECT_EQ(target_sources({{1, 1}, {0, 1}}, w, 3), (std::vector<int64_t>{-1, 0, -1}));
  EXPECT_EQ(parse_choice<AlignmentStep>("consume", "--alignment-step"), AlignmentStep::kConsume);
  EXPECT_THROW(parse_choice<AlignmentStep>("next", "--alignment-step"), Error);
}

// Every constrained hypothesis contains its phrases; sentences without terms decode as without
// them, in the same batch; avoided phrases never appear.
TEST(Search, ConstrainedAndAvoidingBeams) {
  const int64_t V = 30;
  auto model = nmt_test::random_model(nmt_test::search_model(), V, 5);
  const auto src = nmt_test::random_source(6, V, 9);
  SearchOptions o;
  o.beam_size = 4;
  o.nbest = 2;
  o.max_len_a = 1.0;
  o.max_len_b = 4;
  const auto plain = search(model, src, o);
  std::vector<SentenceTerms> terms(6);
  terms[0].constraints = {{7, 8}};
  terms[2].constraints = {{9}, {10, 11, 12}};
  terms[3].avoid = {std::vector<int64_t>{plain[3][0].tokens[0]}};
  ModelScorer scorer(model);
  const auto out = search(scorer, src, resolved(o, true), {}, terms);
  // The best hypothesis is complete; an n-best entry that lacks pieces comes after those that
  // do not (beam 4 has fewer beams than sentence 2 has banks).
  for (const int i : {0, 2}) {
    EXPECT_EQ(out[i][0].unmet, 0);
    for (size_t j = 0; j < out[i].size(); ++j) {
      if (j > 0) EXPECT_GE(out[i][j].unmet, out[i][j - 1].unmet);
      if (out[i][j].unmet > 0) continue;
      for (const auto& p : terms[i].constraints)
        EXPECT_TRUE(contains(out[i][j].tokens, p)) << "sentence " << i;
    }
  }
  for (const int i : {1, 4, 5})
    for (size_t j = 0; j < out[i].size(); ++j) {
      EXPECT_EQ(out[i][j].tokens, plain[i][j].tokens) << "sentence " << i;
      EXPECT_EQ(out[i][j].score, plain[i][j].score);
    }
  for (const auto& h : out[3]) EXPECT_FALSE(contains(h.tokens, terms[3].avoid[0]));
  // Greedy avoids too; constraints need a beam.
  o.beam_size = 1;
  o.nbest = 1;
  std::vector<SentenceTerms> avoid_only(6);
  avoid_only[3] = terms[3];
  EXPECT_FALSE(
      contains(search(scorer, src, resolved(o), {}, avoid_only)[3][0].tokens, terms[3].avoid[0]));
  EXPECT_THROW(resolved(o, true), Error);
  EXPECT_THROW(search(scorer, src, resolved(o), {}, terms), Error);
}

// translate --constraints, --avoid and --alignment through the binary on the quickstart model.
TEST_F(QuickstartRun, ConstraintsAvoidAndAlignments) {
  const std::string in = data() + "/test.en";
  auto r = run_command(translate("--beam 4 --precision fp32 --input " + in + " --output " +
                                 path("plain.txt")));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto plain = read_lines_of(path("plain.txt"));
  ASSERT_EQ(plain.size(), 300u);
  // Every third line must contain "zwölf" as a word of its own; every fifth avoids its output.
  std::string cons, avoid;
  for (size_t i = 0; i < plain.size(); ++i) {
    cons += i % 3 == 0 ? "zw\xC3\xB6lf\n" : "\n";
    avoid += i % 5 == 0 ? plain[i] + "\n" : "\n";
  }
  write_text(path("cons.txt"), cons);
  write_text(path("avoid.txt"), avoid);
  r = run_command(translate("--beam 4 --precision fp32 --input " + in + " --constraints " +
                            path("cons.txt") + " --output " + path("cons_out.txt")));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto constrained = read_lines_of(path("cons_out.txt"));
  ASSERT_EQ(constrained.size(), 300u);
  for (size_t i = 0; i < plain.size(); ++i) {
    const auto words = split(constrained[i], ' ');
    if (i % 3 == 0)
      EXPECT_NE(std::find(words.begin(), words.end(), "zw\xC3\xB6lf"), words.end()) << constrained[i];
    else
      EXPECT_EQ(constrained[i], plain[i]) << "line " << i;
  }
  // An ensemble of two checkpoints of the run meets them too.
  r = run_command(nmt_bin() + " translate --checkpoint " + run() + "/checkpoints/ckpt-00000250 " +
                  run() + "/checkpoints/ckpt-00000500 --threads 1 --beam 4 --input " + in +
                  " --constraints " + path("cons.txt") + " --output " + path("ensemble.txt"));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto ensemble = read_lines_of(path("ensemble.txt"));
  ASSERT_EQ(ensemble.size(), 300u);
  for (size_t i = 0; i < ensemble.size(); i += 3) {
    const auto words = split(ensemble[i], ' ');
    EXPECT_NE(std::find(words.begin(), words.end(), "zw\xC3\xB6lf"), words.end()) << ensemble[i];
  }
  r = run_command(translate("--beam 4 --precision fp32 --input " + in + " --avoid " +
                            path("avoid.txt") + " --output " + path("avoid_out.txt")));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto avoided = read_lines_of(path("avoid_out.txt"));
  for (size_t i = 0; i < plain.size(); i += 5) {
    const auto words = split(avoided[i], ' ');
    EXPECT_EQ(std::find(words.begin(), words.end(), plain[i]), words.end()) << avoided[i];
  }

  r = run_command(translate("--beam 4 --nbest 2 --alignment --input " + in + " --output " +
                            path("aligned.txt")));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto aligned = read_lines_of(path("aligned.txt"));
  ASSERT_EQ(aligned.size(), 600u);
  const auto sources = read_lines_of(in);
  for (size_t k = 0; k < aligned.size(); ++k) {
    // "index ||| hypothesis ||| i-j ... ||| score"
    const auto fields = split_on(aligned[k], " ||| ");
    ASSERT_EQ(fields.size(), 4u) << aligned[k];
    const auto src_words = words_of(sources[k / 2]), hyp_words = words_of(fields[1]);
    std::vector<int> links(hyp_words.size(), 0);
    for (const auto& pair : split(fields[2], ' ')) {
      const auto dash = pair.find('-');
      const auto i = std::stoul(pair.substr(0, dash)), j = std::stoul(pair.substr(dash + 1));
      ASSERT_LT(i, src_words.size());
      ASSERT_LT(j, hyp_words.size());
      ++links[j];
    }
    for (const int n : links) EXPECT_GE(n, 1) << aligned[k];
  }
  r = run_command(translate("--beam 4 --alignment soft --input " + in + " --output " +
                            path("soft.txt")));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto soft = read_lines_of(path("soft.txt"));
  ASSERT_EQ(soft.size(), 300u);
  const auto j = nlohmann::json::parse(soft[0]);
  EXPECT_EQ(j["source"].size(), words_of(sources[0]).size());
  EXPECT_EQ(j["alignment"].size(), j["target"].size());
  // Each weight is rounded to four decimals: the row sums to 1 within half a unit per word.
  double sum = 0;
  for (const auto& v : j["alignment"][0]) sum += v.get<double>();
  EXPECT_NEAR(sum, 1.0, 5e-5 * static_cast<double>(j["source"].size()) + 1e-9);

  // A phrase longer than the output limit is dropped with a warning naming its line; a file
  // shorter than the input is refused.
  const std::string long_phrase =
      "drei drei drei drei drei drei drei drei drei drei drei drei drei drei drei drei drei drei";
  write_text(path("long.txt"), long_phrase + "\n" + std::string(299, '\n'));
  r = run_command(translate("--beam 4 --input " + in + " --constraints " + path("long.txt") +
                            " --output " + path("long_out.txt")));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("line 1: constraint \"drei"), std::string::npos) << r.output;
  write_text(path("short.txt"), "\n");
  r = run_command(translate("--beam 4 --input " + in + " --constraints " + path("short.txt")));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("fewer than the input"), std::string::npos) << r.output;
  r = run_command(translate("--beam 1 --input " + in + " --constraints " + path("cons.txt")));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--constraints needs beam search"), std::string::npos) << r.output;
}
