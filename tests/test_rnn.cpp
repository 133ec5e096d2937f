// The RNN encoder-decoder: attention scores on hand-computed values, the padding mask, and
// incremental decoding and search through the Seq2Seq interface for every cell and attention.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <tuple>

#include "config/config.h"
#include "config/parse.h"
#include "data/tensors.h"
#include "decode/search.h"
#include "search_helpers.h"
#include "golden_helpers.h"
#include "helpers.h"
#include "model/rnn.h"
#include "model_helpers.h"
#include "text/spm.h"

using namespace nmt;
using nlohmann::json;

namespace {
ModelConfig rnn_config(const std::string& cell, const std::string& attention, int64_t layers = 2) {
  ModelConfig c;
  c.arch = nmt::Arch::kRnn;
  c.d_model = 24;
  c.dropout = 0.2;  // must be off in eval mode
  c.tie_embeddings = nmt::TieEmbeddings::kNone;
  c.max_positions = 40;
  c.rnn.cell = nmt_test::choice<nmt::RnnCell>(cell);
  c.rnn.hidden = 32;
  c.rnn.layers = layers;
  c.rnn.attention = nmt_test::choice<nmt::RnnAttentionKind>(attention);
  return c;
}

// A random RNN in eval mode; sources of 2 to 10 tokens before EOS.
Seq2Seq random_rnn(const ModelConfig& c, int64_t vocab, uint64_t seed) {
  return nmt_test::random_model(c, vocab, seed);
}
torch::Tensor random_source(int64_t rows, int64_t vocab, uint64_t seed) {
  return nmt_test::random_source(rows, vocab, seed, 2);
}

using Variant = std::tuple<std::string, std::string>;  // cell, attention

const json& golden_fixture() {
  static const json j =
      json::parse(nmt_test::read_text(nmt_test::source_dir() + "/tests/fixtures/golden_rnn.json"));
  return j;
}
}  // namespace

// Tiny RNN models built from torch.nn.GRU / LSTM and the same attention in PyTorch, with fixed
// weights (scripts/make_golden_rnn.py): nmt's logits agree within 1e-5 of the largest.
class RnnGolden : public ::testing::TestWithParam<int> {};

TEST_P(RnnGolden, LogitsMatchPyTorchWithin1e5Relative) {
  const json& c = golden_fixture().at("cases").at(GetParam());
  SCOPED_TRACE(c.at("name").get<std::string>());
  json cfg = {{"model", c.at("model")}, {"train", {{"max_steps", 1}}}, {"data", {{"max_len", 8}}}};
  cfg["model"]["dropout"] = 0.0;
  const Config config = parse_config(cfg.dump());
  ASSERT_EQ(config.model.arch, nmt::Arch::kRnn);
  Seq2Seq model =
      make_model(config.model, c.at("src_vocab").get<int64_t>(), c.at("tgt_vocab").get<int64_t>());
  nmt_test::expect_golden_logits(*model, c);
}

INSTANTIATE_TEST_SUITE_P(Cases, RnnGolden, ::testing::Values(0, 1, 2, 3));

TEST(RnnAttention, AdditiveScoresHandValues) {
  // One memory row, one query, A = 2: v . tanh(q + k_j).
  const auto q = torch::tensor({0.5f, -1.0f}).view({1, 1, 2});
  const auto k = torch::tensor({0.0f, 1.0f, 1.0f, 0.0f, -0.5f, 2.0f}).view({1, 3, 2});
  const auto v = torch::tensor({2.0f, 1.0f});
  const auto s = additive_scores(q, k, v);
  ASSERT_EQ(s.sizes(), (std::vector<int64_t>{1, 1, 3}));
  const double expected[] = {2 * std::tanh(0.5) + std::tanh(0.0),   // (0.5, 0)
                             2 * std::tanh(1.5) + std::tanh(-1.0),  // (1.5, -1)
                             2 * std::tanh(0.0) + std::tanh(1.0)};  // (0, 1)
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(s[0][0][j].item<double>(), expected[j], 1e-6);
}

TEST(RnnAttention, DotAndGeneralScoresHandValues) {
  // Two queries share one memory row (a group of beams).
  const auto q = torch::tensor({1.0f, 2.0f, -1.0f, 0.5f}).view({1, 2, 2});
  const auto h = torch::tensor({3.0f, 1.0f, 0.0f, -2.0f}).view({1, 2, 2});
  const auto s = dot_scores(q, h);
  EXPECT_FLOAT_EQ(s[0][0][0].item<float>(), 5.0f);   // 1*3 + 2*1
  EXPECT_FLOAT_EQ(s[0][0][1].item<float>(), -4.0f);  // 2*-2
  EXPECT_FLOAT_EQ(s[0][1][0].item<float>(), -2.5f);  // -3 + 0.5
  EXPECT_FLOAT_EQ(s[0][1][1].item<float>(), -1.0f);  // 0.5*-2
  // General: s . W h, with the keys W h computed once: W = [[0, 1], [2, 0]].
  const auto W = torch::tensor({0.0f, 1.0f, 2.0f, 0.0f}).view({2, 2});
  const auto g = dot_scores(q, torch::matmul(h, W.t()));
  EXPECT_FLOAT_EQ(g[0][0][0].item<float>(), 13.0f);  // W h_0 = (1, 6): 1 + 12
  EXPECT_FLOAT_EQ(g[0][0][1].item<float>(), -2.0f);  // W h_1 = (-2, 0): -2
}

