// End to end through the nmt binary: a shortened quickstart (train -> checkpoint -> resume ->
// translate), and the CLI's error paths.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "helpers.h"
#include "train/metrics_log.h"
#include "train/schedule.h"
#include "util/blas.h"

using nlohmann::json;
using nmt_test::run_command;

namespace {
using nmt_test::nmt_bin;

// A tiny quickstart: small corpus, small model, one thread.
std::string train_command(const nmt_test::TempDir& dir, int steps, const std::string& extra = "") {
  const std::string d = dir / "data";
  return nmt_bin() + " train --config configs/quickstart.json --run-dir " + (dir / "run") +
         " --set data.train_src=" + d + "/train.en --set data.train_tgt=" + d + "/train.de" +
         " --set data.valid_src=" + d + "/valid.en --set data.valid_tgt=" + d + "/valid.de" +
         " --set vocab.size=80 --set model.d_model=64 --set model.d_ff=128 --set model.heads=2" +
         " --set train.threads=1 --set train.batch_tokens=1200 --set train.warmup_steps=50" +
         " --set train.log_every=10 --set train.save_every=30 --set train.valid_every=30" +
         " --set train.keep_last=2 --set train.max_steps=" + std::to_string(steps) + " " + extra;
}

// A synthetic quickstart corpus in DIR/data.
nmt_test::RunResult make_data(const nmt_test::TempDir& dir, int train, int valid, int test) {
  return run_command("python3 scripts/make_quickstart_data.py --out " + (dir / "data") +
                     " --train " + std::to_string(train) + " --valid " + std::to_string(valid) +
                     " --test " + std::to_string(test));
}

std::vector<json> metrics_rows(const std::string& path) {
  std::vector<json> rows;
  for (const auto& line : nmt_test::read_lines_of(path)) rows.push_back(json::parse(line));
  return rows;
}
}  // namespace

