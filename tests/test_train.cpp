#include <gtest/gtest.h>

#include <cmath>

#include "model/loss.h"
#include "train/schedule.h"

using namespace nmt;

TEST(Noam, HandComputedValues) {
  // d = 512, warmup = 4000: 512^-0.5 = 0.0441942, 4000^-1.5 = 3.95285e-6.
  EXPECT_NEAR(noam_lr(1, 512, 4000, 1.0), 1.7469281074e-07, 1e-15);
  EXPECT_NEAR(noam_lr(100, 512, 4000, 1.0), 1.7469281074e-05, 1e-13);
  EXPECT_NEAR(noam_lr(4000, 512, 4000, 1.0), 6.9877124297e-04, 1e-12);  // the peak
  EXPECT_NEAR(noam_lr(16000, 512, 4000, 1.0), 3.4938562148e-04, 1e-12);
  // factor 2, d = 256, warmup 400 at the peak: 2 * (1/16) * (1/20).
  EXPECT_NEAR(noam_lr(400, 256, 400, 2.0), 6.25e-03, 1e-12);
}

TEST(Noam, RisesLinearlyThenDecays) {
  EXPECT_NEAR(noam_lr(20, 512, 4000, 1.0) / noam_lr(10, 512, 4000, 1.0), 2.0, 1e-9);
  EXPECT_NEAR(noam_lr(16000, 512, 4000, 1.0) / noam_lr(64000, 512, 4000, 1.0), 2.0, 1e-9);
  EXPECT_LT(noam_lr(4001, 512, 4000, 1.0), noam_lr(4000, 512, 4000, 1.0));
}

TEST(Schedules, InverseSqrtAndConstantHandValues) {
  // Warm-up 100 to a peak of 1e-3: 1e-5 a step, then 1e-3 * sqrt(100 / s).
  EXPECT_NEAR(inverse_sqrt_lr(1, 100, 1e-3), 1e-5, 1e-15);
  EXPECT_NEAR(inverse_sqrt_lr(50, 100, 1e-3), 5e-4, 1e-15);
  EXPECT_NEAR(inverse_sqrt_lr(100, 100, 1e-3), 1e-3, 1e-15);
  EXPECT_NEAR(inverse_sqrt_lr(400, 100, 1e-3), 5e-4, 1e-15);    // sqrt(1/4)
  EXPECT_NEAR(inverse_sqrt_lr(10000, 100, 1e-3), 1e-4, 1e-15);  // sqrt(1/100)
  EXPECT_NEAR(constant_lr(1, 100, 1e-3), 1e-5, 1e-15);
  EXPECT_NEAR(constant_lr(50, 100, 1e-3), 5e-4, 1e-15);
  EXPECT_NEAR(constant_lr(100, 100, 1e-3), 1e-3, 1e-15);
  EXPECT_NEAR(constant_lr(100000, 100, 1e-3), 1e-3, 1e-15);
}

TEST(Schedules, LearningRateFollowsTheConfiguredSchedule) {
  TrainConfig tc;
  tc.warmup_steps = 400;
  tc.lr_factor = 2.0;
  tc.lr = 1e-3;
  EXPECT_DOUBLE_EQ(learning_rate(tc, 256, 400), noam_lr(400, 256, 400, 2.0));  // the default
  tc.lr_schedule = LrSchedule::kInverseSqrt;
  EXPECT_NEAR(learning_rate(tc, 256, 1600), 5e-4, 1e-15);
  tc.lr_schedule = LrSchedule::kConstant;
  EXPECT_NEAR(learning_rate(tc, 256, 200), 5e-4, 1e-15);
  EXPECT_NEAR(learning_rate(tc, 256, 1600), 1e-3, 1e-15);
}

