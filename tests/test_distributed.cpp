// Data-parallel training: torchrun's environment, and the binary launched by torchrun with two
// processes of one thread over loopback (Gloo), against one process.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "helpers.h"
#include "util/net.h"
#include "group/group.h"
#include "train/metrics_log.h"
#include "util/blas.h"
#include "util/util.h"

// The data-parallel tests run their ranks on the CPU, which needs Gloo in the build.
class DataParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!nmt::cpu_groups_available())
      GTEST_SKIP() << "this build has no Gloo (a CUDA LibTorch such as pip's): groups on the CPU "
                      "need Debian's LibTorch and libgloo-dev";
  }
};

using nmt_test::nmt_bin;
using nmt_test::run_command;

namespace {

// Sets environment variables for one scope, restoring the old values after.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::string>& vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name.c_str());
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      if (value.empty())
        ::unsetenv(name.c_str());
      else
        ::setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value)
        ::setenv(name.c_str(), value->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

const std::map<std::string, std::string> kNoLaunch = {{"RANK", ""},
                                                      {"WORLD_SIZE", ""},
                                                      {"LOCAL_RANK", ""},
                                                      {"MASTER_ADDR", ""},
                                                      {"MASTER_PORT", ""},
                                                      {"TORCHELASTIC_USE_AGENT_STORE", ""},
                                                      {"TORCHELASTIC_RESTART_COUNT", ""},
                                                      {"TORCHELASTIC_RUN_ID", ""}};

std::string expect_error(const std::map<std::string, std::string>& vars) {
  ScopedEnv clean(kNoLaunch);
  ScopedEnv env(vars);
  try {
    nmt::read_launch_env();
  } catch (const nmt::Error& e) {
    return e.what();
  }
  return "";
}

// A small quickstart model, one thread, no dropout (so that one process and two draw nothing
// that differs), a row in metrics.jsonl every step.
std::string train_args(const nmt_test::TempDir& dir, const std::string& run, int steps) {
  const std::string d = dir / "data";
  return " train --config configs/quickstart.json --run-dir " + (dir / run) +
         " --set data.train_src=" + d + "/train.en --set data.train_tgt=" + d + "/train.de" +
         " --set data.valid_src= --set data.valid_tgt= --set vocab.size=80" +
         " --set model.d_model=32 --set model.d_ff=64 --set model.heads=2" +
         " --set model.dropout=0 --set model.attention_dropout=0 --set train.threads=1" +
         " --set train.batch_tokens=600 --set train.warmup_steps=20 --set train.log_every=1" +
         " --set train.save_every=" + std::to_string(steps) +
         " --set train.max_steps=" + std::to_string(steps);
}

}  // namespace

TEST(LaunchEnv, ReadsTorchrunsVariables) {
  {
    ScopedEnv clean(kNoLaunch);
    const auto env = nmt::read_launch_env();
    EXPECT_FALSE(env.distributed());
    EXPECT_EQ(env.rank, 0);
    EXPECT_EQ(env.world_size, 1);
  }
  {
    ScopedEnv clean(kNoLaunch);
    ScopedEnv env({{"RANK", "3"},
                   {"WORLD_SIZE", "4"},
                   {"LOCAL_RANK", "1"},
                   {"MASTER_ADDR", "10.0.0.1"},
                   {"MASTER_PORT", "29500"},
                   {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                   {"TORCHELASTIC_RESTART_COUNT", "2"},
                   {"TORCHELASTIC_RUN_ID", "none"}});
    const auto e = nmt::read_launch_env();
    EXPECT_TRUE(e.distributed());
    EXPECT_EQ(e.rank, 3);
    EXPECT_EQ(e.world_size, 4);
    EXPECT_EQ(e.local_rank, 1);
    EXPECT_EQ(e.master_addr, "10.0.0.1");
    EXPECT_EQ(e.master_port, 29500);
    EXPECT_TRUE(e.agent_store);
    EXPECT_EQ(e.restart_count, 2);
    EXPECT_TRUE(e.under_torchrun);
  }
  {
    // One process: a group only where a launcher gave its address (torchrun, --nproc 1).
    ScopedEnv clean(kNoLaunch);
    ScopedEnv env({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
    EXPECT_FALSE(nmt::read_launch_env().distributed());
    ScopedEnv launcher({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}});
    EXPECT_TRUE(nmt::read_launch_env().distributed());
  }
  EXPECT_NE(expect_error({{"RANK", "1"}}).find("WORLD_SIZE is not set"), std::string::npos);
  EXPECT_NE(expect_error({{"RANK", "2"}, {"WORLD_SIZE", "2"}})
                .find("RANK=2: expected an integer in [0, 1]"),
            std::string::npos);
  EXPECT_NE(expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}}).find("MASTER_ADDR is not set"),
            std::string::npos);
  EXPECT_NE(
      expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "x"}})
          .find("MASTER_PORT=x"),
      std::string::npos);
}

