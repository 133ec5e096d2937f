// Ensembles (decode/scorer.h): one member is the model itself to the bit; several mix their
// log-probabilities by weight; cached steps equal the full pass; the binary takes repeated
// --checkpoint and refuses models with other vocabularies.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "decode/scorer.h"
#include "decode/search.h"
#include "search_helpers.h"
#include "helpers.h"
#include "model_helpers.h"
#include "quickstart_run.h"
#include "util/util.h"

using namespace nmt;
using nmt_test::QuickstartRun;

namespace {

ModelConfig transformer(int64_t d) {
  ModelConfig c;
  c.d_model = d;
  c.heads = 4;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.d_ff = 2 * d;
  c.max_positions = 40;
  return c;
}

ModelConfig rnn() {
  ModelConfig c;
  c.arch = Arch::kRnn;
  c.d_model = 24;
  c.rnn.hidden = 20;
  c.max_positions = 48;
  return c;
}

std::unique_ptr<EnsembleScorer> ensemble_of(const std::vector<Seq2Seq>& members,
                                            std::vector<double> weights = {}) {
  std::vector<std::unique_ptr<Scorer>> scorers;
  for (auto m : members) {
    m->eval();
    scorers.push_back(std::make_unique<ModelScorer>(m));
  }
  return std::make_unique<EnsembleScorer>(std::move(scorers), std::move(weights));
}

void expect_same_hypotheses(const std::vector<std::vector<Hypothesis>>& a,
                            const std::vector<std::vector<Hypothesis>>& b, bool scores) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size()) << i;
    for (size_t k = 0; k < a[i].size(); ++k) {
      EXPECT_EQ(a[i][k].tokens, b[i][k].tokens) << i << " " << k;
      if (scores) EXPECT_EQ(a[i][k].score, b[i][k].score) << i << " " << k;
    }
  }
}

}  // namespace

TEST(Ensemble, OneMemberIsTheModelToTheBit) {
  auto m = nmt_test::random_model(transformer(32), 30, 1);
  auto e = ensemble_of({m});
  const auto src = nmt_test::random_source(5, 30, 2);
  for (const int64_t beam : {1, 4}) {
    SearchOptions o;
    o.beam_size = beam;
    o.nbest = beam;
    o.length_penalty = 0.6;
    o.mode = resolve_search_mode(o, false);
    expect_same_hypotheses(search(*e, src, o), search(m, src, o), /*scores=*/true);
  }
}

// The scores are sum_i w_i log_softmax(logits_i) with the weights normalised, for members of
// different families and sizes.
TEST(Ensemble, ScoresAreTheWeightedMeanOfTheMembersLogProbabilities) {
  torch::NoGradGuard no_grad;
  auto a = nmt_test::random_model(transformer(32), 30, 3);
  auto b = nmt_test::random_model(rnn(), 30, 4);
  auto e = ensemble_of({a, b}, {1.0, 3.0});
  const auto src = nmt_test::random_source(3, 30, 5);
  const auto tgt = nmt_test::random_source(3, 30, 6);
  const auto want = torch::log_softmax(0.25 * torch::log_softmax(a->forward(src, tgt), -1) +
                                           0.75 * torch::log_softmax(b->forward(src, tgt), -1),
                                       -1);
  const auto full = torch::log_softmax(e->forward(src, tgt), -1);
  EXPECT_TRUE(torch::allclose(full, want, 1e-5, 1e-5));
  EXPECT_EQ(e->max_positions(), 40);  // the smaller of the two
  // Cached steps equal the full pass, sentences' beams included (group 2).
  const auto tgt2 = tgt.repeat_interleave(2, 0);
  auto state = e->start(src, 2);
  for (int64_t t = 0; t < tgt.size(1); ++t) {
    const auto step = torch::log_softmax(e->step(tgt2.select(1, t), *state), -1);
    EXPECT_TRUE(torch::allclose(step, full.select(1, t).repeat_interleave(2, 0), 1e-5, 1e-5))
        << "step " << t;
  }
  // The source attention is the first member's.
  std::vector<torch::Tensor> aa;
  a->decode(tgt, a->encode(src), &aa);
  const auto ea = e->attention(src, tgt);
  EXPECT_EQ(e->attention_layers(), a->attention_layers());
  ASSERT_EQ(ea.size(), aa.size());
  for (size_t l = 0; l < ea.size(); ++l) EXPECT_TRUE(torch::equal(ea[l], aa[l]));
}

