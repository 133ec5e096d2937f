// CUDA against the CPU: the same model, inputs and random keys on both devices. Every test here
// skips, saying why, where this LibTorch has no CUDA or no GPU is visible.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>

#include "ckpt/checkpoint.h"
#include "corpus_helpers.h"
#include "data/tensors.h"
#include "decode/scorer.h"
#include "decode/search.h"
#include "helpers.h"
#include "model/compat.h"
#include "model/device.h"
#include "model/dropout.h"
#include "model/seq2seq.h"
#include "model_helpers.h"
#include "text/spm.h"
#include "train/step.h"
#include "util/util.h"

using namespace nmt;
using nmt_test::nmt_bin;
using nmt_test::run_command;

namespace {

class Cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available())
      GTEST_SKIP() << "no CUDA device: this LibTorch was built without CUDA or no GPU is visible";
  }
  const torch::Device gpu{torch::kCUDA, 0};
};

ModelConfig small_model(double dropout) {
  ModelConfig c;
  c.d_model = 64;
  c.heads = 4;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.d_ff = 128;
  c.dropout = dropout;
  c.attention_dropout = dropout;
  c.max_positions = 64;
  c.norm = nmt::Norm::kPre;
  c.tie_embeddings = nmt::TieEmbeddings::kAll;
  return c;
}

// The same freshly initialised model on each device.
Seq2Seq model_on(const ModelConfig& c, int64_t vocab, const torch::Device& device) {
  torch::manual_seed(11);
  auto m = make_model(c, vocab, vocab);
  m->to(device);
  return m;
}

Corpus copy_corpus(int64_t pairs, int64_t vocab, uint64_t seed) {
  return nmt_test::copy_corpus(pairs, vocab, seed, 4, 9);
}

torch::Tensor random_source(int64_t rows, int64_t vocab) {
  return nmt_test::random_source(rows, vocab, 3, 3, 11);
}

double max_rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  const auto x = a.to(torch::kCPU, torch::kDouble), y = b.to(torch::kCPU, torch::kDouble);
  return ((x - y).abs().max() / y.abs().max().clamp_min(1e-12)).item<double>();
}

// Trains `steps` updates of the copy task on `device` in `precision`; returns each step's loss
// per token.
std::vector<double> train_copy_task(const torch::Device& device, Precision precision, int steps) {
  const auto corpus = copy_corpus(256, 40, 5);
  auto model = model_on(small_model(0.1), 40, device);
  model->train();
  torch::optim::Adam opt(model->parameters(),
                         torch::optim::AdamOptions(1.0).betas({0.9, 0.98}).eps(1e-9));
  TrainConfig tc;
  TrainStep step(model, opt, tc, precision);
  std::vector<int64_t> order(corpus.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> losses;
  torch::manual_seed(21);  // the dropout keys
  for (int s = 0; s < steps; ++s) {
    std::vector<int64_t> rows;
    for (int64_t k = 0; k < 32; ++k) rows.push_back(order[(s * 32 + k) % order.size()]);
    const auto r = step.run({make_tensor_batch(corpus, rows)}, 3e-3);
    EXPECT_EQ(r.status, StepResult::Status::kApplied) << "step " << s;
    losses.push_back(r.loss / static_cast<double>(r.tgt_tokens));
  }
  return losses;
}

double mean_tail(const std::vector<double>& v, size_t n) {
  return std::accumulate(v.end() - static_cast<std::ptrdiff_t>(n), v.end(), 0.0) /
         static_cast<double>(n);
}

}  // namespace

TEST_F(Cuda, ForwardPassMatchesTheCpu) {
  auto cpu = model_on(small_model(0.0), 50, torch::kCPU);
  auto cuda = model_on(small_model(0.0), 50, gpu);
  cpu->eval();
  cuda->eval();
  EXPECT_EQ(cuda->device(), gpu);
  const auto src = random_source(6, 50);
  const auto tgt = torch::cat(
      {torch::full({6, 1}, kBosId, torch::kLong), torch::randint(4, 50, {6, 9}, torch::kLong)}, 1);
  torch::NoGradGuard no_grad;
  const auto a = cpu->forward(src, tgt);
  const auto b = cuda->forward(src.to(gpu), tgt.to(gpu));
  EXPECT_TRUE(b.is_cuda());
  EXPECT_LT(max_rel_diff(b, a), 1e-4);
}