TEST(LaunchEnv, LoopbackAddresses) {
  for (const char* a : {"localhost", "127.0.0.1", "127.0.1.1", "::1", "::ffff:127.0.0.1",
                        "::FFFF:127.0.1.1", "LocalHost"})
    EXPECT_TRUE(nmt::is_loopback_address(a)) << a;
  for (const char* a :
       {"10.0.0.1", "machine0", "::ffff:10.0.0.1", "::2", "fe80::1", "1127.0.0.1", ""})
    EXPECT_FALSE(nmt::is_loopback_address(a)) << a;
}

// torchrun --nproc_per_node 2 (1 thread each, accum_steps 1) trains like one process with
// accum_steps 2 and the same batch_tokens: each step is the same pairs, the loss is normalised by
// the step's tokens over both processes, so the losses agree to float rounding; and the two
// ranks' weights are bitwise identical after every step (NMT_DEBUG_CHECK_REPLICAS).
TEST_F(DataParallel, TwoProcessesTrainLikeOneWithTwiceTheAccumulation) {
  nmt_test::TempDir dir;
  const auto gen = run_command("python3 scripts/make_quickstart_data.py --out " + (dir / "data") +
                               " --train 400 --valid 10 --test 10");
  ASSERT_EQ(gen.status, 0) << gen.output;
  constexpr int kSteps = 30;
  auto one =
      run_command(nmt_bin() + train_args(dir, "one", kSteps) + " --set train.accum_steps=2 2>&1");
  ASSERT_EQ(one.status, 0) << one.output;
  // The same vocabulary: the one-process run trained it.
  const std::string vocab = " --set vocab.model=" + (dir / "one/spm.model");
  // scripts/torchrun: Debian's torchrun with its Python 3.11 fix.
  auto two =
      run_command("NMT_DEBUG_CHECK_REPLICAS=1 scripts/torchrun --nproc_per_node 2 --master_port " +
                  std::to_string(nmt::free_loopback_port()) + " --no_python " +
                  nmt_test::nmt_binary() + train_args(dir, "two", kSteps) + vocab + " 2>&1");
  ASSERT_EQ(two.status, 0) << two.output;

  const auto log = nmt_test::read_text(dir / "two/train.log");
  EXPECT_NE(log.find("data-parallel: 2 processes (gloo), this is rank 0"), std::string::npos)
      << log;
  EXPECT_NE(log.find("launched by torchrun"), std::string::npos) << log;
  EXPECT_NE(log.find("the weights of all 2 ranks were bitwise identical after each of 30 steps"),
            std::string::npos)
      << log;

  const auto a = nmt::read_metrics(dir / "one/metrics.jsonl").train;
  const auto b = nmt::read_metrics(dir / "two/metrics.jsonl").train;
  ASSERT_EQ(a.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(b.size(), a.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].step, b[i].step);
    EXPECT_EQ(a[i].tgt_tokens, b[i].tgt_tokens) << "step " << a[i].step;
    const double rel = std::abs(a[i].loss - b[i].loss) / std::abs(a[i].loss);
    worst = std::max(worst, rel);
    EXPECT_LE(rel, 1e-4) << "step " << a[i].step << ": " << a[i].loss << " vs " << b[i].loss;
  }
  std::printf("[          ] largest relative loss difference over %d steps: %.3g\n", kSteps, worst);
  // Only rank 0 writes: one metrics file, one set of checkpoints.
  EXPECT_TRUE(nmt::file_exists(dir / "two/checkpoints/ckpt-00000030/model.pt"));

  // torchrun with one process makes a group of one (as PyTorch's DDP does: the path NCCL takes
  // on one GPU) and trains exactly like no launcher: the same losses and weights, bit for bit.
  auto single = run_command("scripts/torchrun --nproc_per_node 1 --master_port " +
                            std::to_string(nmt::free_loopback_port()) + " --no_python " +
                            nmt_test::nmt_binary() + train_args(dir, "single", kSteps) + vocab +
                            " --set train.accum_steps=2 2>&1");
  ASSERT_EQ(single.status, 0) << single.output;
  const auto single_log = nmt_test::read_text(dir / "single/train.log");
  EXPECT_NE(single_log.find("data-parallel: 1 process (gloo), this is rank 0"), std::string::npos)
      << single_log;
  const auto c = nmt::read_metrics(dir / "single/metrics.jsonl").train;
  ASSERT_EQ(c.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].loss, c[i].loss) << "step " << a[i].step;
  EXPECT_TRUE(nmt_test::read_text(dir / "one/checkpoints/ckpt-00000030/model.pt") ==
              nmt_test::read_text(dir / "single/checkpoints/ckpt-00000030/model.pt"));
}