TEST(Ensemble, TwoCopiesSearchLikeOneModel) {
  auto m = nmt_test::random_model(transformer(32), 30, 7);
  auto e = ensemble_of({m, m});
  const auto src = nmt_test::random_source(6, 30, 8);
  SearchOptions o;
  o.beam_size = 4;
  o.mode = resolve_search_mode(o, false);
  expect_same_hypotheses(search(*e, src, o), search(m, src, o), /*scores=*/false);
}

// The fused mix is acc_scale * acc + w * x, as ATen computes it.
TEST(Ensemble, MixScoresIsTheWeightedSum) {
  torch::manual_seed(11);
  const auto a = torch::randn({37, 1001}), x = torch::randn({37, 1001});
  const auto want = a * 0.25f + x * 0.75f;
  const auto got = mix_scores(a.clone(), 0.25, x, 0.75);
  EXPECT_TRUE(torch::allclose(got, want, 1e-6, 1e-6));
  // Off the fused path (double scores): the same through ATen, in float.
  const auto d = mix_scores(a.to(torch::kDouble), 0.25, x.to(torch::kDouble), 0.75);
  EXPECT_EQ(d.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::allclose(d, want, 1e-6, 1e-6));
}

TEST(Ensemble, OneModelIsAModelScorer) {
  auto m = nmt_test::random_model(transformer(16), 30, 12);
  EXPECT_NE(dynamic_cast<ModelScorer*>(make_scorer({m}).get()), nullptr);
  EXPECT_NE(dynamic_cast<EnsembleScorer*>(make_scorer({m}, {1.0}).get()), nullptr);
  EXPECT_NE(dynamic_cast<EnsembleScorer*>(make_scorer({m, m}).get()), nullptr);
}

TEST(Ensemble, WeightsAreChecked) {
  auto m = nmt_test::random_model(transformer(16), 30, 9);
  EXPECT_THROW(ensemble_of({m, m}, {1.0}), Error);
  EXPECT_THROW(ensemble_of({m, m}, {1.0, -1.0}), Error);
  EXPECT_THROW(ensemble_of({m, m}, {0.0, 0.0}), Error);
  EXPECT_THROW(ensemble_of({}, {}), Error);
  EXPECT_EQ(ensemble_of({m, m}, {1.0, 3.0})->weights(), std::vector<double>({0.25, 0.75}));
}

// Through the binary: repeated --checkpoint, a two-copy ensemble translating as the model does
// (greedy), eval's JSON naming the members, and a model with another vocabulary refused.
TEST_F(QuickstartRun, EnsembleThroughTheBinary) {
  using nmt_test::run_command;
  const std::string src = data() + "/test.en";
  const auto one = run_command(translate("--beam 1 --input " + src));
  ASSERT_EQ(one.status, 0) << one.output;
  const auto two = run_command(translate("--beam 1 --checkpoint " + run() + " --input " + src));
  ASSERT_EQ(two.status, 0) << two.output;
  EXPECT_NE(two.output.find("ensemble of 2 models"), std::string::npos);
  auto body = [](const std::string& out) {  // the translations, without the log lines
    std::string lines;
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);)
      if (l.rfind("[", 0) != 0) lines += l + "\n";
    return lines;
  };
  EXPECT_EQ(body(two.output), body(one.output));
  const auto eval = run_command(nmt_test::nmt_bin() + " eval --checkpoint " + run() +
                                " --checkpoint " + run() + " --ensemble-weights 2,1 --src " +
                                src + " --ref " + data() + "/test.de --json --threads 1 2>/dev/null");
  ASSERT_EQ(eval.status, 0) << eval.output;
  EXPECT_EQ(nlohmann::json::parse(eval.output)["ensemble"].size(), 2u);
  const auto bad = run_command(translate("--checkpoint " + run() + " --ensemble-weights 1,2,3 "
                                         "--input " + src));
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.output.find("3 weights for 2 checkpoints"), std::string::npos) << bad.output;
  // A copy of the checkpoint with another SentencePiece model (the vocabulary trained anew).
  const std::string other = path("other");
  std::filesystem::copy(run() + "/checkpoints/best", other, std::filesystem::copy_options::recursive);
  auto spm = nmt_test::read_text(other + "/spm.model");
  // A piece's score (protobuf field 2, a 32-bit float after the tag byte 0x15) changes in its
  // lowest mantissa bit: a valid model, but another one.
  const size_t tag = spm.find('\x15', spm.size() / 2);
  ASSERT_NE(tag, std::string::npos);
  spm[tag + 1] ^= 1;
  nmt_test::write_text(other + "/spm.model", spm);
  const auto mixed = run_command(translate("--checkpoint " + other + " --input " + src));
  EXPECT_EQ(mixed.status, 1);
  EXPECT_NE(mixed.output.find("must share the vocabularies"), std::string::npos) << mixed.output;
}