// nmt's CUDA dropout kernels (model/kernels.cu) compute the ATen path's function, which the CPU
// suite checks against the CPU kernels: the same bits, values and gradients, in every dtype they
// take. A build without the kernels says so and skips.
TEST_F(Cuda, DropoutKernelsEqualTheAtenPath) {
  if (!compat::cuda_kernels_built())
    GTEST_SKIP() << "this build has no nmt CUDA kernels (no CUDA compiler at configure time)";
  for (const auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
    for (const int64_t cols : {1, 7, 129, 70001}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + " cols " + std::to_string(cols));
      torch::manual_seed(static_cast<uint64_t>(cols));
      const auto base = torch::randn({3, cols}).to(gpu, dtype);
      const auto g = torch::randn({3, cols}).to(gpu, dtype);
      const uint64_t key = 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(cols + 1);
      auto a = base.clone().requires_grad_(true), b = base.clone().requires_grad_(true);
      const auto fused = dropout_fused(a, 0.3, key);
      const auto aten = dropout_aten(b, 0.3, key);
      EXPECT_EQ(fused.scalar_type(), dtype);
      EXPECT_TRUE(torch::equal(fused, aten));
      fused.backward(g);
      aten.backward(g);
      EXPECT_TRUE(torch::equal(a.grad(), b.grad()));

      auto c = base.clone().requires_grad_(true), d = base.clone().requires_grad_(true);
      const auto relu_fused = relu_dropout_fused(c, 0.3, key);
      const auto relu_aten = relu_dropout_aten(d, 0.3, key);
      EXPECT_TRUE(torch::equal(relu_fused, relu_aten));
      relu_fused.backward(g);
      relu_aten.backward(g);
      EXPECT_TRUE(torch::equal(c.grad(), d.grad()));
    }
  }
  // And the CPU kernel's mask: the same elements dropped on both devices.
  const auto x = torch::randn({5, 333});
  EXPECT_TRUE(torch::equal(dropout_fused(x.to(gpu), 0.1, 42).cpu(), dropout_fused(x, 0.1, 42)));
}

// One training step per device, dropout on: the keys come from the CPU generator, so both
// devices drop the same elements, and the updates agree to float rounding.
TEST_F(Cuda, TrainingStepsMatchTheCpu) {
  const auto corpus = copy_corpus(64, 40, 7);
  TrainConfig tc;
  std::vector<Seq2Seq> models;
  std::vector<std::unique_ptr<torch::optim::Adam>> opts;
  std::vector<std::unique_ptr<TrainStep>> steps;
  for (const auto& device : {torch::Device(torch::kCPU), gpu}) {
    models.push_back(model_on(small_model(0.1), 40, device));
    models.back()->train();
    opts.push_back(std::make_unique<torch::optim::Adam>(models.back()->parameters(),
                                                        torch::optim::AdamOptions(1e-3)));
    steps.push_back(std::make_unique<TrainStep>(models.back(), *opts.back(), tc, Precision::kFp32));
  }
  std::vector<torch::Tensor> start;
  for (const auto& p : models[0]->parameters()) start.push_back(p.detach().clone());
  for (int s = 0; s < 3; ++s) {
    std::vector<int64_t> rows;
    for (int64_t k = 0; k < 16; ++k) rows.push_back(s * 16 + k);
    const auto batch = make_tensor_batch(corpus, rows);
    torch::manual_seed(100 + s);
    const auto a = steps[0]->run({batch}, 1e-3);
    torch::manual_seed(100 + s);
    const auto b = steps[1]->run({batch}, 1e-3);
    ASSERT_EQ(b.status, StepResult::Status::kApplied);
    EXPECT_NEAR(b.loss, a.loss, 1e-4 * a.loss) << "step " << s;
    EXPECT_NEAR(b.nll, a.nll, 1e-4 * a.nll) << "step " << s;
    EXPECT_NEAR(b.grad_norm, a.grad_norm, 1e-3 * a.grad_norm) << "step " << s;
  }
  // Adam moves every element by about lr whatever its gradient's size, so an element whose
  // gradient is rounding noise may move differently on the two devices (1.2e-4 after three steps
  // on an H200). Elements must agree within half a step, and each tensor's update as a whole
  // within 5 %; different dropout masks or a wrong gradient would move them by a whole step.
  const auto pa = models[0]->parameters(), pb = models[1]->parameters();
  double worst_element = 0, worst_ratio = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    const auto diff = pb[i].detach().cpu() - pa[i].detach();
    const double element = diff.abs().max().item<double>();
    const double ratio =
        diff.norm().item<double>() / ((pa[i].detach() - start[i]).norm().item<double>() + 1e-12);
    EXPECT_LT(element, 5e-4) << "parameter " << i;
    EXPECT_LT(ratio, 5e-2) << "parameter " << i;
    worst_element = std::max(worst_element, element);
    worst_ratio = std::max(worst_ratio, ratio);
  }
  std::printf("after 3 steps: largest element difference %.3g, largest update difference %.3g\n",
              worst_element, worst_ratio);
}