TEST(RnnAttention, PaddingGetsNoWeight) {
  const auto scores = torch::tensor({1.0f, 2.0f, 50.0f}).view({1, 1, 3});
  const auto bias =
      mask_to_bias(torch::tensor({false, false, true}).view({1, 3})).view({1, 1, 1, 3});
  const auto w = attention_weights(scores, bias);
  EXPECT_EQ(w[0][0][2].item<float>(), 0.0f);
  EXPECT_NEAR(w[0][0][0].item<double>(), 1.0 / (1.0 + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(w.sum().item<double>(), 1.0, 1e-6);
}

class RnnVariants : public ::testing::TestWithParam<Variant> {
 protected:
  ModelConfig config() const {
    return rnn_config(std::get<0>(GetParam()), std::get<1>(GetParam()));
  }
};

// Extra padding on a source row changes nothing: packing keeps it out of the encoder states and
// the mask out of the attention.
TEST_P(RnnVariants, SourcePaddingIsInvisible) {
  const int64_t V = 30;
  auto model = random_rnn(config(), V, 5);
  const auto src = random_source(3, V, 2);
  const auto padded = torch::cat({src, torch::full({3, 4}, kPadId, torch::kLong)}, 1);
  const auto tgt_in =
      torch::tensor(std::vector<int64_t>{kBosId, 7, 9, 11}).view({1, 4}).expand({3, 4});
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> w1, w2;
  const auto a = model->project(model->decode(tgt_in, model->encode(src), &w1));
  const auto b = model->project(model->decode(tgt_in, model->encode(padded), &w2));
  EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-6)) << (a - b).abs().max().item<float>();
  ASSERT_EQ(w2.size(), 1u);
  ASSERT_EQ(w2[0].sizes(), (std::vector<int64_t>{3, 1, 4, padded.size(1)}));
  const auto pad_weight =
      w2[0].masked_select(padded.eq(kPadId).view({3, 1, 1, -1}).expand_as(w2[0]));
  EXPECT_EQ(pad_weight.abs().max().item<float>(), 0.0f);
  EXPECT_TRUE(torch::allclose(w2[0].sum(-1), torch::ones({3, 1, 4}), 1e-5, 1e-5));
}

// Cached step-by-step decoding gives the logits and attention of the teacher-forced pass.
TEST_P(RnnVariants, StepByStepEqualsTheFullPass) {
  const int64_t V = 40;
  auto model = random_rnn(config(), V, 7);
  const auto src = random_source(5, V, 3);
  const auto tgt_in = torch::cat(
      {torch::full({5, 1}, kBosId, torch::kLong), torch::randint(4, V, {5, 9}, torch::kLong)}, 1);
  nmt_test::expect_steps_match_full_pass(model, src, tgt_in);
}

// Beams of one sentence share its memory; selecting and reordering rows continues each row as
// a fresh decode of it would.
TEST_P(RnnVariants, GroupedSelectAndReorderMatchFreshDecodes) {
  const int64_t V = 40, K = 3;
  auto model = random_rnn(config(), V, 11);
  const auto src = random_source(2, V, 4);
  const auto prefix = torch::randint(4, V, {2 * K, 3}, torch::kLong);
  const auto next = torch::randint(4, V, {2 * K}, torch::kLong);
  torch::NoGradGuard no_grad;
  auto state = model->start_decoding(model->encode(src), K);
  for (int64_t t = 0; t < 3; ++t) model->decode_step(prefix.select(1, t), *state);
  // Reorder inside groups, then keep only sentence 1's group.
  const auto order = torch::tensor({2, 0, 1, 4, 5, 3}, torch::kLong);
  state->reorder(order);
  const auto keep = torch::tensor({3, 4, 5}, torch::kLong);
  state->select(keep);
  const auto out =
      model->project(model->decode_step(next.index_select(0, order).index_select(0, keep), *state));
  for (int64_t r = 0; r < K; ++r) {
    const int64_t row = order[keep[r].item<int64_t>()].item<int64_t>();  // original row
    auto alone = model->start_decoding(model->encode(src.narrow(0, row / K, 1)));
    for (int64_t t = 0; t < 3; ++t)
      model->decode_step(prefix.narrow(0, row, 1).select(1, t), *alone);
    const auto expected = model->project(model->decode_step(next.narrow(0, row, 1), *alone));
    EXPECT_TRUE(torch::allclose(out[r], expected[0], 1e-5, 1e-5)) << "row " << r;
  }
}

