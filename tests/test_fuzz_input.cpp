// Generated hostile input for translate, end to end on trained models: random bytes, invalid
// UTF-8, NUL, 100k-character lines and CRLF give exactly one output line per input line, every
// time.
// NMT_FUZZ_CASES (default 10000) and NMT_FUZZ_SEED (default fixed) widen or vary a run; a
// failure names the seed and case so it can be replayed.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "ckpt/checkpoint.h"
#include "config/config.h"
#include "decode/output.h"
#include "decode/translate.h"
#include "fuzz_helpers.h"
#include "helpers.h"
#include "quickstart_run.h"
#include "util/line_reader.h"
#include "util/util.h"

using nlohmann::json;
using nmt::Config;
using nmt_test::QuickstartRun;
using nmt_test::run_command;
using nmt_test::Rng;
using nmt_test::count_lines_in;
using nmt_test::fuzz_cases;
using nmt_test::fuzz_seed;

namespace {

std::string random_codepoint_text(Rng& r, size_t n) {
  static const std::vector<char32_t> pool = {
      U'a',   U'Z',   U' ',   U'\t',  0x00A0, 0x3000,  0x2028,   0x0085, 0xFEFF,
      0x200D, 0x0301, 0x05D0, 0x0627, 0x4E2D, 0x1F600, 0x10FFFF, 0xE000, 0xFFFD,
      0x202E, 0x0000, 0x007F, 0x00E9, 0x00DF, 0x1F1E9, 0x1F3F3};
  std::string s;
  for (size_t i = 0; i < n; ++i) nmt::append_utf8(s, r.pick(pool));
  return s;
}

class InputFuzzer {
 public:
  InputFuzzer(uint64_t seed, std::vector<std::string> words)
      : rng_(seed), words_(std::move(words)) {}

  std::string words(size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += (i ? " " : "") + rng_.pick(words_);
    return s;
  }

  // One line's content (it may itself hold '\n' or '\r': random bytes do).
  std::string line() {
    static const std::vector<std::string> invalid = {
        "\x80",     "\xbf", "\xc0\x80", "\xc1\xbf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
        "\xf8\x88", "\xff", "\xfe",     "\xe2\x82", "\xf0\x9f\x98", "\xc3"};
    switch (rng_.below(11)) {
      case 0: {  // random bytes
        std::string s;
        for (size_t i = 0, n = rng_.below(80); i < n; ++i) s += rng_.byte();
        return s;
      }
      case 1: {  // words with invalid UTF-8 inside and between them
        std::string s = words(1 + rng_.below(6));
        for (size_t i = 0, n = 1 + rng_.below(4); i < n; ++i)
          s.insert(rng_.below(s.size() + 1), rng_.pick(invalid));
        return s;
      }
      case 2: {  // NUL bytes
        std::string s = words(1 + rng_.below(6));
        for (size_t i = 0, n = 1 + rng_.below(3); i < n; ++i)
          s.insert(rng_.below(s.size() + 1), 1, '\0');
        return s;
      }
      case 3: {  // long lines (rarer: each decodes to the length limit); 100k characters at times
        if (!rng_.chance(0.35)) return words(1 + rng_.below(12));
        const bool huge = rng_.chance(0.05);
        const size_t chars = huge ? 100000 : 500 + rng_.below(3000);
        huge_lines_ += huge;
        std::string s;
        switch (rng_.below(3)) {
          case 0:
            while (s.size() < chars) s += rng_.pick(words_) + " ";
            break;
          case 1:
            s.assign(chars, static_cast<char>('a' + rng_.below(26)));
            break;
          default:
            s = random_codepoint_text(rng_, chars);
        }
        ++long_lines_;
        return s;
      }
      case 4:
        return random_codepoint_text(rng_, rng_.below(12));  // Unicode oddities
      case 5: {                                              // whitespace only, ASCII and Unicode
        static const std::vector<std::string> spaces = {
            " ", "\t", "\v", "\f", "\xc2\xa0", "\xe3\x80\x80", "\xe2\x80\xa8"};
        std::string s;
        for (size_t i = 0, n = rng_.below(6); i < n; ++i) s += rng_.pick(spaces);
        return s;
      }
      case 6:
        return "";
      case 7: {  // control characters
        std::string s = words(1 + rng_.below(3));
        for (size_t i = 0, n = 1 + rng_.below(4); i < n; ++i)
          s.insert(rng_.below(s.size() + 1), 1, static_cast<char>(1 + rng_.below(31)));
        return s;
      }
      case 8:
        return line() + line();
      default:
        return words(1 + rng_.below(12));  // ordinary text
    }
  }

