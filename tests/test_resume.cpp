// Bit-exact resume: 2N steps in one go and N steps + --resume N steps give identical per-step
// losses and identical final weights, with dropout on and the stop in the middle of an epoch.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>

#include "helpers.h"
#include "util/blas.h"

using nlohmann::json;
using nmt_test::nmt_bin;
using nmt_test::run_command;

namespace {

// The quickstart model shrunk to test size; `arch` "rnn" takes configs/quickstart_rnn.json.
std::string train_command(const std::string& data, const std::string& run, int steps,
                          const std::string& arch = "transformer", const std::string& extra = "") {
  const std::string model =
      arch == "rnn"
          ? " train --config configs/quickstart_rnn.json --run-dir " + run +
                " --set model.d_model=32 --set model.rnn.hidden=32 --set model.rnn.layers=2"
                " --set model.dropout=0.1"
          : " train --config configs/quickstart.json --run-dir " + run +
                " --set model.d_model=32 --set model.d_ff=64 --set model.heads=2"
                " --set model.dropout=0.1 --set model.attention_dropout=0.1";
  return nmt_bin() + model + " --set data.train_src=" + data +
         "/train.en --set data.train_tgt=" + data +
         "/train.de --set data.valid_src= --set data.valid_tgt= --set vocab.size=80"
         " --set train.threads=1 --set train.batch_tokens=500"
         " --set train.warmup_steps=10 --set train.log_every=1 --set train.save_every=12"
         " --set train.max_steps=" +
         std::to_string(steps) + extra;
}

// A quickstart-style corpus of `train` lines in DIR/data.
std::string small_data(const nmt_test::TempDir& dir, int train = 300) {
  const std::string data = dir / "data";
  const auto r = run_command("python3 scripts/make_quickstart_data.py --out " + data + " --train " +
                             std::to_string(train) + " --valid 5 --test 5");
  EXPECT_EQ(r.status, 0) << r.output;
  return data;
}

// Per-step rows of metrics.jsonl, keyed by step, as their exact JSON text of the fields that
// must match (losses, learning rate, gradient norm, tokens).
std::map<int64_t, std::string> step_rows(const std::string& path) {
  std::map<int64_t, std::string> rows;
  for (const auto& line : nmt_test::read_lines_of(path)) {
    const auto j = json::parse(line);
    if (!j.contains("loss")) continue;
    rows[j["step"].get<int64_t>()] = json{
        {"loss", j["loss"]},
        {"ppl", j["ppl"]},
        {"lr", j["lr"]},
        {"grad_norm", j["grad_norm"]},
        {"tgt_tokens", j["tgt_tokens"]},
        {"epoch", j["epoch"]}}.dump();
  }
  return rows;
}
}  // namespace

// `extra` settings apply to all three runs; `once_rows` receives the uninterrupted run's rows.
static void check_bit_exact_resume(const std::string& arch, const std::string& extra = "",
                                   std::map<int64_t, std::string>* once_rows = nullptr) {
  nmt_test::TempDir dir;
  const std::string data = small_data(dir, 400);
  ASSERT_FALSE(::testing::Test::HasFailure());

  auto r = run_command(train_command(data, dir / "once", 24, arch, extra));
  ASSERT_EQ(r.status, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("(\\d+) batches per epoch")));
  const int batches = std::stoi(m[1].str());
  // The stop at step 12 must fall inside an epoch, and training must cross an epoch after it.
  ASSERT_NE(12 % batches, 0) << batches << " batches per epoch";
  ASSERT_LT(batches, 24);

  r = run_command(train_command(data, dir / "twice", 12, arch, extra));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_command(train_command(data, dir / "twice", 24, arch, extra) + " --resume");
  ASSERT_EQ(r.status, 0) << r.output;
  ASSERT_NE(r.output.find("resumed from"), std::string::npos) << r.output;

  const auto once = step_rows(dir / "once/metrics.jsonl");
  const auto twice = step_rows(dir / "twice/metrics.jsonl");
  ASSERT_EQ(once.size(), 24u);
  ASSERT_EQ(twice.size(), 24u);
  for (int64_t step = 13; step <= 24; ++step)
    EXPECT_EQ(once.at(step), twice.at(step)) << "step " << step;
  const std::string ckpt = "/checkpoints/ckpt-00000024/model.pt";
  const auto a = nmt_test::read_text(dir / ("once" + ckpt));
  const auto b = nmt_test::read_text(dir / ("twice" + ckpt));
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "final weights differ";
  if (once_rows != nullptr) *once_rows = once;
}