TEST_F(Cuda, GreedyAndBeamSearchMatchTheCpu) {
  auto cpu = model_on(small_model(0.1), 30, torch::kCPU);
  auto cuda = model_on(small_model(0.1), 30, gpu);
  cpu->eval();
  cuda->eval();
  const auto src = random_source(12, 30);
  for (const int64_t beam : {1, 4}) {
    SearchOptions o;
    o.beam_size = beam;
    o.length_penalty = 0.6;
    o.max_len_a = 1.0;
    o.max_len_b = 4;
    o.mode = resolve_search_mode(o, false);
    ModelScorer cpu_beam(cpu), cuda_beam(cuda);
    const auto a = search(cpu_beam, src, o);
    const auto b = search(cuda_beam, src.to(gpu), o);
    ASSERT_EQ(a.size(), b.size());
    int differ = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_NEAR(b[i][0].score, a[i][0].score, 1e-3) << "beam " << beam << " sentence " << i;
      differ += a[i][0].tokens != b[i][0].tokens;
    }
    // Float rounding may flip one near-tie; more would be a bug.
    EXPECT_LE(differ, 1) << "beam " << beam;
  }
}

// Samples keyed by line number draw the same tokens on the GPU, with the CPU's noise.
TEST_F(Cuda, SamplingMatchesTheCpu) {
  auto cpu = model_on(small_model(0.1), 30, torch::kCPU);
  auto cuda = model_on(small_model(0.1), 30, gpu);
  cpu->eval();
  cuda->eval();
  const auto src = random_source(12, 30);
  SearchOptions o;
  o.sampling.enabled = true;
  o.sampling.top_p = 0.9;
  o.nbest = 2;
  o.max_len_a = 1.0;
  o.max_len_b = 4;
  o.mode = resolve_search_mode(o, false);
  ModelScorer cpu_scorer(cpu), cuda_scorer(cuda);
  const auto a = search(cpu_scorer, src, o);
  const auto b = search(cuda_scorer, src.to(gpu), o);
  ASSERT_EQ(a.size(), b.size());
  int differ = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < 2; ++j) differ += a[i][j].tokens != b[i][j].tokens;
  EXPECT_LE(differ, 1);  // a near-tie of two noisy values may flip; more would be a bug
}

