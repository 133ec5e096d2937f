// The hashed dropout mask: the right drop rate on both halves of each hash, exact scaling,
// reproducible from the seed, independent of the thread count, and the gradient through it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/dropout.h"

using nmt::dropout_mask;

TEST(Dropout, DropRateAndScale) {
  for (const double p : {0.1, 0.3, 0.5}) {
    const auto mask = dropout_mask({1000, 1001}, p, 12345);  // odd count: the last half unused
    const auto flat = mask.reshape({-1});
    const double scale = 1.0 / (1.0 - p);
    // Only two values, 0 and exactly 1 / (1 - p).
    EXPECT_TRUE(flat.eq(0).logical_or(flat.eq(static_cast<float>(scale))).all().item<bool>());
    // Even and odd elements come from different halves of the hash: both must drop at rate p.
    for (int64_t parity : {0, 1}) {
      const auto part = flat.slice(0, parity, flat.numel(), 2);
      const double rate = part.eq(0).to(torch::kDouble).mean().item<double>();
      // 500k Bernoulli draws: the standard deviation is below 0.0008.
      EXPECT_NEAR(rate, p, 0.004) << "p " << p << " parity " << parity;
    }
    // Neighbours independent: P(both dropped) = p^2.
    const auto even = flat.slice(0, 0, flat.numel() - 1, 2).eq(0);
    const auto odd = flat.slice(0, 1, flat.numel(), 2).eq(0);
    const double both = even.logical_and(odd).to(torch::kDouble).mean().item<double>();
    EXPECT_NEAR(both, p * p, 0.004) << "p " << p;
    // The expectation is kept.
    EXPECT_NEAR(flat.to(torch::kDouble).mean().item<double>(), 1.0, 0.01);
  }
}

TEST(Dropout, KeysGiveDifferentMasksAndTheSameKeyTheSameMask) {
  const auto a = dropout_mask({4096}, 0.5, 1), b = dropout_mask({4096}, 0.5, 2);
  EXPECT_TRUE(torch::equal(a, dropout_mask({4096}, 0.5, 1)));
  const double same = a.eq(b).to(torch::kDouble).mean().item<double>();
  EXPECT_NEAR(same, 0.5, 0.05);
}

TEST(Dropout, MaskDoesNotDependOnTheThreadCount) {
  const int threads = torch::get_num_threads();
  torch::set_num_threads(1);
  const auto one = dropout_mask({3, 70000}, 0.1, 99);
  torch::set_num_threads(2);
  const auto two = dropout_mask({3, 70000}, 0.1, 99);
  torch::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(one, two));
}

TEST(Dropout, FollowsTheSeedAndOffInEvalOrAtZero) {
  const auto x = torch::ones({64, 64});
  torch::manual_seed(7);
  const auto a = nmt::dropout(x, 0.2, true);
  const auto b = nmt::dropout(x, 0.2, true);  // the next call: another key
  torch::manual_seed(7);
  EXPECT_TRUE(torch::equal(a, nmt::dropout(x, 0.2, true)));
  EXPECT_FALSE(torch::equal(a, b));
  EXPECT_TRUE(nmt::dropout(x, 0.2, false).is_same(x));
  EXPECT_TRUE(nmt::dropout(x, 0.0, true).is_same(x));
}

TEST(Dropout, GradientIsTheMask) {
  const auto x = torch::randn({32, 48}, torch::requires_grad());
  torch::manual_seed(3);
  const auto y = nmt::dropout(x, 0.25, true);
  y.sum().backward();
  torch::manual_seed(3);
  const auto mask = nmt::dropout(torch::ones({32, 48}), 0.25, true);
  EXPECT_TRUE(torch::allclose(x.grad(), mask));
  EXPECT_TRUE(torch::allclose(y, x.detach() * mask));
}

TEST(Dropout, DoubleTensorsGetTheSameMask) {
  const auto x = torch::ones({10, 10}, torch::kDouble);
  torch::manual_seed(5);
  const auto d = nmt::dropout(x, 0.5, true);
  EXPECT_EQ(d.scalar_type(), torch::kDouble);
  torch::manual_seed(5);
  EXPECT_TRUE(torch::equal(d.to(torch::kFloat), nmt::dropout(x.to(torch::kFloat), 0.5, true)));
}

// The fused ReLU + dropout draws the same key and gives the unfused pair's values and gradients.
TEST(Dropout, FusedReluDropoutMatchesReluThenDropout) {
  torch::manual_seed(11);
  const auto base = torch::randn({37, 129});
  const auto g = torch::randn({37, 129});
  auto x1 = base.clone().requires_grad_(true), x2 = base.clone().requires_grad_(true);
  torch::manual_seed(21);
  const auto fused = nmt::relu_dropout(x1, 0.3, true);
  torch::manual_seed(21);
  const auto plain = nmt::dropout(torch::relu(x2), 0.3, true);
  EXPECT_TRUE(torch::equal(fused, plain));
  fused.backward(g);
  plain.backward(g);
  EXPECT_TRUE(torch::equal(x1.grad(), x2.grad()));
  // Some elements were positive but dropped, and their gradient is zero.
  const auto dropped = base.gt(0).logical_and(fused.eq(0));
  EXPECT_GT(dropped.sum().item<int64_t>(), 0);
  EXPECT_TRUE(x1.grad().masked_select(dropped).eq(0).all().item<bool>());
  // Off in eval mode: plain ReLU.
  EXPECT_TRUE(torch::equal(nmt::relu_dropout(base, 0.3, false), torch::relu(base)));
  EXPECT_THROW(nmt::relu_dropout(x1, 1.0, true), c10::Error);
}

// Non-contiguous inputs are masked in their logical element order, as x * mask would.
TEST(Dropout, NonContiguousInputUsesLogicalOrder) {
  const auto x = torch::randn({16, 24}).t();
  ASSERT_FALSE(x.is_contiguous());
  torch::manual_seed(9);
  const auto a = nmt::dropout(x, 0.4, true);
  torch::manual_seed(9);
  const auto b = nmt::dropout(x.contiguous(), 0.4, true);
  EXPECT_TRUE(torch::equal(a, b));
}
