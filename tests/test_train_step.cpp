// The step, the loss scaler, metrics rows and the trainer state.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

#include "config/config.h"
#include "corpus_helpers.h"
#include "data/tensors.h"
#include "helpers.h"
#include "model_helpers.h"
#include "model/attention.h"
#include "model/device.h"
#include "model/dropout.h"
#include "model/linear.h"
#include "model/loss.h"
#include "model/seq2seq.h"
#include "text/spm.h"
#include "train/metrics_log.h"
#include "ckpt/checkpoint_state.h"
#include "train/step.h"
#include "util/blas.h"
#include "util/util.h"

using namespace nmt;
using nlohmann::json;
using nmt_test::tiny_model;

namespace {

Corpus copy_corpus(int64_t pairs, int64_t vocab, uint64_t seed) {
  return nmt_test::copy_corpus(pairs, vocab, seed, 3, 7);
}
}  // namespace

TEST(LossScaler, HalvesOnOverflowAndDoublesAfterTheInterval) {
  LossScaler s(1024.0, 0);
  s.update(true);
  EXPECT_DOUBLE_EQ(s.scale(), 512.0);
  for (int64_t i = 0; i + 1 < LossScaler::kGrowthInterval; ++i) s.update(false);
  EXPECT_DOUBLE_EQ(s.scale(), 512.0);
  EXPECT_EQ(s.good_steps(), LossScaler::kGrowthInterval - 1);
  s.update(false);
  EXPECT_DOUBLE_EQ(s.scale(), 1024.0);
  EXPECT_EQ(s.good_steps(), 0);
  s.update(false);
  s.update(true);  // an overflow restarts the count
  EXPECT_EQ(s.good_steps(), 0);
  EXPECT_DOUBLE_EQ(s.scale(), 512.0);
}

// The step: the loss normalised by the step's tokens, accumulation equal to one big batch,
// a poisoned loss skipped without touching the weights, an out-of-memory error skipped.
TEST(TrainStep, AccumulationEqualsOneBatchAndFaultsChangeNothing) {
  const auto corpus = copy_corpus(24, 30, 3);
  auto cfg = tiny_model();
  cfg.dropout = 0.0;
  cfg.attention_dropout = 0.0;
  TrainConfig tc;
  tc.clip_norm = 0.0;
  auto make = [&] {
    torch::manual_seed(5);
    auto m = make_model(cfg, 30, 30);
    m->train();
    return m;
  };
  std::vector<int64_t> all(24);
  std::iota(all.begin(), all.end(), 0);
  const std::vector<int64_t> first(all.begin(), all.begin() + 12),
      second(all.begin() + 12, all.end());

  // SGD: its update is linear in the gradient, so equal gradients give equal weights.
  auto one = make();
  torch::optim::SGD opt_one(one->parameters(), torch::optim::SGDOptions(0.1));
  TrainStep step_one(one, opt_one, tc, Precision::kFp32);
  const auto r1 = step_one.run({make_tensor_batch(corpus, all)}, 0.1);

  auto two = make();
  torch::optim::SGD opt_two(two->parameters(), torch::optim::SGDOptions(0.1));
  TrainStep step_two(two, opt_two, tc, Precision::kFp32);
  const auto r2 =
      step_two.run({make_tensor_batch(corpus, first), make_tensor_batch(corpus, second)}, 0.1);
  EXPECT_EQ(r1.status, StepResult::Status::kApplied);
  EXPECT_EQ(r1.tgt_tokens, r2.tgt_tokens);
  EXPECT_NEAR(r1.loss, r2.loss, 1e-4 * r1.loss);
  EXPECT_NEAR(r1.grad_norm, r2.grad_norm, 1e-4 * r1.grad_norm);
  const auto pa = one->parameters(), pb = two->parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::allclose(pa[i], pb[i], 1e-5, 1e-7));

  std::vector<torch::Tensor> before;
  for (const auto& p : two->parameters()) before.push_back(p.detach().clone());
  const auto batch = make_tensor_batch(corpus, first);
  auto r = step_two.run({batch}, 0.1, {/*nan_loss=*/true, /*out_of_memory=*/false});
  EXPECT_EQ(r.status, StepResult::Status::kNonFinite);
  EXPECT_EQ(step_two.non_finite_in_a_row(), 1);
  r = step_two.run({batch}, 0.1, {/*nan_loss=*/false, /*out_of_memory=*/true});
  EXPECT_EQ(r.status, StepResult::Status::kOutOfMemory);
  EXPECT_NE(r.error.find("out of memory"), std::string::npos) << r.error;
  EXPECT_EQ(step_two.out_of_memory_in_a_row(), 1);
  const auto after = two->parameters();
  for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(torch::equal(before[i], after[i]));
  r = step_two.run({batch}, 0.1);
  EXPECT_EQ(r.status, StepResult::Status::kApplied);
  EXPECT_EQ(step_two.out_of_memory_in_a_row(), 0);
  EXPECT_EQ(step_two.non_finite_in_a_row(), 0);
}

