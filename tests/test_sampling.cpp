// Sampling: the Gumbel-max draw on hand-made distributions, its random streams, and sample
// search on small random models.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "decode/sampling.h"
#include "decode/scorer.h"
#include "decode/search.h"
#include "helpers.h"
#include "model/transformer.h"
#include "model_helpers.h"
#include "text/spm.h"
#include "util/util.h"

using namespace nmt;

namespace {

// Scores [rows, 6] whose softmax is p = (pad .2, unk .1, bos .2, eos .25, 4: .15, 5: .1).
torch::Tensor six_way(int64_t rows) {
  const auto p = torch::tensor({0.2, 0.1, 0.2, 0.25, 0.15, 0.1}, torch::kFloat);
  return p.log().unsqueeze(0).repeat({rows, 1});
}

// How often each token is drawn over `n` streams.
std::map<int64_t, double> frequencies(const SamplingOptions& o, int64_t n) {
  std::vector<uint64_t> keys;
  for (int64_t i = 0; i < n; ++i) keys.push_back(stream_key(o.seed, i, 0, 0));
  const auto tokens = sample_tokens(six_way(n), gumbel_noise(keys, 6), o).first;
  std::map<int64_t, double> f;
  for (int64_t i = 0; i < n; ++i) f[tokens[i].item<int64_t>()] += 1.0 / static_cast<double>(n);
  return f;
}


// A hypothesis' log-probability by one teacher-forced pass.
double forced_log_prob(Seq2Seq& model, const torch::Tensor& src_row, const Hypothesis& h) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> in{kBosId}, out(h.tokens.begin(), h.tokens.end());
  in.insert(in.end(), h.tokens.begin(), h.tokens.end());
  if (h.ended) out.push_back(kEosId);
  in.resize(out.size());
  const auto logp = torch::log_softmax(
      model->forward(src_row.unsqueeze(0), torch::tensor(in).unsqueeze(0)), -1)[0];
  double sum = 0;
  for (size_t t = 0; t < out.size(); ++t)
    sum += logp[static_cast<int64_t>(t)][out[t]].item<double>();
  return sum;
}

}  // namespace

TEST(Sampling, StreamsDependOnTheirKeysOnly) {
  EXPECT_EQ(stream_key(1, 7, 0, 3), stream_key(1, 7, 0, 3));
  EXPECT_NE(stream_key(1, 7, 0, 3), stream_key(2, 7, 0, 3));
  EXPECT_NE(stream_key(1, 7, 0, 3), stream_key(1, 8, 0, 3));
  EXPECT_NE(stream_key(1, 7, 0, 3), stream_key(1, 7, 1, 3));
  EXPECT_NE(stream_key(1, 7, 0, 3), stream_key(1, 7, 0, 4));
  const auto a = gumbel_noise({11, 12}, 1000), b = gumbel_noise({12}, 1000);
  EXPECT_TRUE(torch::equal(a[1], b[0]));  // a row's noise does not depend on its neighbours
  EXPECT_FALSE(torch::equal(a[0], a[1]));
  EXPECT_TRUE(torch::isfinite(a).all().item<bool>());
  // Standard Gumbel: mean = Euler's gamma, variance pi^2 / 6.
  EXPECT_NEAR(a.mean().item<double>(), 0.5772, 0.05);
  EXPECT_NEAR(a.var().item<double>(), M_PI * M_PI / 6, 0.15);
}

TEST(Sampling, HandComputedGumbelMaxDraw) {
  // log-probs (pad .2, unk .1, bos .2, eos .25, .15, .1); noise lifts token 5 over token 3:
  // log .1 + 1.0 = -1.303 > log .25 + 0 = -1.386, and PAD's huge noise does not count.
  auto noise = torch::zeros({1, 6});
  noise[0][0] = 100.0;
  noise[0][5] = 1.0;
  SamplingOptions o;
  auto [tokens, logp] = sample_tokens(six_way(1), noise, o);
  EXPECT_EQ(tokens[0].item<int64_t>(), 5);
  EXPECT_NEAR(logp[0].item<double>(), std::log(0.1), 1e-6);  // the model's own log-probability
  // Temperature 0.5 doubles the gap: 2 log .1 + 1 = -3.605 < 2 log .25 = -2.773.
  o.temperature = 0.5;
  EXPECT_EQ(sample_tokens(six_way(1), noise, o).first[0].item<int64_t>(), 3);
  // Top-k 2 keeps tokens 3 and 4 only.
  o.temperature = 1.0;
  o.top_k = 2;
  EXPECT_EQ(sample_tokens(six_way(1), noise, o).first[0].item<int64_t>(), 3);
}

