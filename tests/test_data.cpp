#include <gtest/gtest.h>

#include <set>

#include "data/batching.h"
#include "data/corpus.h"
#include "data/tensors.h"
#include "text/spm.h"

using namespace nmt;

TEST(Tensors, PadSequences) {
  const auto t = pad_sequences({{5, 6, 7}, {8}, {}}, 0);
  ASSERT_EQ(t.sizes(), (std::vector<int64_t>{3, 3}));
  EXPECT_TRUE(t.equal(torch::tensor({5, 6, 7, 8, 0, 0, 0, 0, 0}).view({3, 3})));
}

TEST(Tensors, KeyPaddingMask) {
  const auto tokens = torch::tensor({4, 5, 0, 9, 0, 0}).view({2, 3});
  const auto m = key_padding_mask(tokens, 0);
  EXPECT_TRUE(m.equal(torch::tensor({false, false, true, false, true, true}).view({2, 3})));
}

TEST(Tensors, CausalMaskAndBias) {
  const auto m = causal_mask(3);
  // Row i may see columns <= i.
  EXPECT_TRUE(m.equal(
      torch::tensor({false, true, true, false, false, true, false, false, false}).view({3, 3})));
  const auto b = mask_to_bias(m);
  EXPECT_EQ(b[0][0].item<float>(), 0.0f);
  EXPECT_TRUE(std::isinf(b[0][1].item<float>()) && b[0][1].item<float>() < 0);
  EXPECT_EQ(b[2][1].item<float>(), 0.0f);
}

TEST(Tensors, MakeTensorBatchAddsBosEosAndCountsTokens) {
  Corpus c;
  c.src = {{10, 11}, {12}};
  c.tgt = {{20}, {21, 22, 23}};
  const auto b = make_tensor_batch(c, {0, 1});
  EXPECT_TRUE(b.src.equal(torch::tensor({10, 11, kEosId, 12, kEosId, kPadId}).view({2, 3})));
  EXPECT_TRUE(
      b.tgt_in.equal(torch::tensor({kBosId, 20, kPadId, kPadId, kBosId, 21, 22, 23}).view({2, 4})));
  EXPECT_TRUE(b.tgt_out.equal(
      torch::tensor({20, kEosId, kPadId, kPadId, 21, 22, 23, kEosId}).view({2, 4})));
  EXPECT_EQ(b.src_tokens, 5);
  EXPECT_EQ(b.tgt_tokens, 6);
}

TEST(Batching, SplitMixIsReproducible) {
  SplitMix64 a(7), b(7);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a.next(), b.next());
  SplitMix64 r(1);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(r.below(13), 13u);
}

class BatchingInvariants : public ::testing::TestWithParam<int64_t> {};

TEST_P(BatchingInvariants, BudgetRespectedAndEachPairOncePerEpoch) {
  const int64_t budget = GetParam();
  SplitMix64 rng(3);
  std::vector<int64_t> src, tgt;
  for (int i = 0; i < 2000; ++i) {
    src.push_back(1 + static_cast<int64_t>(rng.below(60)));
    tgt.push_back(1 + static_cast<int64_t>(rng.below(60)));
  }
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const auto batches = make_batches(src, tgt, budget, epoch_seed(1, epoch));
    std::vector<int> seen(src.size(), 0);
    for (const auto& b : batches) {
      ASSERT_FALSE(b.empty());
      int64_t width = 0;
      for (const auto i : b) {
        width = std::max(width, pair_width(src[i], tgt[i]));
        ++seen[i];
      }
      EXPECT_LE(width * static_cast<int64_t>(b.size()), budget);
    }
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "pair " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Budgets, BatchingInvariants, ::testing::Values(64, 500, 4096));

TEST(Batching, DeterministicPerSeedAndShuffledAcrossEpochs) {
  std::vector<int64_t> src, tgt;
  for (int i = 0; i < 500; ++i) {
    src.push_back(1 + i % 37);
    tgt.push_back(1 + (i * 7) % 41);
  }
  const auto a = make_batches(src, tgt, 300, epoch_seed(5, 0));
  const auto b = make_batches(src, tgt, 300, epoch_seed(5, 0));
  const auto c = make_batches(src, tgt, 300, epoch_seed(5, 1));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Batching, BucketingKeepsPaddingLow) {
  std::vector<int64_t> src, tgt;
  SplitMix64 rng(9);
  for (int i = 0; i < 5000; ++i) {
    src.push_back(1 + static_cast<int64_t>(rng.below(50)));
    tgt.push_back(src.back() + static_cast<int64_t>(rng.below(3)));
  }
  int64_t padded = 0, real = 0;
  for (const auto& b : make_batches(src, tgt, 2048, 1)) {
    int64_t width = 0;
    for (const auto i : b) {
      width = std::max(width, pair_width(src[i], tgt[i]));
      real += tgt[i] + 1;
    }
    padded += width * static_cast<int64_t>(b.size());
  }
  EXPECT_LT(static_cast<double>(padded) / static_cast<double>(real), 1.15);
}

// The filters every pair goes through, by hand: the order, the counts, truncation.
TEST(PairFilter, DropsInOrderAndCounts) {
  CorpusStats s;
  const PairFilter f{4, 2.0, false};
  std::vector<int> x = {1, 2}, y = {};
  EXPECT_FALSE(f.keep(x, y, s));  // empty before anything else
  EXPECT_EQ(s.empty, 1);
  x = {1, 2, 3, 4, 5};
  y = {1};
  EXPECT_FALSE(f.keep(x, y, s));  // over max_len before the ratio
  EXPECT_EQ(s.too_long, 1);
  EXPECT_EQ(s.ratio, 0);
  x = {1, 2, 3};
  y = {1};
  EXPECT_FALSE(f.keep(x, y, s));  // 3 > 2.0 x 1
  EXPECT_EQ(s.ratio, 1);
  x = {1, 2};
  y = {1};
  EXPECT_TRUE(f.keep(x, y, s));  // 2 = 2.0 x 1 stays
  // Validation sets: cut to max_len (counted), no ratio.
  const PairFilter cut{3, 0, true};
  x = {1, 2, 3, 4, 5};
  y = {1};
  EXPECT_TRUE(cut.keep(x, y, s));
  EXPECT_EQ(x, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(s.too_long, 2);
  EXPECT_TRUE(PairFilter::valid_text("Grüße"));
  EXPECT_FALSE(PairFilter::valid_text(std::string("a\0b", 3)));
  EXPECT_FALSE(PairFilter::valid_text("\xC3"));
}