// Clipping: the reported norm is the one before clipping, the gradients end at clip_norm.
TEST(TrainStep, ClipsToTheGlobalNorm) {
  const auto corpus = copy_corpus(8, 30, 4);
  torch::manual_seed(6);
  auto model = make_model(tiny_model(), 30, 30);
  model->train();
  TrainConfig tc;
  tc.clip_norm = 1e-3;
  // lr 0: the update leaves the weights, so the clipped gradients can be read after the step.
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(0.0));
  TrainStep step(model, adam, tc, Precision::kFp32);
  const auto r = step.run({make_tensor_batch(corpus, {0, 1, 2, 3})}, 0.0);
  ASSERT_EQ(r.status, StepResult::Status::kApplied);
  EXPECT_GT(r.grad_norm, 1e-3);
  double sq = 0;
  for (const auto& p : model->parameters())
    if (p.grad().defined()) sq += p.grad().pow(2).sum().item<double>();
  EXPECT_NEAR(std::sqrt(sq), 1e-3, 1e-6);
}

TEST(Metrics, RowsRoundTripThroughTheFile) {
  nmt_test::TempDir dir;
  const std::string path = dir / "metrics.jsonl";
  {
    MetricsFile f(path, -1);
    TrainRow t;
    t.step = 10;
    t.epoch = 1;
    t.loss = 2.5;
    t.ppl = 9.0;
    t.lr = 1e-3;
    t.tgt_tokens = 1234;
    t.phases.forward = 0.5;
    t.tgt_pad_ratio = 1.25;
    f.write(to_json(t));
    ValidRow v;
    v.step = 10;
    v.scores.loss = 1.5;
    v.scores.bleu = 30.25;
    v.scores.loss_tokens = 77;
    v.best = true;
    v.elapsed_s = 61.5;
    f.write(to_json(v));
    t.step = 20;
    f.write(to_json(t));
  }
  const auto row = json::parse(nmt_test::read_lines_of(path)[1]);
  for (const char* key :
       {"valid_loss", "valid_ppl", "valid_loss_tokens", "valid_bleu", "valid_chrf", "best", "step"})
    EXPECT_TRUE(row.contains(key)) << key;
  auto m = read_metrics(path);
  ASSERT_EQ(m.train.size(), 2u);
  ASSERT_EQ(m.valid.size(), 1u);
  EXPECT_EQ(m.train[0].tgt_tokens, 1234);
  EXPECT_DOUBLE_EQ(m.train[0].phases.forward, 0.5);
  EXPECT_DOUBLE_EQ(m.train[0].tgt_pad_ratio, 1.25);
  EXPECT_DOUBLE_EQ(m.valid[0].scores.bleu, 30.25);
  EXPECT_EQ(m.valid[0].scores.loss_tokens, 77);
  EXPECT_TRUE(m.valid[0].best);
  EXPECT_EQ(m.valid[0].elapsed_s, 61.5);
  // A resume at step 10 drops the later rows.
  { MetricsFile f(path, 10); }
  m = read_metrics(path);
  EXPECT_EQ(m.train.size(), 1u);
  EXPECT_EQ(m.valid.size(), 1u);
  // A run written before the keys were unified ("valid_tokens") still reads.
  {
    std::ofstream old(path, std::ios::app);
    old << R"({"step":30,"valid_loss":1.0,"valid_ppl":2.7,"valid_tokens":55,"valid_bleu":1.0,)"
        << R"("valid_chrf":2.0,"best":false})"
        << "\n";
  }
  m = read_metrics(path);
  ASSERT_EQ(m.valid.size(), 2u);
  EXPECT_EQ(m.valid[1].scores.loss_tokens, 55);
  EXPECT_FALSE(m.valid[1].elapsed_s.has_value());  // nor elapsed_s
}

