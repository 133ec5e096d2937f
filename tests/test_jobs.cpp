// Jobs on the shared quickstart model through the nmt binary: sampling, nmt score, and long
// translations that report progress, stop on signals and resume.
#include <gtest/gtest.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "ckpt/checkpoint.h"
#include "data/tensors.h"
#include "decode/forced.h"
#include "decode/search.h"
#include "helpers.h"
#include "quickstart_run.h"
#include "text/spm.h"

using nmt_test::read_lines_of;
using nmt_test::read_text;
using nmt_test::run_command;
using nmt_test::write_text;

namespace {

using nmt_test::nmt_bin;
using nmt_test::QuickstartRun;

std::vector<double> numbers(const std::vector<std::string>& lines) {
  std::vector<double> v;
  for (const auto& l : lines) v.push_back(std::stod(l.substr(l.rfind('\t') + 1)));
  return v;
}

std::string hypothesis(const std::string& line) { return line.substr(0, line.rfind('\t')); }

int differing_lines(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  int n = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += a[i] != b[i];
  return n + static_cast<int>(std::max(a.size(), b.size()) - std::min(a.size(), b.size()));
}

off_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

}  // namespace

// One seed, one sample per line, whatever the threads, batches and chunks (fp32); another seed
// other samples; a temperature near 0 is greedy; --nbest N gives N samples per line.
TEST_F(QuickstartRun, SamplingIsReproducibleAndSeeded) {
  const std::string in = data() + "/test.en";
  const std::string common = "--sampling --precision fp32 --temperature 1.5 --input " + in;
  auto r = run_command(translate(common + " --seed 7 --output " + path("a.txt")));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_command(nmt_bin() + " translate --checkpoint " + run() + " --threads 2 " + common +
                  " --seed 7 --batch-tokens 40 --chunk-lines 7 --output " + path("b.txt"));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto a = read_lines_of(path("a.txt"));
  ASSERT_EQ(a.size(), 300u);
  EXPECT_EQ(read_text(path("a.txt")), read_text(path("b.txt")));
  r = run_command(translate(common + " --seed 8 --output " + path("c.txt")));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_GE(differing_lines(a, read_lines_of(path("c.txt"))), 30);

  r = run_command(translate("--beam 1 --precision fp32 --input " + in + " --output " +
                            path("greedy.txt")));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_command(translate("--sampling --temperature 0.01 --precision fp32 --input " + in +
                            " --output " + path("cold.txt")));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_LE(differing_lines(read_lines_of(path("greedy.txt")), read_lines_of(path("cold.txt"))),
            3);

  r = run_command(translate(common + " --nbest 4 --output " + path("nbest.txt")));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto nbest = read_lines_of(path("nbest.txt"));
  ASSERT_EQ(nbest.size(), 1200u);
  EXPECT_EQ(nbest[3].substr(0, 6), "0 ||| ");
  EXPECT_EQ(nbest[4].substr(0, 6), "1 ||| ");
  r = run_command(translate("--sampling --beam 5 --input " + in));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--sampling draws one token a step"), std::string::npos) << r.output;
}

// Forced decoding of a greedy hypothesis' own pieces gives the log-probability search summed.
TEST_F(QuickstartRun, ForcedScoresEqualSearchScores) {
  const auto loaded = nmt::load_model(run() + "/checkpoints/best", torch::kCPU);
  nmt::ModelScorer scorer(loaded.model);
  std::vector<std::vector<int64_t>> src;
  for (const auto& line : read_lines_of(data() + "/test.en")) {
    const auto pieces = loaded.vocabs.src.encode(line);
    src.emplace_back(pieces.begin(), pieces.end());
    src.back().push_back(nmt::kEosId);
    if (src.size() == 64) break;
  }
  nmt::SearchOptions o;
  const auto hyps = nmt::search(scorer, nmt::pad_sequences(src, nmt::kPadId), o);
  std::vector<std::vector<int64_t>> tgt;
  for (const auto& h : hyps) tgt.emplace_back(h[0].tokens.begin(), h[0].tokens.end());
  const auto forced = nmt::forced_log_probs(scorer, src, tgt, nmt::Precision::kFp32);
  int ended = 0;
  for (size_t i = 0; i < hyps.size(); ++i) {
    if (!hyps[i][0].ended) continue;  // cut at the length limit: no EOS to score
    ++ended;
    EXPECT_NEAR(forced[i], hyps[i][0].log_prob, 1e-3) << "sentence " << i;
  }
  EXPECT_GE(ended, 60);
}