TEST(Resume, BitExactAcrossAStopInTheMiddleOfAnEpoch) { check_bit_exact_resume("transformer"); }

// Precision bf16 on the CPU (bfloat16 products) resumes bit-exactly too, and trains like fp32:
// its losses differ from fp32's at every step (the products did change) but by under 6 % at any
// step (the runs drift apart like two seeds, so a step's loss moves by a few percent) and 1.5 %
// on average over the run.
TEST(Resume, BitExactWithBf16ProductsOnTheCpu) {
  if (!nmt::have_bf16_gemm()) GTEST_SKIP() << nmt::bf16_gemm_missing();
  std::map<int64_t, std::string> bf16, fp32;
  // On a CUDA machine the default device would be the GPU, where bf16 is autocast.
  check_bit_exact_resume("transformer", " --set train.device=cpu --set train.precision=bf16",
                         &bf16);
  check_bit_exact_resume("transformer", " --set train.device=cpu", &fp32);
  ASSERT_EQ(bf16.size(), 24u);
  ASSERT_EQ(fp32.size(), 24u);
  double sum_bf16 = 0, sum_fp32 = 0;
  for (int64_t step = 1; step <= 24; ++step) {
    const double a = json::parse(bf16.at(step))["loss"], b = json::parse(fp32.at(step))["loss"];
    EXPECT_NE(a, b) << "step " << step << ": the same loss as fp32";
    EXPECT_NEAR(a, b, 0.06 * b) << "step " << step;
    sum_bf16 += a;
    sum_fp32 += b;
  }
  EXPECT_NEAR(sum_bf16, sum_fp32, 0.015 * sum_fp32);
  std::cout << "mean loss over 24 steps: bf16 " << sum_bf16 / 24 << ", fp32 " << sum_fp32 / 24
            << "\n";
}

// On the CPU. On CUDA the encoder's dropout between its layers is cuDNN's, whose random state
// lives in cuDNN and in no checkpoint (docs/gpu.md): there the steps after a resume differ.
TEST(Resume, BitExactForAnRnnRun) { check_bit_exact_resume("rnn", " --set train.device=cpu"); }

// With subword sampling on both sides the draws are keyed by (seed, epoch, pair), so a resumed
// run draws what the uninterrupted one drew; the losses show that sampling did happen.
TEST(Resume, BitExactWithSubwordSampling) {
  const std::string sampling =
      " --set data.src_sampling.enabled=true --set data.src_sampling.alpha=0.2"
      " --set data.tgt_sampling.enabled=true --set data.tgt_sampling.alpha=0.2";
  std::map<int64_t, std::string> sampled;
  check_bit_exact_resume("transformer", " --set train.device=cpu" + sampling, &sampled);
  nmt_test::TempDir dir;
  const std::string data = small_data(dir, 400);
  ASSERT_FALSE(::testing::Test::HasFailure());
  auto r = run_command(train_command(data, dir / "plain", 12, "transformer",
                                     " --set train.device=cpu"));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto plain = step_rows(dir / "plain/metrics.jsonl");
  ASSERT_EQ(plain.size(), 12u);
  int differ = 0;
  for (int64_t step = 1; step <= 12; ++step) differ += plain.at(step) != sampled.at(step);
  EXPECT_GE(differ, 11) << "sampling changed the batches of only " << differ << " of 12 steps";
  // Another draw under a checkpoint is refused like other data changes.
  r = run_command(train_command(data, dir / "plain", 24, "transformer",
                                " --set train.device=cpu" + sampling) + " --resume");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("data.src_sampling changed from off to {"), std::string::npos)
      << r.output;
}