  // A whole input: lines ended by LF, CRLF or a lone CR (not an end), the last one maybe not.
  std::string input() {
    std::string text;
    for (size_t i = 0, n = rng_.below(9); i < n; ++i) {
      text += line();
      const size_t end = rng_.below(20);
      text += end < 13 ? "\n" : end < 19 ? "\r\n" : "\r";
    }
    if (!text.empty() && rng_.chance(0.3)) text.pop_back();
    return text;
  }

  Rng& rng() { return rng_; }
  int64_t long_lines() const { return long_lines_; }
  int64_t huge_lines() const { return huge_lines_; }

 private:
  Rng rng_;
  std::vector<std::string> words_;
  int64_t long_lines_ = 0;
  int64_t huge_lines_ = 0;  // 100,000 characters
};

std::vector<std::string> vocabulary_words(const std::string& file) {
  std::vector<std::string> words;
  for (const auto& line : nmt_test::read_lines_of(file))
    for (auto& w : nmt::split(line, ' '))
      if (!w.empty() && words.size() < 2000) words.push_back(w);
  return words;
}

}  // namespace

TEST_F(QuickstartRun, FuzzedInputKeepsOneOutputLinePerInputLine) {
  torch::set_num_threads(1);
  nmt::LoadedModel m = nmt::load_model(run());
  const int64_t cases = fuzz_cases();
  const uint64_t seed = fuzz_seed();
  InputFuzzer fuzzer(seed, vocabulary_words(data() + "/test.en"));
  Rng& r = fuzzer.rng();
  int64_t lines = 0, bytes = 0, replaced = 0, truncated = 0;
  for (int64_t i = 0; i < cases; ++i) {
    const std::string text = fuzzer.input();
    nmt::TranslateOptions o = nmt::translate_options(m.config, 1 + r.below(3));
    static const std::vector<int64_t> budgets = {1, 7, 64, 4096};
    o.batch_tokens = r.pick(budgets);
    nmt::StreamOptions s;
    s.chunk_lines = 1 + static_cast<int64_t>(r.below(4));
    nmt::OutputOptions w;
    w.nbest = o.search.beam_size > 1 && r.chance(0.3);
    w.scores = !w.nbest && r.chance(0.3);
    o.search.nbest = w.nbest ? o.search.beam_size : 1;
    nmt_test::write_text(path("case.txt"), text);
    nmt::LineReader in(path("case.txt"));
    std::ostringstream out;
    nmt::TranslateStats stats;
    try {
      nmt::ModelScorer scorer(m.model);
      stats = nmt::translate_stream(scorer, m.vocabs, in, out, o, s, w);
    } catch (const std::exception& e) {
      FAIL() << "seed " << seed << " case " << i << ": " << e.what();
    }
    const int64_t expected = count_lines_in(text);
    const std::string output = out.str();
    ASSERT_EQ(stats.lines, expected) << "seed " << seed << " case " << i;
    ASSERT_EQ(count_lines_in(output), expected * o.search.nbest)
        << "seed " << seed << " case " << i;
    ASSERT_TRUE(output.empty() || output.back() == '\n');
    ASSERT_EQ(output.find('\r'), std::string::npos) << "case " << i;
    ASSERT_EQ(output.find('\0'), std::string::npos) << "case " << i;
    ASSERT_TRUE(nmt::is_valid_utf8(output)) << "case " << i;
    lines += expected;
    bytes += static_cast<int64_t>(text.size());
    replaced += stats.replaced_bytes;
    truncated += stats.truncated;
  }
  std::printf(
      "translate fuzz: %lld cases (seed %llu): %lld lines, %lld bytes, %lld long lines generated "
      "(%lld of 100k characters), %lld truncated, %lld bytes replaced\n",
      static_cast<long long>(cases), static_cast<unsigned long long>(seed),
      static_cast<long long>(lines), static_cast<long long>(bytes),
      static_cast<long long>(fuzzer.long_lines()), static_cast<long long>(fuzzer.huge_lines()),
      static_cast<long long>(truncated), static_cast<long long>(replaced));
  RecordProperty("cases", std::to_string(cases));
  // The generator must reach the paths it is for.
  EXPECT_GT(fuzzer.huge_lines(), 0);
  EXPECT_GT(truncated, 0);
  EXPECT_GT(replaced, 0);
}

// The same kind of input through the binary, stdin and files, greedy and beam with n-best.
TEST_F(QuickstartRun, FuzzedInputThroughTheBinary) {
  InputFuzzer fuzzer(fuzz_seed() + 2, vocabulary_words(data() + "/test.en"));
  std::string text;
  for (int i = 0; i < 300; ++i) text += fuzzer.input() + "\n";
  text += std::string(100000, 'x') + "\r\n" + fuzzer.words(20000) + "\nlast line, no newline";
  nmt_test::write_text(path("fuzz.txt"), text);
  const int64_t expected = count_lines_in(text);
  auto r = run_command(translate("--input " + path("fuzz.txt") + " --output " + path("a.out")));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(count_lines_in(nmt_test::read_text(path("a.out"))), expected);
  r = run_command("cat " + path("fuzz.txt") + " | " +
                  translate("--beam 3 --nbest 2 --chunk-lines 7 > " + path("b.out")));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(count_lines_in(nmt_test::read_text(path("b.out"))), 2 * expected);
}