// With subword sampling the two processes draw, pair for pair, what one process with twice the
// accumulation draws: the same target tokens at every step, the losses to float rounding.
TEST_F(DataParallel, TwoProcessesDrawTheSegmentationsOneProcessDraws) {
  nmt_test::TempDir dir;
  const auto gen = run_command("python3 scripts/make_quickstart_data.py --out " + (dir / "data") +
                               " --train 400 --valid 10 --test 10");
  ASSERT_EQ(gen.status, 0) << gen.output;
  constexpr int kSteps = 16;
  const std::string sampling =
      " --set data.src_sampling.enabled=true --set data.src_sampling.alpha=0.2"
      " --set data.tgt_sampling.enabled=true --set data.tgt_sampling.alpha=0.2";
  auto one = run_command(nmt_bin() + train_args(dir, "one", kSteps) + sampling +
                         " --set train.accum_steps=2 2>&1");
  ASSERT_EQ(one.status, 0) << one.output;
  const std::string vocab = " --set vocab.model=" + (dir / "one/spm.model");
  auto two = run_command("scripts/torchrun --nproc_per_node 2 --master_port " +
                         std::to_string(nmt::free_loopback_port()) + " --no_python " +
                         nmt_test::nmt_binary() + train_args(dir, "two", kSteps) + vocab +
                         sampling + " 2>&1");
  ASSERT_EQ(two.status, 0) << two.output;
  const auto a = nmt::read_metrics(dir / "one/metrics.jsonl").train;
  const auto b = nmt::read_metrics(dir / "two/metrics.jsonl").train;
  ASSERT_EQ(a.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].tgt_tokens, b[i].tgt_tokens) << "step " << a[i].step;
    EXPECT_LE(std::abs(a[i].loss - b[i].loss) / std::abs(a[i].loss), 1e-4) << "step " << a[i].step;
  }
}

namespace {
std::vector<std::pair<int64_t, double>> losses_of(const std::string& metrics) {
  std::vector<std::pair<int64_t, double>> out;
  for (const auto& r : nmt::read_metrics(metrics).train) out.emplace_back(r.step, r.loss);
  return out;
}

// A data set and the vocabulary of a one-process run, for the tests below.
struct Fixture {
  nmt_test::TempDir dir;
  std::string vocab;
  Fixture() {
    const auto gen = run_command("python3 scripts/make_quickstart_data.py --out " + (dir / "data") +
                                 " --train 400 --valid 10 --test 10");
    EXPECT_EQ(gen.status, 0) << gen.output;
    const auto r = run_command(nmt_bin() + train_args(dir, "vocab", 1) + " 2>&1");
    EXPECT_EQ(r.status, 0) << r.output;
    vocab = " --set vocab.model=" + (dir / "vocab/spm.model");
  }
};
}  // namespace