// A change that breaks exact continuation is refused, naming the key and the way out.
TEST(Resume, RefusesChangedBatchingOrOptimizerUnlessReset) {
  nmt_test::TempDir dir;
  const std::string data = small_data(dir);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::string run = dir / "run";
  auto r = run_command(train_command(data, run, 12));
  ASSERT_EQ(r.status, 0) << r.output;

  r = run_command(train_command(data, run, 24) + " --resume --set train.batch_tokens=400");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("train.batch_tokens changed from 500 to 400"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("--reset-data"), std::string::npos) << r.output;
  r = run_command(train_command(data, run, 24) + " --resume --set train.warmup_steps=20");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("train.warmup_steps changed from 10 to 20"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("--reset-optimizer"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(run + "/checkpoints/ckpt-00000024"));

  r = run_command(train_command(data, run, 18) +
                  " --resume --reset-data --set train.batch_tokens=400");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--reset-data: starting a fresh pass"), std::string::npos) << r.output;
  r = run_command(train_command(data, run, 24) +
                  " --resume --reset-data --reset-optimizer --set train.batch_tokens=400"
                  " --set train.warmup_steps=20");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(run + "/checkpoints/ckpt-00000024/model.pt"));
  r = run_command(train_command(data, dir / "other", 5) + " --reset-data");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("go with --resume"), std::string::npos) << r.output;
}

// A non-finite loss skips its update and training goes on; too many in a row stop training with
// an error, leaving the last good checkpoint usable.
TEST(Divergence, NonFiniteStepsAreSkippedThenStopTraining) {
  nmt_test::TempDir dir;
  const std::string data = small_data(dir);
  auto r = run_command("NMT_DEBUG_NAN_STEPS=3 " + train_command(data, dir / "skip", 10));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("update 3 skipped"), std::string::npos) << r.output;
  const auto rows = step_rows(dir / "skip/metrics.jsonl");
  ASSERT_EQ(rows.size(), 10u);  // ten real updates: the skipped attempt is not a step
  for (const auto& [step, row] : rows)
    EXPECT_EQ(row.find("null"), std::string::npos) << "step " << step << ": " << row;

  const std::string run = dir / "diverge";
  r = run_command("NMT_DEBUG_NAN_STEPS=14,15,16 " + train_command(data, run, 30) +
                  " --set train.max_bad_steps=3");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("training diverged: 3 consecutive steps"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(run + "/checkpoints/ckpt-00000012/model.pt"));
  EXPECT_FALSE(std::filesystem::exists(run + "/checkpoints/ckpt-00000024"));
  nmt_test::write_text(dir / "in.txt", "seven\n");
  r = run_command(nmt_bin() + " translate --checkpoint " + run + " --input " + (dir / "in.txt"));
  EXPECT_EQ(r.status, 0) << r.output;
}

// SIGTERM / SIGINT finish the step, save a checkpoint and exit with 128 + signal; metrics.jsonl
// ends with a row for the saved step, which is mostly off the log_every grid of 7.
TEST(Signals, StopSignalSavesAndExitsWithShellStatus) {
  nmt_test::TempDir dir;
  const std::string data = small_data(dir);
  for (const auto& [name, status] :
       std::vector<std::pair<std::string, int>>{{"TERM", 143}, {"INT", 130}}) {
    const std::string run = dir / ("run-" + name);
    // Start training, wait for three logged steps, signal it, and record its exit status.
    const std::string script =
        train_command(data, run, 100000) + " --set train.save_every=100000" +
        " --set train.log_every=7 > " + run + ".log 2>&1 & p=$!; n=0; while [ \"$(cat " + run +
        "/metrics.jsonl 2>/dev/null | grep -c loss)\" -lt 3 ] && [ $n -lt 600 ]; do sleep 0.1;"
        " n=$((n+1)); done; kill -" +
        name + " $p; wait $p; echo $?";
    const auto r = run_command(script);
    EXPECT_EQ(r.output, std::to_string(status) + "\n") << name;
    const auto log = nmt_test::read_text(run + ".log");
    EXPECT_NE(log.find("SIG" + name + " received: saving a checkpoint"), std::string::npos) << log;
    EXPECT_EQ(log.find("error"), std::string::npos) << log;
    const auto rows = step_rows(run + "/metrics.jsonl");
    ASSERT_FALSE(rows.empty());
    char ckpt[32];
    std::snprintf(ckpt, sizeof ckpt, "/checkpoints/ckpt-%08lld",
                  static_cast<long long>(rows.rbegin()->first));
    EXPECT_TRUE(std::filesystem::exists(run + ckpt + "/model.pt")) << ckpt;
  }
}