// Constrained and avoiding beams find the CPU's hypotheses on the GPU.
TEST_F(Cuda, ConstrainedSearchMatchesTheCpu) {
  auto cpu = model_on(small_model(0.1), 30, torch::kCPU);
  auto cuda = model_on(small_model(0.1), 30, gpu);
  cpu->eval();
  cuda->eval();
  const auto src = random_source(12, 30);
  SearchOptions o;
  o.beam_size = 4;
  o.max_len_a = 1.0;
  o.max_len_b = 4;
  std::vector<SentenceTerms> terms(12);
  for (size_t i = 0; i < terms.size(); i += 2) terms[i].constraints = {{7, 8}, {9}};
  for (size_t i = 1; i < terms.size(); i += 3) terms[i].avoid = {{5}, {6, 7}};
  o.mode = resolve_search_mode(o, true);
  ModelScorer cpu_scorer(cpu), cuda_scorer(cuda);
  const auto a = search(cpu_scorer, src, o, {}, terms);
  const auto b = search(cuda_scorer, src.to(gpu), o, {}, terms);
  ASSERT_EQ(a.size(), b.size());
  int differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i][0].tokens != b[i][0].tokens;
  EXPECT_LE(differ, 1);  // a near-tie may flip between the two devices' sums; more is a bug
}

// Mixed precision: the loss curve of bf16 (and fp16 with loss scaling) tracks fp32's.
TEST_F(Cuda, LowPrecisionLossTracksFp32) {
  const int steps = 120;
  const auto fp32 = train_copy_task(gpu, Precision::kFp32, steps);
  EXPECT_LT(mean_tail(fp32, 10), 0.6 * fp32.front()) << "fp32 did not learn the copy task";
  for (const auto precision : {Precision::kBf16, Precision::kFp16}) {
    const auto low = train_copy_task(gpu, precision, steps);
    const double a = mean_tail(fp32, 10), b = mean_tail(low, 10);
    std::printf("copy task, mean loss of the last 10 of %d steps: fp32 %.4f, %s %.4f\n", steps, a,
                precision_name(precision), b);
    EXPECT_NEAR(b, a, 0.05 * a + 0.02) << precision_name(precision);
  }
}

TEST_F(Cuda, AutocastRunsProductsInLowPrecision) {
  const auto x = torch::randn({4, 8}, gpu), w = torch::randn({8, 3}, gpu);
  {
    const AutocastGuard guard(gpu, Precision::kBf16);
    EXPECT_EQ(torch::matmul(x, w).scalar_type(), torch::kBFloat16);
    EXPECT_EQ(torch::softmax(torch::matmul(x, w), -1).scalar_type(), torch::kFloat);
  }
  EXPECT_EQ(torch::matmul(x, w).scalar_type(), torch::kFloat);
}

// A real out-of-memory error (the allocator capped to a sliver of the card) skips the step.
TEST_F(Cuda, OutOfMemorySkipsTheStep) {
  const auto corpus = copy_corpus(512, 8000, 9);
  auto model = model_on(small_model(0.0), 8000, gpu);
  model->train();
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-3));
  TrainConfig tc;
  TrainStep step(model, opt, tc, Precision::kFp32);
  std::vector<int64_t> rows(512);
  std::iota(rows.begin(), rows.end(), 0);
  const auto big = make_tensor_batch(corpus, rows);
  torch::cuda::synchronize();
  compat::cuda_release_cached_memory();
  compat::cuda_set_memory_fraction(0.002, 0);  // about 160 MB of an 80 GB card
  const auto r = step.run({big}, 1e-3);
  compat::cuda_set_memory_fraction(1.0, 0);
  EXPECT_EQ(r.status, StepResult::Status::kOutOfMemory) << r.error;
  EXPECT_NE(r.error.find("out of memory"), std::string::npos) << r.error;
  EXPECT_EQ(step.out_of_memory_in_a_row(), 1);
  const auto after = step.run({big}, 1e-3);
  EXPECT_EQ(after.status, StepResult::Status::kApplied);
}

TEST_F(Cuda, Int8IsRefusedOnCuda) {
  auto model = model_on(small_model(0.0), 30, gpu);
  try {
    model->quantize_int8();
    FAIL() << "int8 accepted on CUDA";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("int8 quantization runs on the CPU only"),
              std::string::npos)
        << e.what();
  }
}

