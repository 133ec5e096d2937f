#include <gtest/gtest.h>

#include <cstdio>

#include "config/config.h"
#include "helpers.h"
#include "model/quantize.h"
#include "model/transformer.h"
#include "text/spm.h"
#include "util/util.h"

using namespace nmt;

namespace {
ModelConfig tiny(const std::string& norm = "post", const std::string& tie = "all",
                 const std::string& positional = "sinusoidal") {
  ModelConfig c;
  c.d_model = 16;
  c.heads = 4;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.d_ff = 32;
  c.dropout = 0.0;
  c.attention_dropout = 0.0;
  c.norm = nmt_test::choice<nmt::Norm>(norm);
  c.tie_embeddings = nmt_test::choice<nmt::TieEmbeddings>(tie);
  c.positional = nmt_test::choice<nmt::Positional>(positional);
  c.max_positions = 32;
  return c;
}
}  // namespace

TEST(Positional, SinusoidalTableHandValues) {
  const auto t = sinusoidal_table(3, 4);
  ASSERT_EQ(t.sizes(), (std::vector<int64_t>{3, 4}));
  // pe[p, 2i] = sin(p / 10000^(2i/4)), pe[p, 2i+1] = cos(...): frequencies 1 and 1/100.
  const float expected[3][4] = {{0.0f, 1.0f, 0.0f, 1.0f},
                                {0.84147098f, 0.54030231f, 0.00999983f, 0.99995000f},
                                {0.90929743f, -0.41614684f, 0.01999867f, 0.99980001f}};
  for (int p = 0; p < 3; ++p)
    for (int k = 0; k < 4; ++k)
      EXPECT_NEAR(t[p][k].item<float>(), expected[p][k], 1e-6) << p << "," << k;
}

TEST(Model, OutputShapeAndParameterSharing) {
  torch::manual_seed(0);
  Transformer all(tiny("post", "all"), 50, 50);
  Transformer dec(tiny("post", "decoder"), 50, 40);
  Transformer none(tiny("post", "none"), 50, 40);
  auto count = [](Transformer& m) {
    int64_t n = 0;
    for (const auto& p : m->parameters()) n += p.numel();
    return n;
  };
  // Untying adds a target table (40x16), then an output matrix (40x16).
  EXPECT_EQ(count(dec) - count(all), 40 * 16);
  EXPECT_EQ(count(none) - count(dec), 40 * 16);
  const auto src = torch::tensor({5, 6, 7, kEosId, 8, 9, kEosId, kPadId}).view({2, 4});
  const auto tgt = torch::tensor({kBosId, 10, 11, kBosId, 12, kPadId}).view({2, 3});
  EXPECT_EQ(none->forward(src, tgt).sizes(), (std::vector<int64_t>{2, 3, 40}));
}

TEST(Model, XavierInitForMatricesAndScaledEmbeddings) {
  torch::manual_seed(0);
  Transformer m(tiny(), 50, 50);
  for (const auto& p : m->named_parameters()) {
    if (p.key().find("qkv.weight") != std::string::npos) {
      const double bound = std::sqrt(6.0 / (16 + 48));
      EXPECT_LE(p.value().abs().max().item<double>(), bound + 1e-6);
      EXPECT_GT(p.value().abs().max().item<double>(), 0.8 * bound);
    }
    if (p.key().find(".bias") != std::string::npos && p.key().find("norm") == std::string::npos)
      EXPECT_EQ(p.value().abs().max().item<double>(), 0.0) << p.key();
  }
  const auto emb = m->named_parameters()["src_embed.weight"];
  EXPECT_EQ(emb[kPadId].abs().sum().item<double>(), 0.0);
  EXPECT_NEAR(emb.slice(0, 1).std().item<double>(), 0.25, 0.05);  // d^-0.5 for d = 16
}

class ModelVariants : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(ModelVariants, DecoderIsCausal) {
  torch::manual_seed(1);
  Transformer m(tiny(std::get<0>(GetParam()), "all", std::get<1>(GetParam())), 30, 30);
  m->eval();
  torch::NoGradGuard g;
  const auto src = torch::tensor({5, 6, 7, kEosId}).view({1, 4});
  const auto a = m->forward(src, torch::tensor({kBosId, 10, 11, 12}).view({1, 4}));
  const auto b = m->forward(src, torch::tensor({kBosId, 10, 20, 21}).view({1, 4}));
  // Positions 0 and 1 see only BOS and token 10: identical.
  EXPECT_TRUE(torch::allclose(a.slice(1, 0, 2), b.slice(1, 0, 2), 1e-5, 1e-6));
  EXPECT_FALSE(torch::allclose(a.slice(1, 2, 4), b.slice(1, 2, 4), 1e-5, 1e-6));
}