// `nmt train --nproc 2`, dropout on, validation and a checkpoint at step 15: 15 steps and a
// --resume to 30 give the same per-step losses and model.pt bytes as 30 steps in one go (each
// rank's generator and the shared data position are in the checkpoint). A resume with another
// number of processes is refused, naming both, unless --reset-data.
TEST_F(DataParallel, ResumeWithTwoProcessesIsBitExact) {
  Fixture f;
  const std::string same = f.vocab + " --set model.dropout=0.1 --set model.attention_dropout=0.1" +
                           " --set data.valid_src=" + (f.dir / "data/valid.en") +
                           " --set data.valid_tgt=" + (f.dir / "data/valid.de") +
                           " --set train.valid_every=15 --set train.save_every=15";
  const std::string common = same + " --nproc 2 2>&1";
  auto full = run_command(nmt_bin() + train_args(f.dir, "full", 30) + common);
  ASSERT_EQ(full.status, 0) << full.output;
  auto half = run_command(nmt_bin() + train_args(f.dir, "half", 15) + common);
  ASSERT_EQ(half.status, 0) << half.output;
  auto rest = run_command(nmt_bin() + train_args(f.dir, "half", 30) + common + " --resume");
  ASSERT_EQ(rest.status, 0) << rest.output;
  EXPECT_NE(nmt_test::read_text(f.dir / "half/train.log").find("resumed from"), std::string::npos);
  EXPECT_TRUE(nmt::file_exists(f.dir / "half/checkpoints/ckpt-00000015/rng_ranks.pt"));

  const auto a = losses_of(f.dir / "full/metrics.jsonl");
  ASSERT_EQ(a.size(), 30u);
  EXPECT_EQ(a, losses_of(f.dir / "half/metrics.jsonl"));
  const auto weights = nmt_test::read_text(f.dir / "full/checkpoints/ckpt-00000030/model.pt");
  EXPECT_FALSE(weights.empty());
  EXPECT_TRUE(weights == nmt_test::read_text(f.dir / "half/checkpoints/ckpt-00000030/model.pt"));

  // One process cannot continue a two-process run's data position...
  auto one = run_command(nmt_bin() + train_args(f.dir, "half", 40) + same + " --resume 2>&1");
  EXPECT_EQ(one.status, 1) << one.output;
  EXPECT_NE(one.output.find("was trained by 2 processes and this run has 1"), std::string::npos)
      << one.output;
  EXPECT_NE(one.output.find("--reset-data"), std::string::npos) << one.output;
  // ...unless it starts a fresh pass over the data.
  auto reset =
      run_command(nmt_bin() + train_args(f.dir, "half", 32) + same + " --resume --reset-data 2>&1");
  EXPECT_EQ(reset.status, 0) << reset.output;
}

// A rank that dies (SIGKILL) makes the other exit 1 at once with one line naming it, well within
// train.dist_timeout, and leaves no checkpoint behind.
TEST_F(DataParallel, AKilledRankStopsTheOtherWithAClearError) {
  Fixture f;
  const std::string args = train_args(f.dir, "run", 1000000) + f.vocab +
                           " --set train.dist_timeout=30 --set train.save_every=1000000";
  const std::string env =
      "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(nmt::free_loopback_port()) +
      " WORLD_SIZE=2";
  const std::string script =
      "(" + env + " RANK=0 " + nmt_bin() + args + " > " + (f.dir / "rank0.out") +
      " 2>&1; echo $? > " + (f.dir / "rank0.rc") + ") & " + env + " RANK=1 " + nmt_bin() + args +
      " > " + (f.dir / "rank1.out") + " 2>&1 & R1=$!; " +
      // Killed once both are training.
      "for i in $(seq 200); do grep -q 'step 5 ' " + (f.dir / "run/train.log") +
      " 2>/dev/null && break; sleep 0.1; done; kill -9 $R1; s=$(date +%s%N); wait 2>/dev/null; " +
      "echo $(( ($(date +%s%N) - s) / 1000000 ))";
  nmt_test::write_text(f.dir / "kill.sh", script);
  const auto r = run_command("bash " + (f.dir / "kill.sh"));
  ASSERT_EQ(r.status, 0) << r.output;
  // The last line: milliseconds from the kill to rank 0's exit.
  const auto lines = nmt::split(nmt::trim(r.output), '\n');
  const double seconds = std::stod(lines.back()) / 1000.0;
  EXPECT_LT(seconds, 15.0) << "rank 0 took " << seconds << " s to give up";
  std::printf("[          ] rank 0 exited %.2f s after rank 1 was killed\n", seconds);
  EXPECT_EQ(nmt_test::read_text(f.dir / "rank0.rc"), "1\n");
  const auto out = nmt_test::read_text(f.dir / "rank0.out");
  EXPECT_NE(out.find("nmt: error: rank 0: lost rank 1 (exited, or stopped answering within "
                     "train.dist_timeout) during "),
            std::string::npos)
      << out;
  EXPECT_FALSE(std::filesystem::exists(f.dir / "run/checkpoints")) << out;
}