TEST_P(RnnVariants, BeamOfOneIsGreedyAndBeamsDoNotDependOnTheBatch) {
  const int64_t V = 30;
  auto model = random_rnn(config(), V, 13);
  const auto src = random_source(4, V, 6);
  SearchOptions o;
  o.max_len_a = 1.0;
  o.max_len_b = 5;
  o.beam_size = 1;
  const auto greedy = greedy_search(model, src, o);
  const auto beam1 = beam_search(model, src, o);
  ASSERT_EQ(greedy.size(), beam1.size());
  for (size_t i = 0; i < greedy.size(); ++i) {
    EXPECT_EQ(greedy[i].front().tokens, beam1[i].front().tokens) << i;
    EXPECT_NEAR(greedy[i].front().log_prob, beam1[i].front().log_prob, 1e-4) << i;
  }
  o.beam_size = 4;
  const auto batch = search(model, src, o);
  for (int64_t i = 0; i < src.size(0); ++i) {
    const auto row = src.narrow(0, i, 1);
    const auto alone = search(model, row.narrow(1, 0, row.ne(kPadId).sum().item<int64_t>()), o);
    EXPECT_EQ(alone[0].front().tokens, batch[i].front().tokens) << i;
    EXPECT_NEAR(alone[0].front().score, batch[i].front().score, 1e-4) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(CellsAndAttention, RnnVariants,
                         ::testing::Values(Variant{"gru", "bahdanau"}, Variant{"gru", "luong_dot"},
                                           Variant{"gru", "luong_general"},
                                           Variant{"lstm", "bahdanau"},
                                           Variant{"lstm", "luong_dot"},
                                           Variant{"lstm", "luong_general"}));

TEST(Rnn, ParameterNamesAndSharing) {
  auto c = rnn_config("lstm", "bahdanau", 1);
  c.tie_embeddings = nmt::TieEmbeddings::kAll;
  auto model = random_rnn(c, 20, 1);
  std::vector<std::string> names;
  for (const auto& p : model->named_parameters()) names.push_back(p.key());
  const std::vector<std::string> expected = {"src_embed.weight",
                                             "encoder.weight_ih_l0",
                                             "encoder.weight_hh_l0",
                                             "encoder.bias_ih_l0",
                                             "encoder.bias_hh_l0",
                                             "encoder.weight_ih_l0_reverse",
                                             "encoder.weight_hh_l0_reverse",
                                             "encoder.bias_ih_l0_reverse",
                                             "encoder.bias_hh_l0_reverse",
                                             "bridge.weight",
                                             "bridge.bias",
                                             "bridge_cell.weight",
                                             "bridge_cell.bias",
                                             "decoder.weight_ih_l0",
                                             "decoder.weight_hh_l0",
                                             "decoder.bias_ih_l0",
                                             "decoder.bias_hh_l0",
                                             "attention.query.weight",
                                             "attention.query.bias",
                                             "attention.key.weight",
                                             "attention.v.weight",
                                             "combine.weight"};
  EXPECT_EQ(names, expected);
  // Encoder directions have hidden / 2 units; the decoder takes [embedding; attentional vector].
  const auto params = model->named_parameters();
  EXPECT_EQ(params["encoder.weight_hh_l0"].sizes(), (std::vector<int64_t>{64, 16}));
  EXPECT_EQ(params["decoder.weight_ih_l0"].sizes(), (std::vector<int64_t>{128, 48}));
  EXPECT_EQ(params["combine.weight"].sizes(), (std::vector<int64_t>{24, 64}));
  EXPECT_EQ(model->attention_layers(), 1);
  EXPECT_EQ(model->attention_heads(), 1);
}

TEST(Rnn, DropoutOnlyInTrainingAndGradientsReachEveryParameter) {
  auto model = random_rnn(rnn_config("gru", "bahdanau"), 30, 3);
  const auto src = random_source(3, 30, 1);
  const auto tgt_in = torch::randint(4, 30, {3, 5}, torch::kLong);
  {
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::equal(model->forward(src, tgt_in), model->forward(src, tgt_in)));
  }
  model->train();
  const auto a = model->forward(src, tgt_in);
  EXPECT_FALSE(torch::equal(a, model->forward(src, tgt_in)));
  a.sum().backward();
  for (const auto& p : model->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0) << p.key();
  }
}

TEST(Rnn, RejectsSequencesBeyondMaxPositions) {
  auto model = random_rnn(rnn_config("gru", "luong_dot"), 30, 3);
  torch::NoGradGuard no_grad;
  EXPECT_THROW(model->encode(torch::full({1, 41}, 5, torch::kLong)), std::exception);
  const auto enc = model->encode(random_source(1, 30, 1));
  EXPECT_THROW(model->decode(torch::full({1, 41}, 5, torch::kLong), enc), std::exception);
}

TEST(Rnn, Int8OutputLayerAgreesWithFloat) {
  auto model = random_rnn(rnn_config("lstm", "luong_general"), 50, 9);
  const auto src = random_source(3, 50, 2);
  const auto tgt_in = torch::randint(4, 50, {3, 6}, torch::kLong);
  torch::NoGradGuard no_grad;
  const auto before = model->forward(src, tgt_in);
  model->quantize_int8();
  const auto after = model->forward(src, tgt_in);
  const double scale = before.abs().max().item<double>();
  EXPECT_LT((after - before).abs().max().item<double>() / scale, 0.05);
  EXPECT_FALSE(torch::equal(after, before));  // it did change the path
}