// nmt score gives a greedy output the score translate printed for it, but where the text's
// SentencePiece segmentation is not the model's (a few lines); --normalize divides by the
// pieces + 1; an ensemble of one model twice scores as the model; gzip input; counts that
// differ are refused naming the file.
TEST_F(QuickstartRun, ScoreEqualsGreedysOwnScores) {
  const std::string in = data() + "/test.en";
  auto r = run_command(translate("--beam 1 --length-penalty 0 --scores --precision fp32 --input " +
                                 in + " --output " + path("greedy.txt")));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto greedy = read_lines_of(path("greedy.txt"));
  std::string hyps;
  for (const auto& l : greedy) hyps += hypothesis(l) + "\n";
  write_text(path("hyp.de"), hyps);
  ASSERT_EQ(run_command("gzip -c " + path("hyp.de") + " > " + path("hyp.de.gz")).status, 0);
  const std::string score = nmt_bin() + " score --checkpoint " + run() +
                            " --threads 1 --precision fp32 --src " + in + " --tgt ";
  r = run_command(score + path("hyp.de.gz") + " --output " + path("scores.txt"));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto want = numbers(greedy);
  const auto got = numbers(read_lines_of(path("scores.txt")));
  ASSERT_EQ(got.size(), want.size());
  int equal = 0;
  for (size_t i = 0; i < got.size(); ++i) equal += std::abs(got[i] - want[i]) <= 1e-3;
  EXPECT_GE(equal, 285) << "of 300";

  r = run_command(score + path("hyp.de") + " --normalize --output " + path("norm.txt"));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto norm = numbers(read_lines_of(path("norm.txt")));
  for (size_t i = 0; i < got.size(); ++i) {
    const double pieces_plus_one = got[i] / norm[i];
    EXPECT_NEAR(pieces_plus_one, std::round(pieces_plus_one), 1e-3) << "line " << i + 1;
    EXPECT_GE(std::round(pieces_plus_one), 2.0);
  }
  r = run_command(nmt_bin() + " score --checkpoint " + run() + " " + run() +
                  " --threads 1 --precision fp32 --src " + in + " --tgt " + path("hyp.de") +
                  " --output " + path("ens.txt"));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto ens = numbers(read_lines_of(path("ens.txt")));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(ens[i], got[i], 1e-3) << "line " << i + 1;

  write_text(path("short.de"), "eins\nzwei\n");
  r = run_command(score + path("short.de"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("short.de ends after 2 lines"), std::string::npos) << r.output;
}

// A job killed twice (SIGKILL) and resumed each time writes the file an uninterrupted run
// writes; SIGTERM exits 143 with complete lines only; --progress counts the lines.
TEST_F(QuickstartRun, KilledJobsResumeByteIdentical) {
  std::string big;
  const std::string test = read_text(data() + "/test.en");
  for (int i = 0; i < 10; ++i) big += test;  // 3,000 lines
  write_text(path("big.en"), big);
  const std::string job = translate("--beam 4 --precision fp32 --chunk-lines 100 --input " +
                                    path("big.en") + " --progress --output ");
  auto r = run_command(job + path("whole.txt"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("progress: 3000 / 3000 lines (100.0%)"), std::string::npos) << r.output;
  const std::string out = path("resumed.txt");
  for (int kill = 0; kill < 2; ++kill) {
    const off_t before = file_size(out);
    const pid_t pid = nmt_test::spawn(job + out + (kill > 0 ? " --resume" : "") + " 2>/dev/null");
    ASSERT_GT(pid, 0);
    // Killed once at least a chunk past where it started.
    const bool grew = nmt_test::wait_for([&] { return file_size(out) > before + 2000; }, 120);
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(grew) << "the job wrote nothing in 120 s";
  }
  r = run_command(job + out + " --resume");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resuming"), std::string::npos) << r.output;
  EXPECT_EQ(read_text(out), read_text(path("whole.txt")));

  const std::string term = path("term.txt");
  const pid_t pid = nmt_test::spawn(job + term + " 2>/dev/null");
  ASSERT_TRUE(nmt_test::wait_for([&] { return file_size(term) > 2000; }, 120));
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by the signal instead of stopping";
  EXPECT_EQ(WEXITSTATUS(status), 143);
  const std::string text = read_text(term);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(read_text(path("whole.txt")).compare(0, text.size(), text), 0);
}

// One writer per output file: while a job writes FILE (here waiting for its input), a second job
// on FILE, fresh or --resume, fails at once naming the file and the first job's pid, and
// touches nothing; the first finishes its output, and the file is free again after it.
TEST_F(QuickstartRun, SecondJobOnOneOutputIsRefused) {
  const std::string fifo = path("input.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Open for the first job to read from, and not inherited by the jobs (CLOEXEC): its input
  // ends when this test closes it.
  const int writer = ::open(fifo.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(writer, 0);
  const std::string out = path("out.txt"), log = path("first.log");
  const pid_t first = nmt_test::spawn(translate("--input " + fifo + " --output " + out) + " 2>" +
                                      log);
  ASSERT_GT(first, 0);
  ASSERT_TRUE(nmt_test::wait_for(
      [&] { return nmt_test::read_text(log).find("loaded") != std::string::npos; }, 60))
      << nmt_test::read_text(log);
  for (const std::string resume : {"", " --resume"}) {
    const auto r = run_command(translate("--input " + data() + "/test.en --output " + out + resume));
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("nmt: error: " + out + " is being written by pid " +
                            std::to_string(first)),
              std::string::npos)
        << r.output;
    EXPECT_EQ(file_size(out), 0) << "the refused job" << resume << " wrote to the file";
  }
  const std::string lines = "twelve\nthree hundred four\n";
  ASSERT_EQ(::write(writer, lines.data(), lines.size()), static_cast<ssize_t>(lines.size()));
  ::close(writer);
  int status = 0;
  ::waitpid(first, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << nmt_test::read_text(log);
  EXPECT_EQ(nmt_test::read_lines_of(out).size(), 2u);
  const auto again = run_command(translate("--input " + data() + "/test.en --output " + out));
  EXPECT_EQ(again.status, 0) << again.output;
}