// Through the binary: training on the GPU (bf16 too), a GPU checkpoint translating on the CPU
// like on the GPU, bit-exact resume on the GPU, and eval in bf16.
TEST_F(Cuda, TrainTranslateResumeThroughTheBinary) {
  nmt_test::TempDir dir;
  const std::string data = dir / "data";
  auto r = run_command("python3 scripts/make_quickstart_data.py --out " + data +
                       " --train 2000 --valid 40 --test 60");
  ASSERT_EQ(r.status, 0) << r.output;
  auto train = [&](const std::string& run, int steps, const std::string& extra) {
    return run_command(
        nmt_bin() + " train --config configs/quickstart.json --run-dir " + run +
        " --set data.train_src=" + data + "/train.en --set data.train_tgt=" + data +
        "/train.de --set data.valid_src=" + data + "/valid.en --set data.valid_tgt=" + data +
        "/valid.de --set vocab.size=100 --set model.d_model=64 --set model.d_ff=128"
        " --set train.batch_tokens=1000 --set train.warmup_steps=30 --set train.log_every=6"
        " --set train.save_every=12 --set train.valid_every=12 --set train.max_steps=" +
        std::to_string(steps) + " " + extra);
  };
  r = train(dir / "once", 24, "--device cuda");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("device cuda:0"), std::string::npos) << r.output;
  r = train(dir / "twice", 12, "--device cuda");
  ASSERT_EQ(r.status, 0) << r.output;
  r = train(dir / "twice", 24, "--device cuda --resume");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "twice/checkpoints/ckpt-00000024/rng_cuda.pt"));
  const std::string ckpt = "/checkpoints/ckpt-00000024/model.pt";
  EXPECT_TRUE(nmt_test::read_text(dir / ("once" + ckpt)) ==
              nmt_test::read_text(dir / ("twice" + ckpt)))
      << "resume on CUDA is not bit-exact";

  // The GPU checkpoint translates on the CPU as on the GPU.
  const std::string in = data + "/test.en";
  const std::string ck = dir / "once/checkpoints/ckpt-00000024";
  for (const char* device : {"cpu", "cuda"}) {
    r = run_command(nmt_bin() + " translate --checkpoint " + ck + " --device " + device +
                    " --beam 4 --input " + in + " --output " + (dir / device));
    ASSERT_EQ(r.status, 0) << r.output;
  }
  const auto on_cpu = nmt_test::read_lines_of(dir / "cpu"),
             on_gpu = nmt_test::read_lines_of(dir / "cuda");
  ASSERT_EQ(on_cpu.size(), 60u);
  int same = 0;
  for (size_t i = 0; i < on_cpu.size(); ++i) same += on_cpu[i] == on_gpu[i];
  EXPECT_GE(same, 58) << "CPU and GPU translations differ on " << 60 - same << " lines";

  r = run_command(nmt_bin() + " translate --checkpoint " + ck +
                  " --device cuda --quantize int8 --input " + in);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("--quantize int8 runs on the CPU only"), std::string::npos) << r.output;

  // bf16 training and bf16 evaluation run, and score about as fp32 does.
  r = train(dir / "bf16", 24, "--device cuda --set train.precision=bf16");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("precision bf16"), std::string::npos) << r.output;
  auto eval = [&](const std::string& precision) {
    const auto e =
        run_command(nmt_bin() + " eval --checkpoint " + ck + " --device cuda" + " --precision " +
                    precision + " --src " + in + " --ref " + data + "/test.de --json 2>/dev/null");
    EXPECT_EQ(e.status, 0) << e.output;
    return nlohmann::json::parse(e.output);
  };
  const auto fp32 = eval("fp32"), bf16 = eval("bf16");
  EXPECT_NEAR(bf16["chrf"].get<double>(), fp32["chrf"].get<double>(), 2.0);
  EXPECT_NEAR(bf16["loss"].get<double>(), fp32["loss"].get<double>(),
              0.02 * fp32["loss"].get<double>());
  std::printf(
      "eval of a 24-step quickstart model on the GPU: fp32 chrF2 %.2f loss %.4f, "
      "bf16 chrF2 %.2f loss %.4f\n",
      fp32["chrf"].get<double>(), fp32["loss"].get<double>(), bf16["chrf"].get<double>(),
      bf16["loss"].get<double>());
}