TEST(Sampling, DrawsFollowTheFilteredDistribution) {
  SamplingOptions o;
  // PAD and BOS out: unk .1, eos .25, 4: .15, 5: .1 over .6.
  auto f = frequencies(o, 20000);
  EXPECT_EQ(f.count(kPadId) + f.count(kBosId), 0u);
  EXPECT_NEAR(f[kUnkId], 0.1 / 0.6, 0.015);
  EXPECT_NEAR(f[kEosId], 0.25 / 0.6, 0.015);
  EXPECT_NEAR(f[4], 0.15 / 0.6, 0.015);
  EXPECT_NEAR(f[5], 0.1 / 0.6, 0.015);
  // Temperature 0.5 squares the probabilities: .01, .0625, .0225, .01 over .105.
  o.temperature = 0.5;
  f = frequencies(o, 20000);
  EXPECT_NEAR(f[kEosId], 0.0625 / 0.105, 0.015);
  EXPECT_NEAR(f[4], 0.0225 / 0.105, 0.015);
  // Top-k 2: eos and 4, .25 and .15 over .4.
  o.temperature = 1.0;
  o.top_k = 2;
  f = frequencies(o, 20000);
  EXPECT_EQ(f.size(), 2u);
  EXPECT_NEAR(f[kEosId], 0.625, 0.015);
  // Top-p .6: eos (.417) alone holds less than .6, eos + 4 (.667) reach it.
  o.top_k = 0;
  o.top_p = 0.6;
  f = frequencies(o, 20000);
  EXPECT_EQ(f.size(), 2u);
  EXPECT_NEAR(f[4], 0.375, 0.015);
  // Top-p .4: eos alone.
  o.top_p = 0.4;
  EXPECT_EQ(frequencies(o, 1000).size(), 1u);
}

TEST(Sampling, RejectsBadOptions) {
  SamplingOptions o;
  o.temperature = 0;
  EXPECT_THROW(check_sampling_options(o), Error);
  o.temperature = 1;
  o.top_k = -1;
  EXPECT_THROW(check_sampling_options(o), Error);
  o.top_k = 0;
  o.top_p = 0;
  EXPECT_THROW(check_sampling_options(o), Error);
  o.top_p = 1.5;
  EXPECT_THROW(check_sampling_options(o), Error);
}

// Samples are keyed by line numbers: a sentence alone samples as in its batch; the scores are
// the model's log-probabilities; seeds and samples differ.
TEST(SampleSearch, BatchIndependentScoredByTheModelAndSeeded) {
  const int64_t V = 30;
  auto model = nmt_test::random_model(nmt_test::search_model(), V, 5);
  ModelScorer scorer(model);
  const auto src = nmt_test::random_source(6, V, 8);
  SearchOptions o;
  o.sampling.enabled = true;
  o.sampling.seed = 9;
  o.nbest = 3;
  o.max_len_a = 1.0;
  o.max_len_b = 4;
  const std::vector<int64_t> lines{10, 11, 12, 13, 14, 15};
  o.mode = resolve_search_mode(o, false);
  const auto batch = search(scorer, src, o, lines);
  ASSERT_EQ(batch.size(), 6u);
  int differing = 0;
  for (int64_t i = 0; i < 6; ++i) {
    ASSERT_EQ(batch[i].size(), 3u);
    const auto alone = search(scorer, src.narrow(0, i, 1), o, {lines[i]});
    for (int64_t j = 0; j < 3; ++j) {
      EXPECT_EQ(alone[0][j].tokens, batch[i][j].tokens) << "sentence " << i << " sample " << j;
      const auto row = src[i].masked_select(src[i].ne(kPadId));
      EXPECT_NEAR(batch[i][j].log_prob, forced_log_prob(model, row, batch[i][j]), 1e-4);
    }
    differing += batch[i][0].tokens != batch[i][1].tokens;
  }
  EXPECT_GE(differing, 3);
  o.sampling.seed = 10;
  const auto other = search(scorer, src, o, lines);
  int changed = 0;
  for (size_t i = 0; i < 6; ++i) changed += other[i][0].tokens != batch[i][0].tokens;
  EXPECT_GE(changed, 3);
  o.beam_size = 2;
  EXPECT_THROW(resolve_search_mode(o, false), Error);
}