// torchrun --max_restarts 1: rank 1 dies after step 12 (NMT_DEBUG_EXIT), torchrun restarts the
// group, and it continues from the step-10 checkpoint by itself (train.auto_resume) to step 20.
TEST_F(DataParallel, TorchrunRestartResumesFromTheNewestCheckpoint) {
  Fixture f;
  const auto r = run_command(
      "NMT_DEBUG_EXIT=1:12 scripts/torchrun --nproc_per_node 2 --max_restarts 1 --master_port " +
      std::to_string(nmt::free_loopback_port()) + " --no_python " + nmt_test::nmt_binary() +
      train_args(f.dir, "run", 20) + f.vocab + " --set train.save_every=10 2>&1");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto log = nmt_test::read_text(f.dir / "run/train.log");
  EXPECT_NE(log.find("train.auto_resume: "), std::string::npos) << log;
  EXPECT_NE(log.find("resuming (torchrun restart 1)"), std::string::npos) << log;
  EXPECT_NE(log.find("at step 10, epoch"), std::string::npos) << log;
  const auto steps = losses_of(f.dir / "run/metrics.jsonl");
  ASSERT_EQ(steps.size(), 20u);
  EXPECT_EQ(steps.back().first, 20);
  EXPECT_TRUE(nmt::file_exists(f.dir / "run/checkpoints/ckpt-00000020/model.pt"));
}

namespace {
// Two torchrun agents on this machine (--nnodes 2, one process each, static rendezvous at
// 127.0.0.1), node N training 10 steps into RUN_N under the fixture, its output in nodeN.out.
// Prints "node0 RC" and "node1 RC".
nmt_test::RunResult run_two_nodes(const Fixture& f, const std::string& args,
                                  const std::string& run0, const std::string& run1,
                                  const std::string& env1 = "") {
  const std::string port = std::to_string(nmt::free_loopback_port());
  const auto agent = [&](int node, const std::string& run) {
    return (node == 1 ? env1 : std::string()) +
           "timeout 120 scripts/torchrun --nnodes 2 --node_rank " + std::to_string(node) +
           " --nproc_per_node 1 --master_addr 127.0.0.1 --master_port " + port + " --no_python " +
           nmt_test::nmt_binary() + train_args(f.dir, run, 10) + args + " > " +
           (f.dir / ("node" + std::to_string(node) + ".out")) + " 2>&1";
  };
  const std::string script =
      agent(1, run1) + " & N1=$!; " + agent(0, run0) + "; echo node0 $?; wait $N1; echo node1 $?";
  nmt_test::write_text(f.dir / "nodes.sh", script);
  return run_command("NMT_DEBUG_CHECK_REPLICAS=1 bash " + (f.dir / "nodes.sh"));
}

// The closing checks of a run on several torchrun nodes (RUN under the fixture) against `--nproc 2`
// on one machine ("local", 10 steps): a group of 2 over Gloo, replicas checked bitwise identical
// after every step, and the same per-step losses and checkpoint bytes.
void expect_trains_like_one_machine(const Fixture& f, const std::string& run) {
  const auto log = nmt_test::read_text(f.dir / (run + "/train.log"));
  EXPECT_NE(log.find("data-parallel: 2 processes (gloo), this is rank 0"), std::string::npos)
      << log;
  EXPECT_NE(log.find("bitwise identical after each of 10 steps"), std::string::npos) << log;
  const auto expected = losses_of(f.dir / "local/metrics.jsonl");
  ASSERT_EQ(expected.size(), 10u);
  EXPECT_EQ(losses_of(f.dir / (run + "/metrics.jsonl")), expected) << run;
  EXPECT_TRUE(nmt_test::read_text(f.dir / "local/checkpoints/ckpt-00000010/model.pt") ==
              nmt_test::read_text(f.dir / (run + "/checkpoints/ckpt-00000010/model.pt")))
      << run;
}
}  // namespace