TEST(EndToEnd, ShortQuickstartTrainsResumesAndTranslates) {
  nmt_test::TempDir dir;
  auto gen = make_data(dir, 2000, 40, 40);
  ASSERT_EQ(gen.status, 0) << gen.output;

  auto r = run_command(train_command(dir, 60));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string run = dir / "run";
  EXPECT_TRUE(std::filesystem::exists(run + "/config.json"));
  EXPECT_TRUE(std::filesystem::exists(run + "/spm.model"));
  EXPECT_TRUE(std::filesystem::exists(run + "/checkpoints/ckpt-00000030/model.pt"));
  EXPECT_TRUE(std::filesystem::exists(run + "/checkpoints/ckpt-00000060/spm.model"));

  auto rows = metrics_rows(run + "/metrics.jsonl");
  std::vector<json> train_rows;
  for (const auto& row : rows)
    if (row.contains("loss")) train_rows.push_back(row);
  ASSERT_EQ(train_rows.size(), 6u);
  for (const auto& row : train_rows) {
    for (const char* key : {"step", "loss", "lr", "tgt_tokens", "tok_per_s"})
      EXPECT_TRUE(row.contains(key)) << key << " missing in " << row.dump();
    EXPECT_GT(row["tgt_tokens"].get<int64_t>(), 0);
    EXPECT_GT(row["tok_per_s"].get<double>(), 0.0);
  }
  EXPECT_EQ(train_rows.front()["step"], 10);
  EXPECT_LT(train_rows.back()["loss"].get<double>(), train_rows.front()["loss"].get<double>() - 0.5)
      << "the loss did not fall";

  // Starting again without --resume must not clobber the run.
  r = run_command(train_command(dir, 60));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--resume"), std::string::npos) << r.output;

  // A row logged after the last checkpoint (as if killed at step 75) is dropped on resume.
  {
    std::ofstream m(run + "/metrics.jsonl", std::ios::app);
    m << R"({"step": 75, "loss": 123.0, "lr": 0.1, "tgt_tokens": 1, "tok_per_s": 1.0})"
      << "\n";
  }
  r = run_command(train_command(dir, 90, "--resume"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(run + "/checkpoints/ckpt-00000090"));
  EXPECT_FALSE(std::filesystem::exists(run + "/checkpoints/ckpt-00000030"));  // keep_last = 2
  rows = metrics_rows(run + "/metrics.jsonl");
  EXPECT_EQ(rows.back()["step"], 90);
  int64_t previous_train_step = 0;
  for (const auto& row : rows) {
    if (!row.contains("loss")) continue;
    EXPECT_GT(row["step"].get<int64_t>(), previous_train_step) << row.dump();
    EXPECT_NE(row["loss"].get<double>(), 123.0) << "stale row survived the resume";
    previous_train_step = row["step"].get<int64_t>();
  }

  // Translate from stdin, with an empty line in the middle: one output line per input line.
  nmt_test::write_text(dir / "in.txt", "forty-two\n\nseven hundred one\n   \nthree\n");
  r = run_command(nmt_bin() + " translate --checkpoint " + run + " --threads 1 < " +
                  (dir / "in.txt") + " > " + (dir / "out.txt"));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto out = nmt_test::read_lines_of(dir / "out.txt");
  ASSERT_EQ(out.size(), 5u);
  EXPECT_FALSE(out[0].empty());
  EXPECT_EQ(out[1], "");
  EXPECT_FALSE(out[2].empty());
  EXPECT_EQ(out[3], "");

  // A checkpoint directory works as well as a run directory, with files for input and output.
  r = run_command(nmt_bin() + " translate --checkpoint " + run +
                  "/checkpoints/ckpt-00000090 --input " + (dir / "data/test.en") + " --output " +
                  (dir / "test.hyp"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(nmt_test::read_lines_of(dir / "test.hyp").size(), 40u);
}

TEST(EndToEnd, ConfigErrorsFailFastWithOneLine) {
  nmt_test::TempDir dir;
  struct Case {
    std::string args;
    std::string message;
  };
  nmt_test::write_text(dir / "bad.json", "{\"train\": {\"max_steps\": 5,}}");
  nmt_test::write_text(dir / "a.en", "x\ny\n");
  nmt_test::write_text(dir / "a.de", "x\n");
  const std::vector<Case> cases = {
      {"--config " + (dir / "bad.json"), "bad.json:1:27: invalid JSON"},
      {"--config configs/quickstart.json --set train.max_stpes=3",
       "train.max_stpes: unknown key (did you mean \"train.max_steps\"?)"},
      {"--config configs/quickstart.json --set model.heads=3",
       "model.heads: 3 does not divide model.d_model 128"},
      {"--config configs/quickstart.json --set data.train_src=/nonexistent/x.en",
       "data.train_src: file not found: /nonexistent/x.en"},
      {"--config configs/quickstart.json --set data.train_src=" + (dir / "a.en") +
           " --set data.train_tgt=" + (dir / "a.de"),
       "line counts differ"},
  };
  for (const auto& c : cases) {
    const auto r = run_command(nmt_bin() + " train --run-dir " + (dir / "run") + " " + c.args);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "run/checkpoints")) << "work started: " << c.args;
  }
}

TEST(EndToEnd, DumpConfigPrintsTheMergedConfig) {
  const auto r = run_command(nmt_bin() +
                             " train --config configs/quickstart.json --dump-config "
                             "--set train.seed=77 2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto j = json::parse(r.output);
  EXPECT_EQ(j["train"]["seed"], 77);
  EXPECT_EQ(j["model"]["d_model"], 128);
  EXPECT_TRUE(j["decode"].contains("max_len_a"));
}

TEST(EndToEnd, EveryCommandHasHelp) {
  for (const char* cmd : {"train", "translate", "eval", "average", "plot"}) {
    const auto r = run_command(nmt_bin() + " " + cmd + " --help");
    EXPECT_EQ(r.status, 0) << cmd;
    EXPECT_NE(r.output.find("Usage"), std::string::npos) << cmd;
  }
}

// Every shipped Multi30k recipe trains a few steps end to end (validation, checkpoints, the
// averaging it asks for, curves) on the quickstart corpus in place of Multi30k, with a small
// vocabulary: the recipes are not trained in CI, their settings are.
TEST(EndToEnd, ShippedRecipesTrainBriefly) {
  nmt_test::TempDir dir;
  auto gen = make_data(dir, 300, 20, 10);
  ASSERT_EQ(gen.status, 0) << gen.output;
  const std::string d = dir / "data";
  int recipes = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(nmt_test::source_dir() + "/configs")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("multi30k_", 0) != 0 || entry.path().extension() != ".json") continue;
    SCOPED_TRACE(name);
    ++recipes;
    const std::string run = dir / ("run-" + name);
    // The first keeps OpenBLAS's own kernel choice and the BLAS for all products, in float32;
    // the others get nmt's choices and the recipe's precision.
    const bool keep_core = recipes == 1;
    const json recipe = json::parse(nmt_test::read_text(entry.path().string()));
    const std::string precision =
        keep_core ? "fp32" : recipe["train"].value("precision", std::string("fp32"));
    const auto r = run_command(
        (keep_core ? "NMT_BLAS_CORE=keep OPENBLAS_CORETYPE=Haswell NMT_GEMM=blas " : "") +
        nmt_bin() + " train --config configs/" + name + " --run-dir " + run +
        " --set train.precision=" + precision + " --set data.train_src=" + d +
        "/train.en --set data.train_tgt=" + d + "/train.de" + " --set data.valid_src=" + d +
        "/valid.en --set data.valid_tgt=" + d + "/valid.de" +
        " --set vocab.size=100 --set train.threads=1 --set train.max_steps=6" +
        " --set train.max_time=0 --set train.save_every=2 --set train.valid_every=2" +
        " --set train.log_every=2 --set data.max_len=60 --set train.batch_tokens=700" +
        " --set train.device=cpu");
    ASSERT_EQ(r.status, 0) << r.output;
    // The log names the GEMM backend: AVX-512 kernels where the CPU has them, unless asked not to.
    // A LibTorch with another BLAS inside (pip's) is named as such.
    const bool openblas = nmt::blas_description().rfind("OpenBLAS", 0) == 0;
    EXPECT_NE(r.output.find(openblas ? "GEMM backend: OpenBLAS"
                                     : "GEMM backend: a BLAS without OpenBLAS's query functions"),
              std::string::npos)
        << r.output;
    if (openblas && keep_core) {
      EXPECT_NE(r.output.find("Haswell kernels (OPENBLAS_CORETYPE=Haswell)"), std::string::npos)
          << r.output;
      EXPECT_NE(r.output.find("the BLAS for every product (NMT_GEMM=blas)"), std::string::npos)
          << r.output;
    } else if (openblas) {
      if (nmt::cpu_has_avx512() && std::getenv("NMT_BLAS_CORE") == nullptr) {
        const bool avx512 = r.output.find("SkylakeX kernels") != std::string::npos ||
                            r.output.find("Cooperlake kernels") != std::string::npos ||
                            r.output.find("SapphireRapids kernels") != std::string::npos;
        EXPECT_TRUE(avx512) << r.output;
      }
      // Debian's LibTorch has oneDNN in the process (pip's CUDA builds link it statically).
      // A recipe in auto precision multiplies in bfloat16 where the CPU can, and says so.
      const bool bf16 = precision == "bf16" || (precision == "auto" && nmt::have_bf16_gemm());
      if (bf16) {
        EXPECT_NE(r.output.find(precision == "auto" ? "precision bf16 (auto: this CPU multiplies "
                                                      "bfloat16)"
                                                    : "precision bf16"),
                  std::string::npos)
            << r.output;
        EXPECT_NE(r.output.find("'s bfloat16 GEMM for the linear layers' products"),
                  std::string::npos)
            << r.output;
      } else if (!torch::cuda::is_available() && std::getenv("NMT_GEMM") == nullptr) {
        EXPECT_NE(r.output.find("; oneDNN "), std::string::npos) << r.output;
        EXPECT_NE(r.output.find("(NMT_GEMM=auto)"), std::string::npos) << r.output;
      }
    }
    EXPECT_TRUE(std::filesystem::exists(run + "/checkpoints/ckpt-00000006/model.pt"));
    EXPECT_TRUE(std::filesystem::exists(run + "/checkpoints/best/model.pt"));
    EXPECT_TRUE(std::filesystem::exists(run + "/curves.svg"));
    const json config = json::parse(nmt_test::read_text(run + "/config.json"));
    if (config["train"]["average_last"].get<int64_t>() > 0)
      EXPECT_TRUE(std::filesystem::exists(run + "/checkpoints/averaged/model.pt")) << r.output;
  }
  EXPECT_GE(recipes, 3);
}