// configs/quickstart_rnn.json, cut to 600 steps on one thread, learns the number task (>= 90 %
// exact match, greedy) with the additive and with the dot score; then fuzzed input through the
// trained RNN keeps one output line per input line, greedy and beam with n-best.
class RnnQuickstart : public ::testing::TestWithParam<std::string> {};

TEST_P(RnnQuickstart, LearnsTheTaskAndTakesFuzzedInput) {
  nmt_test::TempDir dir;
  const std::string d = dir / "data", run = dir / "run";
  auto r = run_command("python3 scripts/make_quickstart_data.py --out " + d +
                       " --train 30000 --valid 100 --test 300");
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_command(nmt_test::nmt_bin() + " train --config configs/quickstart_rnn.json --run-dir " +
                  run + " --set data.train_src=" + d + "/train.en --set data.train_tgt=" + d +
                  "/train.de --set data.valid_src=" + d + "/valid.en --set data.valid_tgt=" + d +
                  "/valid.de --set model.rnn.attention=" + GetParam() +
                  " --set train.threads=1 --set train.max_steps=600 --set train.valid_every=600"
                  " --set train.save_every=300");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("model: rnn"), std::string::npos) << r.output;

  const std::string translate =
      nmt_test::nmt_bin() + " translate --checkpoint " + run + " --threads 1 ";
  r = run_command(translate + "--beam 1 --input " + d + "/test.en --output " + (dir / "hyp"));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto hyp = nmt_test::read_lines_of(dir / "hyp");
  const auto ref = nmt_test::read_lines_of(d + "/test.de");
  ASSERT_EQ(hyp.size(), ref.size());
  size_t exact = 0;
  for (size_t i = 0; i < ref.size(); ++i) exact += hyp[i] == ref[i];
  std::printf("rnn %s: exact match %zu/%zu\n", GetParam().c_str(), exact, ref.size());
  EXPECT_GE(exact * 10, ref.size() * 9);

  // The heatmap shows the decoder's one attention distribution per output piece.
  nmt_test::write_text(dir / "att.txt", "three hundred twelve\n");
  r = run_command(translate + "--beam 3 --attention-out " + (dir / "att") + " --input " +
                  (dir / "att.txt") + " --output /dev/null");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto map = json::parse(nmt_test::read_text(dir / "att/000001.json"));
  EXPECT_EQ(map["layer"], 0);
  ASSERT_EQ(map["weights"].size(), map["target"].size());
  for (const auto& row : map["weights"]) {
    ASSERT_EQ(row.size(), map["source"].size());
    double sum = 0;
    for (const auto& v : row) sum += v.get<double>();
    EXPECT_NEAR(sum, 1.0, 1e-3);
  }
  EXPECT_NE(nmt_test::read_text(dir / "att/000001.svg").find("</svg>"), std::string::npos);

  // eval and average take the RNN as they take the Transformer.
  r = run_command(nmt_test::nmt_bin() + " eval --checkpoint " + run +
                  " --threads 1 --beam 2 --src " + d + "/valid.en --ref " + d + "/valid.de --json");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("\"chrf\""), std::string::npos) << r.output;
  r = run_command(nmt_test::nmt_bin() + " average --last 2 --run-dir " + run + " --output " +
                  (dir / "avg"));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_command(nmt_test::nmt_bin() + " translate --checkpoint " + (dir / "avg") +
                  " --threads 1 --input " + d + "/valid.en --output " + (dir / "avg.out"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(nmt_test::read_lines_of(dir / "avg.out").size(), 100u);

  InputFuzzer fuzzer(fuzz_seed() + 3, vocabulary_words(d + "/test.en"));
  std::string text;
  for (int i = 0; i < 150; ++i) text += fuzzer.input() + "\n";
  text += std::string(20000, 'x') + "\nlast line, no newline";
  nmt_test::write_text(dir / "fuzz.txt", text);
  const int64_t expected = count_lines_in(text);
  r = run_command(translate + "--input " + (dir / "fuzz.txt") + " --output " + (dir / "a.out"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(count_lines_in(nmt_test::read_text(dir / "a.out")), expected);
  r = run_command(translate + "--beam 3 --nbest 2 --input " + (dir / "fuzz.txt") + " --output " +
                  (dir / "b.out"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(count_lines_in(nmt_test::read_text(dir / "b.out")), 2 * expected);
}

INSTANTIATE_TEST_SUITE_P(Attention, RnnQuickstart, ::testing::Values("bahdanau", "luong_dot"));