// Several machines, as two torchrun agents on this one (--nnodes 2, one process each, static
// rendezvous at node 0's address): the same group and the same training as one node's two
// processes, bit for bit.
TEST_F(DataParallel, TwoTorchrunNodesTrainLikeOneNodeWithTwoProcesses) {
  Fixture f;
  const std::string args = f.vocab + " --set train.dist_timeout=60";
  auto local = run_command(nmt_bin() + train_args(f.dir, "local", 10) + args + " --nproc 2 2>&1");
  ASSERT_EQ(local.status, 0) << local.output;
  const auto r = run_two_nodes(f, args, "nodes", "nodes");
  ASSERT_NE(r.output.find("node0 0\nnode1 0"), std::string::npos)
      << r.output << nmt_test::read_text(f.dir / "node0.out")
      << nmt_test::read_text(f.dir / "node1.out");
  expect_trains_like_one_machine(f, "nodes");
}

// precision auto on machines that differ (node 1 stands in for one without bfloat16 products):
// every process trains in fp32, as --nproc 2 in fp32 on one machine does.
TEST_F(DataParallel, AutoPrecisionAgreesAcrossUnlikeMachines) {
  if (!nmt::have_bf16_gemm())
    GTEST_SKIP() << "needs bfloat16 products: " << nmt::bf16_gemm_missing();
  Fixture f;
  const std::string args = f.vocab + " --set train.dist_timeout=60";
  auto local = run_command(nmt_bin() + train_args(f.dir, "local", 10) + args +
                           " --set train.precision=fp32 --nproc 2 2>&1");
  ASSERT_EQ(local.status, 0) << local.output;
  const auto r = run_two_nodes(f, args + " --set train.precision=auto", "nodes", "nodes",
                               "NMT_DEBUG_NO_BF16=1 ");
  const auto out0 = nmt_test::read_text(f.dir / "node0.out");
  const auto out1 = nmt_test::read_text(f.dir / "node1.out");
  ASSERT_NE(r.output.find("node0 0\nnode1 0"), std::string::npos) << r.output << out0 << out1;
  const auto log = nmt_test::read_text(f.dir / "nodes/train.log");
  EXPECT_NE(log.find("precision bf16 (auto: this CPU multiplies bfloat16)"), std::string::npos)
      << log;
  EXPECT_NE(log.find("precision auto: 1 of 2 processes can multiply in bfloat16; all train in "
                     "fp32"),
            std::string::npos)
      << log;
  expect_trains_like_one_machine(f, "nodes");
}