// Devices and precisions that cannot work here fail before any work, naming the flag or key.
TEST(EndToEnd, DeviceAndPrecisionErrorsAreClear) {
  nmt_test::TempDir dir;
  // Data files of its own, so that only the device or precision can be wrong.
  std::filesystem::create_directories(dir / "data");
  for (const char* name : {"data/a.en", "data/a.de"})
    nmt_test::write_text(dir / name, "one\ntwo\nthree\n");
  const std::string train = " train --config configs/quickstart.json --run-dir " + (dir / "run") +
                            " --set data.train_src=" + (dir / "data/a.en") +
                            " --set data.train_tgt=" + (dir / "data/a.de") +
                            " --set data.valid_src=" + (dir / "data/a.en") +
                            " --set data.valid_tgt=" + (dir / "data/a.de");
  struct Case {
    std::string command, message;
    std::string env = "";  // set for the command: the environment is what is wrong
  };
  std::vector<Case> cases = {
      {train + " --device tpu",
       "train.device: must be \"auto\", \"cpu\", \"cuda\" or \"cuda:N\", got \"tpu\""},
      {train + " --device cpu --set train.precision=fp16",
       "train.precision fp16 runs on CUDA only"},
      {" translate --checkpoint " + (dir / "none") + " --device cuda --quantize int8",
       "--quantize int8 runs on the CPU only"},
      {" translate --checkpoint " + (dir / "none") + " --device gpu", "--device: unknown device"},
      {" translate --checkpoint " + (dir / "none") + " --device cpu --precision fp16",
       "--precision fp16 runs on CUDA only"},
      // The products' library is the CPU's concern (a CUDA device would not ask).
      {train + " --device cpu", "NMT_GEMM=fast: expected auto, blas or onednn", "NMT_GEMM=fast "},
      // bf16 on a CPU without bfloat16 products (simulated on any CPU) is refused with the reason.
      {train + " --device cpu --set train.precision=bf16",
       "train.precision bf16 on the CPU multiplies in bfloat16, but NMT_DEBUG_NO_BF16 is set (as "
       "on a CPU without bfloat16 products); use fp32",
       "NMT_DEBUG_NO_BF16=1 "},
      {" translate --checkpoint " + (dir / "none") + " --device cpu --precision bf16",
       "--precision bf16 on the CPU multiplies in bfloat16, but NMT_DEBUG_NO_BF16 is set",
       "NMT_DEBUG_NO_BF16=1 "},
  };
  if (!torch::cuda::is_available())
    cases.push_back({train + " --device cuda", "train.device cuda: no CUDA device is available"});
  for (const auto& c : cases) {
    const auto r = run_command(c.env + nmt_bin() + c.command);
    EXPECT_EQ(r.status, 1) << c.command << "\n" << r.output;
    EXPECT_NE(r.output.find("nmt: error: "), std::string::npos) << c.command << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.command << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "run/checkpoints")) << c.command;
  }
}