// SIGTERM and SIGINT at random moments (set-up, the first steps, training, validation, saving):
// every try exits 143 or 130 with a loadable checkpoint at the last logged step. Before the stop
// signals were routed to a watcher thread, a signal that interrupted a oneDNN GEMM kernel wrote
// its frame into the heap and some tries aborted ("corrupted size vs. prev_size").
TEST(Signals, RandomMomentsAlwaysLeaveALoadableCheckpoint) {
  nmt_test::TempDir dir;
  const auto r = run_command("scripts/stress_signals.sh --quick --tries 42 --signals TERM,INT,TERM"
                             " --seed 7 --bin " + nmt_bin() + " --work " + dir.path());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("42 tries, 0 failed"), std::string::npos) << r.output;
}

// The invariant behind that: in a training process, every thread but one (the watcher, which
// takes them with sigwait) blocks SIGINT and SIGTERM, OpenMP's workers included.
TEST(Signals, OnlyTheWatcherThreadCanTakeStopSignals) {
  nmt_test::TempDir dir;
  const std::string data = small_data(dir);
  const std::string run = dir / "run";
  const std::string script =
      train_command(data, run, 100000) + " --set train.threads=2 > " + run +
      ".log 2>&1 & p=$!; n=0; while [ \"$(cat " + run +
      "/metrics.jsonl 2>/dev/null | grep -c loss)\" -lt 3 ] && [ $n -lt 600 ]; do sleep 0.1;"
      " n=$((n+1)); done; for t in /proc/$p/task/*; do grep SigBlk $t/status; done;"
      " kill -TERM $p; wait $p; echo status $?";
  const auto r = run_command(script);
  ASSERT_NE(r.output.find("status 143"), std::string::npos) << r.output;
  int threads = 0, taking = 0;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("SigBlk:", 0) != 0) continue;
    ++threads;
    const uint64_t mask = std::stoull(line.substr(line.find_first_not_of(" \t", 7)), nullptr, 16);
    const uint64_t stop = (1ULL << (SIGINT - 1)) | (1ULL << (SIGTERM - 1));
    if ((mask & stop) != stop) ++taking;
  }
  EXPECT_GE(threads, 3) << r.output;  // main, the watcher, an OpenMP worker
  EXPECT_EQ(taking, 1) << r.output;
}

// kill -9 at random moments, saves included: once a checkpoint has been saved, the newest
// complete one always loads, and --resume always continues. Every third kill lands at a random
// moment after the start (start-up and resume included); the others at a random moment after
// training has begun, so a slow start on a loaded machine cannot leave the test without saves.
TEST(CrashSafety, SurvivesRepeatedSigkill) {
  nmt_test::TempDir dir;
  const std::string data = small_data(dir);
  const std::string run = dir / "run";
  nmt_test::write_text(dir / "in.txt", "seven\n");
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> delay_ms(300, 2500);
  int kills = 0, with_checkpoint = 0, with_partial = 0;
  for (int i = 0; i < 24; ++i) {
    const bool resume =
        std::filesystem::exists(run + "/checkpoints") &&
        !nmt_test::run_command("ls -d " + run + "/checkpoints/ckpt-* 2>/dev/null").output.empty();
    const std::string cmd = train_command(data, run, 100000) + " --set train.save_every=1" +
                            (resume ? " --resume" : "");
    // The trainer logs the batch count just before its first step.
    const bool from_start = i % 3 == 0;
    const double delay_s = (delay_ms(rng) - (from_start ? 0 : 300)) / 1000.0;
    const std::string wait_for_training =
        from_start ? ""
                   : "n=0; while ! grep -q 'batches per epoch' " + run +
                         ".log && kill -0 $p 2>/dev/null && [ $n -lt 1200 ]; do sleep 0.05;"
                         " n=$((n+1)); done; ";
    const auto r =
        run_command(cmd + " > " + run + ".log 2>&1 & p=$!; " + wait_for_training + "sleep " +
                    std::to_string(delay_s) + "; kill -9 $p; wait $p; echo $?");
    // The shell may also report "Killed"; the status line comes last.
    ASSERT_GE(r.output.size(), 4u);
    ASSERT_EQ(r.output.substr(r.output.size() - 4), "137\n")
        << "run " << i << " ended before the kill: " << r.output;
    ++kills;
    if (!run_command("ls -d " + run + "/checkpoints/.tmp-* 2>/dev/null").output.empty())
      ++with_partial;
    const auto newest = run_command("ls -d " + run + "/checkpoints/ckpt-* 2>/dev/null | tail -1");
    if (newest.output.empty()) continue;
    ++with_checkpoint;
    std::string ckpt = newest.output;
    ckpt.pop_back();
    const auto t =
        run_command(nmt_bin() + " translate --checkpoint " + ckpt + " --input " + (dir / "in.txt"));
    EXPECT_EQ(t.status, 0) << "kill " << i << ": " << ckpt << "\n" << t.output;
  }
  RecordProperty("kills", kills);
  RecordProperty("kills_leaving_partial_checkpoints", with_partial);
  EXPECT_GE(kills, 20);
  EXPECT_GE(with_checkpoint, 15) << "too few kills after the first save to mean anything";
  // Finally resume to completion: leftovers are cleaned, training goes on.
  const auto newest = run_command("ls -d " + run + "/checkpoints/ckpt-* | tail -1").output;
  const int64_t step = std::stoll(newest.substr(newest.rfind('-') + 1));
  const auto r = run_command(train_command(data, run, static_cast<int>(step) + 3) + " --resume");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(run_command("ls -d " + run + "/checkpoints/.tmp-* 2>/dev/null").output.empty());
  std::cout << "kills: " << kills << ", with a checkpoint: " << with_checkpoint
            << ", leaving a partial save: " << with_partial << "\n";
}