// Rank 0 writes the run directory and the others read it: a rank whose --run-dir is another
// directory (a machine without the shared file system, or a typo) stops with a clear error, the
// directory missing or holding an earlier start's token, and the group fails with it.
TEST_F(DataParallel, ARunDirectoryThatIsNotSharedIsRefused) {
  Fixture f;
  const std::string args = f.vocab + " --set train.dist_timeout=30";
  for (const std::string why : {"is missing", "holds another run's token"}) {
    if (why != "is missing")  // node 1's directory: a copy of node 0's from the first start
      ASSERT_EQ(run_command("cp -r " + (f.dir / "node0") + " " + (f.dir / "node1")).status, 0);
    const auto started = std::chrono::steady_clock::now();
    const auto r = run_two_nodes(f, args, "node0", "node1");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const auto out1 = nmt_test::read_text(f.dir / "node1.out");
    EXPECT_EQ(r.output.find("node0 0"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("node1 0"), std::string::npos) << r.output;
    EXPECT_NE(out1.find("rank 1: the run directory " + (f.dir / "node1") +
                        " is not the one rank 0 writes (" + (f.dir / "node1/.rank0_token") + " " +
                        why + "): "),
              std::string::npos)
        << out1;
    EXPECT_NE(out1.find("on a file system that all machines share"), std::string::npos) << out1;
    EXPECT_LT(seconds, 30.0) << r.output << out1;
    EXPECT_FALSE(nmt::file_exists(f.dir / "node0/checkpoints/ckpt-00000010/model.pt"));
  }
}

// Two machines made of this one (scripts/two_machines.sh: two network namespaces joined by a
// virtual link, each with its own host name and /etc/hosts, where a machine's own name is
// 127.0.1.1 as Debian's installer writes it), one torchrun agent on each, the master address
// node 0's host name, with the static and the c10d rendezvous. Gloo must listen where the other
// machine reaches it (torch.distributed's default, the host name's address, is 127.0.1.1 here
// and fails), and the run must equal `--nproc 2` on one machine.
TEST_F(DataParallel, TwoMachinesOverAVirtualNetworkTrainLikeOneMachine) {
  Fixture f;
  const std::string args = f.vocab + " --set train.dist_timeout=60";
  auto local = run_command(nmt_bin() + train_args(f.dir, "local", 10) + args + " --nproc 2 2>&1");
  ASSERT_EQ(local.status, 0) << local.output;
  for (const std::string rdzv : {"static", "c10d"}) {
    const auto r =
        run_command("NMT_DEBUG_CHECK_REPLICAS=1 RDZV=" + rdzv +
                    " TIMEOUT=240 NMT=" + nmt_test::nmt_binary() + " LOGS=" + (f.dir / rdzv) +
                    " scripts/two_machines.sh" + train_args(f.dir, rdzv, 10) + args + " 2>&1");
    if (r.status == 77) GTEST_SKIP() << r.output;
    const auto nodes = nmt_test::read_text(f.dir / (rdzv + ".node0.out")) +
                       nmt_test::read_text(f.dir / (rdzv + ".node1.out"));
    ASSERT_NE(r.output.find("node0 0\nnode1 0"), std::string::npos) << rdzv << r.output << nodes;
    const auto log = nmt_test::read_text(f.dir / (rdzv + "/train.log"));
    EXPECT_NE(log.find("this is rank 0, store machine"), std::string::npos) << log;
    // Rank 0 logs every rank's address: none may be a loopback one.
    EXPECT_NE(log.find("gloo: rank 0 at tcp"), std::string::npos) << log;
    EXPECT_NE(log.find("gloo: rank 1 at tcp"), std::string::npos) << log;
    EXPECT_EQ(log.find("addr=[127."), std::string::npos) << log;
    expect_trains_like_one_machine(f, rdzv);
  }
  // A Gloo address the other machine cannot reach: every rank stops with the same line naming
  // it, where Gloo alone waits 5 x train.dist_timeout (102 s of a 20 s timeout before the check).
  // With GLOO_SOCKET_IFNAME=lo on both machines the connection is refused, at once; with a
  // firewall on node 1 (FIREWALL=1) it is never answered, so the ranks stop at the timeout.
  struct Case {
    std::string name, env, timeout, why;
    double within_s;
  };
  for (const Case& c : {Case{"lo", "GLOO_SOCKET_IFNAME=lo", "20",
                             "addr=[127.0.0.1] (GLOO_SOCKET_IFNAME=lo): Connection refused", 20},
                        Case{"firewall", "FIREWALL=1", "10", "): no answer within 10 s", 40}}) {
    const auto started = std::chrono::steady_clock::now();
    const auto r = run_command(c.env + " TIMEOUT=240 NMT=" + nmt_test::nmt_binary() +
                               " LOGS=" + (f.dir / c.name) + " scripts/two_machines.sh" +
                               train_args(f.dir, c.name, 10) + f.vocab +
                               " --set train.dist_timeout=" + c.timeout + " 2>&1");
    if (r.status == 77) GTEST_SKIP() << r.output;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const auto node0 = nmt_test::read_text(f.dir / (c.name + ".node0.out"));
    const auto node1 = nmt_test::read_text(f.dir / (c.name + ".node1.out"));
    EXPECT_EQ(r.output.find("node0 0"), std::string::npos) << c.name << r.output << node0;
    EXPECT_EQ(r.output.find("node1 0"), std::string::npos) << c.name << r.output << node1;
    for (const auto& out : {node0, node1}) {
      EXPECT_NE(out.find("cannot reach rank 1's Gloo address tcp, "), std::string::npos) << out;
      EXPECT_NE(out.find(c.why), std::string::npos) << out;
    }
    EXPECT_LT(seconds, c.within_s) << c.name << node0 << node1;
  }
}

// Set-up errors, each one line on every rank that sees it, well within train.dist_timeout:
// world sizes that differ (either way round), configs that differ, a master that never comes,
// a rank that never comes, and a port in use.
TEST_F(DataParallel, SetUpErrorsAreOneClearLineWellWithinTheTimeout) {
  Fixture f;
  // Runs `before` (shell), then starts the ranks at once ("RANK WORLD_SIZE extra arguments"
  // each) on `port`; returns each rank's output (ending "rc STATUS").
  const auto start = [&](const std::string& name, const std::vector<std::string>& ranks,
                         int timeout, int port, const std::string& before = "") {
    std::string script = before + "s=$(date +%s%N); P=; ";
    for (size_t i = 0; i < ranks.size(); ++i) {
      const auto w = nmt::split(ranks[i], ' ');
      std::string extra;
      for (size_t k = 2; k < w.size(); ++k) extra += " " + w[k];
      const std::string out = f.dir / (name + std::to_string(i) + ".out");
      script += "(MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " RANK=" + w[0] +
                " WORLD_SIZE=" + w[1] + " " + nmt_bin() + train_args(f.dir, name, 5) + f.vocab +
                " --set train.dist_timeout=" + std::to_string(timeout) + extra + " > " + out +
                " 2>&1; echo rc $? >> " + out + ") & P=\"$P $!\"; ";
    }
    script += "wait $P; echo $(( ($(date +%s%N) - s) / 1000000 ))";
    nmt_test::write_text(f.dir / (name + ".sh"), script);
    const auto r = run_command("bash " + (f.dir / (name + ".sh")));
    EXPECT_EQ(r.status, 0) << r.output;
    const double seconds = std::stod(nmt::split(nmt::trim(r.output), '\n').back()) / 1000.0;
    // A short timeout is for the ranks that wait it out; a long one must not be waited out.
    EXPECT_LT(seconds, timeout < 10 ? timeout + 4.0 : timeout / 2.0) << name;
    std::printf("[          ] %s: all ranks exited in %.2f s\n", name.c_str(), seconds);
    std::vector<std::string> outs;
    for (size_t i = 0; i < ranks.size(); ++i)
      outs.push_back(nmt_test::read_text(f.dir / (name + std::to_string(i) + ".out")));
    return outs;
  };
  const auto expect_line = [](const std::string& out, const std::string& line) {
    EXPECT_NE(out.find("nmt: error: " + line), std::string::npos) << out;
    EXPECT_NE(out.find("rc 1\n"), std::string::npos) << out;
  };
  const std::string same = ": every rank must be started with the same WORLD_SIZE";
  auto o = start("sizes", {"0 2", "1 3"}, 60, nmt::free_loopback_port());
  expect_line(o[0], "rank 0: WORLD_SIZE is 2 here but 3 on rank 1" + same);
  expect_line(o[1], "rank 1: WORLD_SIZE is 3 here but 2 on rank 0" + same);
  o = start("sizes_reversed", {"0 3", "1 2"}, 60, nmt::free_loopback_port());
  expect_line(o[0], "rank 0: WORLD_SIZE is 3 here but 2 on rank 1" + same);
  expect_line(o[1], "rank 1: WORLD_SIZE is 2 here but 3 on rank 0" + same);
  o = start("configs", {"0 2", "1 2 --set train.seed=7"}, 60, nmt::free_loopback_port());
  for (const auto& out : o)
    expect_line(out,
                "rank 1's config differs from rank 0's: every rank must be started with "
                "the same config");
  const int port = nmt::free_loopback_port();
  const std::string at = "cannot meet the other ranks at 127.0.0.1:" + std::to_string(port) +
                         " (MASTER_ADDR:MASTER_PORT)";
  const std::string waited = at + " within 4 s: ";
  o = start("no_master", {"1 2"}, 4, port);
  expect_line(o[0], "rank 1: " + waited);
  o = start("no_worker", {"0 2"}, 4, port);
  expect_line(o[0], "rank 0: " + waited + "rank 1 did not join");
  // Another program listens on the port (until this test's script ends).
  const std::string ready = f.dir / "listening";
  o = start("busy", {"0 2"}, 4, port,
            "python3 -c \"import socket,time; s=socket.socket(); s.bind(('127.0.0.1'," +
                std::to_string(port) + ")); s.listen(); open('" + ready +
                "','w').close(); time.sleep(60)\" & L=$!; trap 'kill $L' EXIT; until [ -e " +
                ready + " ]; do sleep 0.05; done; ");
  // Refused at once: no timeout in the message.
  expect_line(o[0], "rank 0: " + at + ": ");
  EXPECT_NE(o[0].find("Address already in use"), std::string::npos) << o[0];
  for (const char* name : {"sizes", "sizes_reversed", "configs"})
    EXPECT_FALSE(std::filesystem::exists(f.dir / (std::string(name) + "/checkpoints"))) << name;
}