// An out-of-memory step (simulated: NMT_DEBUG_OOM_STEPS) is skipped with a warning and counted;
// three in a row stop training, naming train.batch_tokens.
TEST(EndToEnd, OutOfMemoryStepsAreSkippedThenStopTraining) {
  nmt_test::TempDir dir;
  auto gen = make_data(dir, 300, 10, 10);
  ASSERT_EQ(gen.status, 0) << gen.output;
  auto r = run_command("NMT_DEBUG_OOM_STEPS=3 " + train_command(dir, 8) +
                       " --set train.log_every=1 --set train.valid_every=0");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("update 3 skipped: out of memory (simulated by NMT_DEBUG_OOM_STEPS)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("1 batches skipped (out of memory)"), std::string::npos) << r.output;
  int steps = 0;
  for (const auto& row : metrics_rows(dir / "run/metrics.jsonl")) steps += row.contains("loss");
  EXPECT_EQ(steps, 8);  // eight real updates: the skipped attempt is not a step

  std::filesystem::remove_all(dir / "run");
  r = run_command("NMT_DEBUG_OOM_STEPS=5,6,7 " + train_command(dir, 20));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("ran out of memory in 3 steps in a row: lower train.batch_tokens (now "
                          "1200)"),
            std::string::npos)
      << r.output;
}