TEST(Metrics, IntervalAveragesOverAppliedSteps) {
  Corpus c;
  c.src = {{5, 6, 7}, {8}};
  c.tgt = {{9}, {10, 11}};
  const std::vector<TensorBatch> batches = {make_tensor_batch(c, {0, 1})};
  Interval interval;
  StepResult applied;
  applied.loss = 10;
  applied.nll = 8;
  applied.tgt_tokens = 5;
  applied.grad_norm = 0.5;
  applied.times.forward = 1;
  StepResult skipped = applied;
  skipped.status = StepResult::Status::kNonFinite;
  interval.add(batches, applied, 1e-3);
  interval.add(batches, skipped, 2e-3);
  const auto row = interval.close(7, 2, 99.0);
  EXPECT_EQ(row.tgt_tokens, 5);
  EXPECT_DOUBLE_EQ(row.loss, 2.0);
  EXPECT_DOUBLE_EQ(row.ppl, std::exp(1.6));
  EXPECT_DOUBLE_EQ(row.lr, 1e-3);
  EXPECT_DOUBLE_EQ(row.phases.forward, 2.0);       // the skipped step took time too
  EXPECT_DOUBLE_EQ(row.tgt_pad_ratio, 6.0 / 5.0);  // width 3 (y + EOS), 2 rows, 5 real tokens
  EXPECT_EQ(interval.close(8, 2, 100.0).tgt_tokens, 0);
}

TEST(CheckpointState, JsonRoundTripAndCorruptFields) {
  CheckpointState s;
  s.step = 12;
  s.epoch = 1;
  s.batch_in_epoch = 3;
  s.tgt_tokens = 999;
  s.elapsed_s = 4.5;
  s.has_best = true;
  s.best_value = 31.5;
  s.best_step = 10;
  s.validations_without_improvement = 1;
  s.validated_step = 12;
  auto t = CheckpointState::from_json(s.to_json(), "state.json");
  EXPECT_EQ(t.to_json(), s.to_json());
  EXPECT_EQ(t.validated_step, 12);
  // Checkpoints from before the field: no validation is known.
  json old = s.to_json();
  old.erase("validated_step");
  EXPECT_EQ(CheckpointState::from_json(old, "state.json").validated_step, -1);
  EXPECT_FALSE(s.to_json().contains("loss_scale"));  // only with fp16
  s.loss_scale = 256;
  s.loss_scale_good_steps = 7;
  t = CheckpointState::from_json(s.to_json(), "state.json");
  EXPECT_DOUBLE_EQ(t.loss_scale, 256);
  EXPECT_EQ(t.loss_scale_good_steps, 7);
  try {
    CheckpointState::from_json(json{{"step", "x"}}, "run/state.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt run/state.json"), std::string::npos);
  }
}

// state.json as nmt wrote it before the typed state: a training checkpoint, a best one and an
// averaged one each read into the same fields and write back the same JSON.
TEST(CheckpointState, FilesWrittenBeforeStillLoad) {
  const std::string dir = nmt_test::source_dir() + "/tests/fixtures/checkpoint_states";
  for (const char* name : {"ckpt", "best", "averaged"}) {
    const std::string text = nmt_test::read_text(dir + "/" + name + "/state.json");
    const CheckpointState s = CheckpointState::read(dir + "/" + name);
    EXPECT_EQ(s.to_json().dump(2) + "\n", text) << name;
  }
  const CheckpointState best = CheckpointState::read(dir + "/best");
  EXPECT_EQ(best.best_metric, BestMetric::kChrf);
  ASSERT_TRUE(best.own_valid_value().has_value());
  EXPECT_DOUBLE_EQ(*best.own_valid_value(), *best.saved_best_value);
  const CheckpointState averaged = CheckpointState::read(dir + "/averaged");
  EXPECT_EQ(averaged.averaged_from.size(), 2u);
  const CheckpointState ckpt = CheckpointState::read(dir + "/ckpt");
  EXPECT_GT(ckpt.step, 0);
  EXPECT_GT(ckpt.tgt_tokens, 0);
}