// Damaged checkpoints give one clear error naming the file: no crash, no backtrace, no garbage.
class HostileCheckpoints : public ::testing::TestWithParam<std::string> {};

TEST_P(HostileCheckpoints, ClearErrorsNamingTheFile) {
  const std::string arch = GetParam();
  namespace fs = std::filesystem;
  nmt_test::TempDir dir;
  const std::string data = small_data(dir);
  auto r = run_command(train_command(data, dir / "a", 3, arch));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_command(train_command(data, dir / "b", 1, arch) + " --set vocab.size=60");
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string good = dir / "a/checkpoints/ckpt-00000003";
  nmt_test::write_text(dir / "in.txt", "seven\n");

  struct Case {
    std::string name, file, expected;
    std::function<void(const std::string&)> damage;
  };
  auto truncate = [](const std::string& path) {
    const auto text = nmt_test::read_text(path);
    nmt_test::write_text(path, text.substr(0, text.size() / 3));
  };
  auto flip = [](const std::string& path) {
    auto text = nmt_test::read_text(path);
    for (size_t i = 100; i < text.size(); i += 211) text[i] = static_cast<char>(text[i] ^ 0x5a);
    nmt_test::write_text(path, text);
  };
  const std::vector<Case> cases = {
      {"truncated weights", "model.pt", "model.pt", truncate},
      {"corrupted weights", "model.pt", "model.pt", flip},
      {"wrong version", "state.json", "unsupported checkpoint format version 99",
       [](const std::string& p) { nmt_test::write_text(p, R"({"format_version": 99})"); }},
      {"garbage state", "state.json", "state.json",
       [](const std::string& p) { nmt_test::write_text(p, "{\"step\": "); }},
      {"garbage config", "config.json", "config.json",
       [](const std::string& p) { nmt_test::write_text(p, "[1, 2"); }},
      {"truncated vocabulary", "spm.model", "spm.model", truncate},
      {"other vocabulary", "spm.model", "the vocabulary does not match the weights",
       [&](const std::string& p) {
         fs::copy_file(dir / "b/spm.model", p, fs::copy_options::overwrite_existing);
       }},
  };
  for (const auto& c : cases) {
    const std::string bad = dir / ("bad-" + std::to_string(&c - cases.data()));
    fs::copy(good, bad, fs::copy_options::recursive);
    c.damage(bad + "/" + c.file);
    r = run_command(nmt_bin() + " translate --checkpoint " + bad + " --input " + (dir / "in.txt"));
    EXPECT_EQ(r.status, 1) << c.name << "\n" << r.output;
    EXPECT_NE(r.output.find("nmt: error:"), std::string::npos) << c.name << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expected), std::string::npos) << c.name << "\n" << r.output;
    EXPECT_EQ(r.output.find("frame #"), std::string::npos) << c.name << "\n" << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, HostileCheckpoints, ::testing::Values("transformer", "rnn"));