// train.max_time: training stops when the budget is spent, with a final validation and
// checkpoint; the budget counts training time across --resume; the ETA counts down to it.
TEST(EndToEnd, TimeBudgetStopsTrainingAcrossResumes) {
  nmt_test::TempDir dir;
  auto gen = make_data(dir, 300, 10, 10);
  ASSERT_EQ(gen.status, 0) << gen.output;
  const std::string run = dir / "run";
  const std::string budget =
      " --set train.max_steps=0 --set train.save_every=1000000"
      " --set train.valid_every=0 --set train.log_every=5";
  auto state_of = [&] {
    const std::string out = run_command("ls -d " + run + "/checkpoints/ckpt-* | tail -1").output;
    return json::parse(nmt_test::read_text(out.substr(0, out.size() - 1) + "/state.json"));
  };
  auto r = run_command(train_command(dir, 0, budget + " --set train.max_time=3s"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("train.max_time: the budget of 0:00:03 is spent at step"),
            std::string::npos)
      << r.output;
  json st = state_of();
  const int64_t first_steps = st["step"].get<int64_t>();
  EXPECT_GT(first_steps, 0);
  EXPECT_GE(st["elapsed_s"].get<double>(), 3.0);
  EXPECT_LT(st["elapsed_s"].get<double>(), 3.0 + 30.0);
  EXPECT_EQ(st["validated_step"].get<int64_t>(), first_steps);  // the final validation
  // A final training row holds the steps after the last log_every row (a budget rarely ends on
  // that grid), so metrics.jsonl and the curves reach the last step (read as the curves read it).
  const auto last_train_row = [&] {
    const auto train = nmt::read_metrics(run + "/metrics.jsonl").train;
    EXPECT_FALSE(train.empty());
    return train.empty() ? nmt::TrainRow{} : train.back();
  };
  const nmt::TrainRow first_last = last_train_row();
  EXPECT_EQ(first_last.step, first_steps);
  EXPECT_GE(first_last.elapsed_s, 3.0);
  // The ETA of each log line is the budget left, never more than the budget.
  size_t eta_lines = 0;
  for (size_t pos = 0; (pos = r.output.find("| ETA 0:00:0", pos)) != std::string::npos; ++pos) {
    EXPECT_LE(r.output[pos + 12] - '0', 3) << r.output.substr(pos, 20);
    ++eta_lines;
  }
  EXPECT_GT(eta_lines, 0u) << r.output;

  // A larger budget continues from where the first one stopped, counting its time.
  r = run_command(train_command(dir, 0, budget + " --set train.max_time=5 --resume"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  st = state_of();
  const int64_t second_steps = st["step"].get<int64_t>();
  EXPECT_GT(second_steps, first_steps);
  EXPECT_GE(st["elapsed_s"].get<double>(), 5.0);
  EXPECT_EQ(last_train_row().step, second_steps);

  // A spent budget: nothing more to train, validate or save.
  const size_t rows_before = metrics_rows(run + "/metrics.jsonl").size();
  r = run_command(train_command(dir, 0, budget + " --set train.max_time=5 --resume"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(state_of()["step"].get<int64_t>(), second_steps);
  EXPECT_EQ(metrics_rows(run + "/metrics.jsonl").size(), rows_before);
}

TEST(EndToEnd, CooldownTakesTheRateToZeroAtTheEndOfTheRun) {
  nmt_test::TempDir dir;
  auto gen = make_data(dir, 300, 10, 10);
  ASSERT_EQ(gen.status, 0) << gen.output;
  const std::string run = dir / "run";
  const std::string quiet =
      " --set train.log_every=1 --set train.valid_every=0 --set train.save_every=1000000";
  // By steps: noam (warm-up 50, factor 2, d_model 64) for the first half of 40 steps, then
  // falling linearly: step s runs at noam(s) * (1 - (s - 1) / 40) / 0.5.
  auto r = run_command(train_command(dir, 40, quiet + " --set train.cooldown=0.5"));
  ASSERT_EQ(r.status, 0) << r.output;
  int64_t rows = 0;
  for (const auto& row : metrics_rows(run + "/metrics.jsonl")) {
    if (!row.contains("lr")) continue;
    const int64_t s = row["step"].get<int64_t>();
    const double noam = nmt::noam_lr(s, 64, 50, 2.0);
    const double expected = s <= 20 ? noam : noam * (41.0 - static_cast<double>(s)) / 20.0;
    EXPECT_NEAR(row["lr"].get<double>(), expected, 1e-12 * noam) << "step " << s;
    ++rows;
  }
  EXPECT_EQ(rows, 40);

  // By time: a constant 1e-3 that falls over the whole 3-second budget, so the rate of each step
  // lies between 1e-3 * (1 - t / 3) for the training time t before the step and after it.
  std::filesystem::remove_all(run);
  r = run_command(train_command(dir, 0,
                                quiet + " --set train.max_time=3s --set train.cooldown=1" +
                                    " --set train.lr_schedule=constant --set train.lr=1e-3" +
                                    " --set train.warmup_steps=1"));
  ASSERT_EQ(r.status, 0) << r.output;
  double before = 0.0, first = -1.0, last = -1.0;
  rows = 0;
  for (const auto& row : metrics_rows(run + "/metrics.jsonl")) {
    if (!row.contains("lr")) continue;
    const double lr = row["lr"].get<double>(), after = row["elapsed_s"].get<double>();
    EXPECT_LE(lr, 1e-3 * (1.0 - before / 3.0) + 1e-15) << "step " << row["step"];
    EXPECT_GE(lr, 1e-3 * std::max(0.0, 1.0 - after / 3.0) - 1e-15) << "step " << row["step"];
    before = after;
    if (first < 0) first = lr;
    last = lr;
    ++rows;
  }
  ASSERT_GT(rows, 2);
  EXPECT_LT(last, first);
  // The run goes on until the budget is spent. The last row is written just before the check
  // that stops it, microseconds apart (a loaded CI machine once saw 2.99999 s).
  EXPECT_GE(before, 3.0 - 1e-3);
}