TEST(Schedules, CooldownFallsLinearlyToZeroAtTheEnd) {
  EXPECT_EQ(cooldown_factor(0.9, 0.0), 1.0);  // off
  EXPECT_EQ(cooldown_factor(0.0, 0.25), 1.0);
  EXPECT_EQ(cooldown_factor(0.75, 0.25), 1.0);
  EXPECT_NEAR(cooldown_factor(0.8, 0.25), 0.8, 1e-15);  // (1 - 0.8) / 0.25
  EXPECT_NEAR(cooldown_factor(0.95, 0.25), 0.2, 1e-15);
  EXPECT_EQ(cooldown_factor(1.0, 0.25), 0.0);
  EXPECT_NEAR(cooldown_factor(0.5, 1.0), 0.5, 1e-15);

  TrainConfig tc;
  tc.max_steps = 1000;
  EXPECT_NEAR(run_progress(tc, 250, 0.0, 0.0), 0.25, 1e-15);
  tc.max_epochs = 4;  // whichever limit is nearer
  EXPECT_NEAR(run_progress(tc, 250, 1.5, 0.0), 0.375, 1e-15);
  tc.max_time.seconds = 100;
  EXPECT_NEAR(run_progress(tc, 250, 1.5, 60.0), 0.6, 1e-15);
  tc.max_steps = 0;
  tc.max_epochs = 0;
  EXPECT_NEAR(run_progress(tc, 999999, 9.0, 20.0), 0.2, 1e-15);  // only max_time is set
  EXPECT_EQ(run_progress(tc, 0, 0.0, 150.0), 1.0);

  tc.lr_schedule = LrSchedule::kConstant;
  tc.lr = 1e-3;
  tc.warmup_steps = 10;
  tc.cooldown = 0.4;
  EXPECT_NEAR(learning_rate(tc, 256, 5, 0.1), 5e-4, 1e-15);      // warming up, no cool-down
  EXPECT_NEAR(learning_rate(tc, 256, 500, 0.6), 1e-3, 1e-15);    // cool-down starts
  EXPECT_NEAR(learning_rate(tc, 256, 800, 0.9), 2.5e-4, 1e-15);  // 1e-3 * 0.1 / 0.4
  tc.lr_schedule = LrSchedule::kNoam;
  EXPECT_NEAR(learning_rate(tc, 256, 800, 0.9), 0.25 * noam_lr(800, 256, 10, 1.0), 1e-15);
}

TEST(LabelSmoothing, HandComputedValues) {
  // Row 0: uniform logits over V = 4, gold 1 -> every -log p = ln 4, so loss = ln 4.
  // Row 1: p = (0.1, 0.2, 0.3, 0.4), gold 3 -> nll = -ln 0.4 = 0.916291,
  //        mean(-log p) = 1.508072, loss = 0.9 * 0.916291 + 0.1 * 1.508072 = 0.975469.
  // Row 2: target is padding (0) and counts for nothing.
  const auto logits = torch::tensor({0.0, 0.0, 0.0, 0.0, std::log(1.0), std::log(2.0),
                                     std::log(3.0), std::log(4.0), 1.0, 2.0, 3.0, 4.0},
                                    torch::kFloat)
                          .view({3, 4});
  const auto target = torch::tensor({1, 3, 0});
  const auto s = label_smoothed_loss(logits, target, 0.1, 0);
  EXPECT_NEAR(s.loss.item<double>(), std::log(4.0) + 0.9754688222, 1e-5);
  EXPECT_NEAR(s.nll.item<double>(), std::log(4.0) + 0.9162907319, 1e-5);
  // Without smoothing the loss is the plain NLL.
  const auto plain = label_smoothed_loss(logits, target, 0.0, 0);
  EXPECT_NEAR(plain.loss.item<double>(), plain.nll.item<double>(), 1e-6);
}

TEST(LabelSmoothing, MatchesPyTorchCrossEntropyAndItsGradient) {
  torch::manual_seed(4);
  auto logits = torch::randn({6, 9}, torch::requires_grad());
  const auto target = torch::tensor({3, 0, 8, 1, 0, 5});
  auto ours = label_smoothed_loss(logits, target, 0.2, 0).loss;
  auto g1 = torch::autograd::grad({ours}, {logits})[0];
  auto ref = torch::nn::functional::cross_entropy(logits, target,
                                                  torch::nn::functional::CrossEntropyFuncOptions()
                                                      .ignore_index(0)
                                                      .label_smoothing(0.2)
                                                      .reduction(torch::kSum));
  auto g2 = torch::autograd::grad({ref}, {logits})[0];
  EXPECT_NEAR(ours.item<double>(), ref.item<double>(), 1e-5);
  EXPECT_TRUE(torch::allclose(g1, g2, 1e-5, 1e-6));
}