TEST_P(ModelVariants, SourcePaddingIsInvisible) {
  torch::manual_seed(2);
  Transformer m(tiny(std::get<0>(GetParam()), "all", std::get<1>(GetParam())), 30, 30);
  m->eval();
  torch::NoGradGuard g;
  const auto tgt = torch::tensor({kBosId, 10, 11}).view({1, 3});
  const auto a = m->forward(torch::tensor({5, 6, kEosId}).view({1, 3}), tgt);
  const auto b = m->forward(torch::tensor({5, 6, kEosId, kPadId, kPadId}).view({1, 5}), tgt);
  EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(NormAndPositions, ModelVariants,
                         ::testing::Combine(::testing::Values("post", "pre"),
                                            ::testing::Values("sinusoidal", "learned")));

TEST(Model, DropoutOnlyInTraining) {
  torch::manual_seed(3);
  ModelConfig c = tiny();
  c.dropout = 0.3;
  c.attention_dropout = 0.3;
  Transformer m(c, 30, 30);
  const auto src = torch::tensor({5, 6, 7, kEosId}).view({1, 4});
  const auto tgt = torch::tensor({kBosId, 10, 11}).view({1, 3});
  torch::NoGradGuard g;
  m->eval();
  EXPECT_TRUE(torch::equal(m->forward(src, tgt), m->forward(src, tgt)));
  m->train();
  EXPECT_FALSE(torch::equal(m->forward(src, tgt), m->forward(src, tgt)));
}

TEST(Model, ActivationDropoutHasItsOwnRate) {
  ModelConfig c = tiny();
  c.dropout = 0.3;
  EXPECT_EQ(activation_dropout(c), 0.3);  // -1, the default: model.dropout
  c.activation_dropout = 0.0;
  EXPECT_EQ(activation_dropout(c), 0.0);

  // With every other dropout off, the feed-forward ReLU's alone makes training passes differ.
  torch::manual_seed(3);
  c = tiny();
  c.activation_dropout = 0.5;
  Transformer m(c, 30, 30);
  const auto src = torch::tensor({5, 6, 7, kEosId}).view({1, 4});
  const auto tgt = torch::tensor({kBosId, 10, 11}).view({1, 3});
  torch::NoGradGuard g;
  m->eval();
  const auto reference = m->forward(src, tgt);
  m->train();
  EXPECT_FALSE(torch::equal(m->forward(src, tgt), reference));
  c.activation_dropout = 0.0;  // the same weights with it off: training passes equal inference
  Transformer off(c, 30, 30);
  for (const auto& p : off->named_parameters()) p.value().copy_(m->named_parameters()[p.key()]);
  off->train();
  EXPECT_TRUE(torch::allclose(off->forward(src, tgt), reference, 1e-6, 1e-6));
}

TEST(Model, RejectsSequencesBeyondThePositionTable) {
  Transformer m(tiny(), 30, 30);
  const auto long_src = torch::full({1, 40}, 5, torch::kLong);
  EXPECT_THROW(m->encode(long_src), std::exception);
}

// Int8 weights with per-row scales and 8-bit activations: within about 1 % of the float product.
TEST(Int8, LinearIsCloseToFloat) {
  torch::manual_seed(3);
  auto weight = torch::empty({48, 64});
  torch::nn::init::xavier_uniform_(weight);
  const auto bias = torch::empty({48}).uniform_(-0.5, 0.5);
  const auto x = torch::randn({5, 9, 64});
  const auto expected = torch::nn::functional::linear(x, weight, bias);
  const auto got = int8_linear(x, pack_int8(weight, bias));
  ASSERT_EQ(got.sizes(), expected.sizes());
  const double rel = ((got - expected).norm() / expected.norm()).item<double>();
  EXPECT_LT(rel, 0.02) << "relative error " << rel;
  EXPECT_GT(rel, 0.0);  // it really is quantized
  std::printf("[          ] %d-bit activations, relative error %.4g\n",
              int8_reduced_range() ? 7 : 8, rel);
#if defined(__x86_64__)
  // 7 bits exactly where the CPU lacks AVX-512 VNNI (its int8 sums saturate otherwise).
  const bool vnni = nmt_test::read_text("/proc/cpuinfo").find(" avx512_vnni") != std::string::npos;
  EXPECT_EQ(int8_reduced_range(), !vnni);
#endif
}

// A quantized model ranks the vocabulary almost as the float model does, tied or untied.
TEST(Int8, QuantizedModelAgreesWithTheFloatModelAndOnlyInfers) {
  for (const std::string tie : {"all", "none"}) {
    SCOPED_TRACE(tie);
    torch::manual_seed(4);
    auto c = tiny("post", tie);
    c.d_model = 64;
    c.d_ff = 128;
    Transformer m(c, 60, 60);
    m->eval();
    torch::NoGradGuard no_grad;
    const auto src = torch::randint(4, 60, {6, 9});
    const auto tgt = torch::randint(4, 60, {6, 7});
    const auto expected = m->forward(src, tgt);
    m->quantize_int8();
    EXPECT_FALSE(m->is_training());
    const auto got = m->forward(src, tgt);
    const double rel = ((got - expected).norm() / expected.norm()).item<double>();
    EXPECT_LT(rel, 0.05) << "relative error " << rel;
    const double same_argmax =
        got.argmax(-1).eq(expected.argmax(-1)).to(torch::kDouble).mean().item<double>();
    EXPECT_GT(same_argmax, 0.9);
    m->train();
    EXPECT_THROW(m->forward(src, tgt), Error);
  }
}
