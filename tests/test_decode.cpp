// Incremental decoding, greedy and beam search on small random models.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "cli/decode_flags.h"
#include "data/tensors.h"
#include "decode/search.h"
#include "decode/top_candidates.h"
#include "search_helpers.h"
#include "helpers.h"
#include "model/transformer.h"
#include "model_helpers.h"
#include "text/spm.h"
#include "util/blas.h"
#include "util/util.h"

using namespace nmt;

namespace {
ModelConfig small(const std::string& norm, const std::string& positional) {
  ModelConfig c;
  c.d_model = 32;
  c.heads = 4;
  c.encoder_layers = 2;
  c.decoder_layers = 3;
  c.d_ff = 64;
  c.dropout = 0.1;  // must be off in eval mode
  c.attention_dropout = 0.1;
  c.norm = nmt_test::choice<nmt::Norm>(norm);
  c.positional = nmt_test::choice<nmt::Positional>(positional);
  c.tie_embeddings = nmt::TieEmbeddings::kNone;
  c.max_positions = 40;
  return c;
}

using nmt_test::random_model;
using nmt_test::random_source;

// Uncached model score of a hypothesis: one full forward pass.
double full_log_prob(Seq2Seq& model, const torch::Tensor& src_row, const Hypothesis& h) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> in{kBosId}, out;
  for (int t : h.tokens) {
    in.push_back(t);
    out.push_back(t);
  }
  if (h.ended) out.push_back(kEosId);
  in.resize(out.size());
  auto logp = torch::log_softmax(
      model->forward(src_row.unsqueeze(0), torch::tensor(in).unsqueeze(0)), -1)[0];
  double sum = 0;
  for (size_t t = 0; t < out.size(); ++t) sum += logp[t][out[t]].item<double>();
  return sum;
}
}  // namespace

TEST(LengthPenalty, GnmtHandValues) {
  EXPECT_DOUBLE_EQ(length_penalty(7, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(length_penalty(1, 1.0), 1.0);                // (5 + 1) / 6
  EXPECT_NEAR(length_penalty(7, 0.6), 1.5157165665, 1e-9);      // 2^0.6
  EXPECT_NEAR(length_penalty(13, 0.5), std::sqrt(3.0), 1e-12);  // (18 / 6)^0.5
}

TEST(LengthLimit, FloorOfAffineLimitWithinBounds) {
  SearchOptions o;
  o.max_len_a = 1.5;
  o.max_len_b = 10;
  EXPECT_EQ(max_output_length(9, o, 100), 23);  // floor(13.5 + 10)
  EXPECT_EQ(max_output_length(9, o, 20), 20);   // capped by the position table
  o.max_len_a = 0;
  o.max_len_b = 0;
  EXPECT_EQ(max_output_length(9, o, 20), 1);  // at least one token
}

// Cached step-by-step decoding gives the logits of a full causal pass at every position, for
// both norm placements and both position encodings, with padded sources.
TEST(IncrementalDecoding, MatchesFullDecodeAtEveryStep) {
  for (const auto& [norm, positional] : std::vector<std::pair<std::string, std::string>>{
           {"post", "sinusoidal"}, {"pre", "learned"}, {"post", "learned"}}) {
    SCOPED_TRACE(norm + "/" + positional);
    const int64_t V = 50;
    auto model = random_model(small(norm, positional), V, 7);
    const auto src = random_source(5, V, 3);
    const auto tgt_in = torch::cat(
        {torch::full({5, 1}, kBosId, torch::kLong), torch::randint(4, V, {5, 11}, torch::kLong)},
        1);
    nmt_test::expect_steps_match_full_pass(model, src, tgt_in);
  }
}

// Rows selected out of the cache continue exactly as a fresh decode of those rows would.
TEST(IncrementalDecoding, SelectAndReorderKeepRowsConsistent) {
  const int64_t V = 40;
  auto model = random_model(small("post", "sinusoidal"), V, 11);
  const auto src = random_source(4, V, 5);
  const auto tgt_in = torch::cat(
      {torch::full({4, 1}, kBosId, torch::kLong), torch::randint(4, V, {4, 6}, torch::kLong)}, 1);
  torch::NoGradGuard no_grad;
  auto state = model->start_decoding(model->encode(src));
  for (int64_t t = 0; t < 3; ++t) model->decode_step(tgt_in.select(1, t), *state);
  // Keep rows 3 and 1 (in that order), then run to the end.
  const auto keep = torch::tensor(std::vector<int64_t>{3, 1});
  state->select(keep);
  torch::Tensor last;
  for (int64_t t = 3; t < tgt_in.size(1); ++t)
    last = model->project(model->decode_step(tgt_in.index_select(0, keep).select(1, t), *state));
  const auto sub_src = src.index_select(0, keep);
  const auto expected =
      model->forward(sub_src, tgt_in.index_select(0, keep)).select(1, tgt_in.size(1) - 1);
  EXPECT_TRUE(torch::allclose(last, expected, 1e-5, 1e-5));

  // reorder() moves only the target-side caches: valid when the source rows are equal.
  const auto same_src = src.narrow(0, 0, 1).repeat({3, 1});
  auto st2 = model->start_decoding(model->encode(same_src));
  const auto tgt3 = tgt_in.narrow(0, 0, 3);
  for (int64_t t = 0; t < 3; ++t) model->decode_step(tgt3.select(1, t), *st2);
  const auto perm = torch::tensor(std::vector<int64_t>{2, 2, 0});
  st2->reorder(perm);
  for (int64_t t = 3; t < tgt3.size(1); ++t)
    last = model->project(model->decode_step(tgt3.index_select(0, perm).select(1, t), *st2));
  const auto expected2 =
      model->forward(same_src, tgt3.index_select(0, perm)).select(1, tgt3.size(1) - 1);
  EXPECT_TRUE(torch::allclose(last, expected2, 1e-5, 1e-5));
}

// Grouped rows (a sentence's beams) share one copy of the source-side caches and give what
// repeating the source for every row gives, through steps, weights, reorders and select().
TEST(IncrementalDecoding, GroupedRowsShareTheSourceCaches) {
  const int64_t V = 40, B = 3, K = 4;
  auto model = random_model(small("pre", "sinusoidal"), V, 13);
  const auto src = random_source(B, V, 6);
  const auto tgt_in = torch::cat({torch::full({B * K, 1}, kBosId, torch::kLong),
                                  torch::randint(4, V, {B * K, 6}, torch::kLong)},
                                 1);
  torch::NoGradGuard no_grad;
  const auto enc = model->encode(src);
  auto grouped_state = model->start_decoding(enc, K);
  auto repeated_state = model->start_decoding(model->encode(src.repeat_interleave(K, 0)));
  // Without weights the steps take the CPU kernels; with them, the ATen form.
  auto plain_state = model->start_decoding(enc, K);
  auto& grouped = dynamic_cast<TransformerState&>(*grouped_state);
  auto& repeated = dynamic_cast<TransformerState&>(*repeated_state);
  // One copy per sentence, not per beam.
  EXPECT_EQ(grouped.cross_kv[0].size(0), B);
  EXPECT_EQ(grouped.memory_bias.size(0), B);
  auto input = tgt_in;
  for (int64_t t = 0; t < tgt_in.size(1); ++t) {
    if (t == 2) {  // beams move inside their sentence
      const auto perm = torch::tensor(std::vector<int64_t>{1, 1, 0, 3, 4, 7, 6, 5, 8, 8, 8, 8});
      grouped.reorder(perm);
      repeated.reorder(perm);
      plain_state->reorder(perm);
      input = input.index_select(0, perm);
    }
    if (t == 4) {  // sentence 1 leaves; sentence 2's beams are permuted
      const auto keep = torch::tensor(std::vector<int64_t>{0, 1, 2, 3, 9, 8, 11, 10});
      grouped.select(keep);
      repeated.select(keep);
      plain_state->select(keep);
      input = input.index_select(0, keep);
      EXPECT_EQ(grouped.cross_kv[1].size(0), 2);
    }
    std::vector<torch::Tensor> wg, wr;
    const auto a = model->decode_step(input.select(1, t), grouped, &wg);
    const auto b = model->decode_step(input.select(1, t), repeated, &wr);
    EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-5))
        << "step " << t << " max diff " << (a - b).abs().max().item<float>();
    const auto c = model->decode_step(input.select(1, t), *plain_state);
    EXPECT_TRUE(torch::allclose(c, b, 1e-5, 1e-5))
        << "step " << t << " max diff " << (c - b).abs().max().item<float>();
    for (size_t l = 0; l < wg.size(); ++l) {
      ASSERT_EQ(wg[l].sizes(), wr[l].sizes());
      EXPECT_TRUE(torch::allclose(wg[l], wr[l], 1e-5, 1e-6));
    }
  }
  EXPECT_THROW(model->start_decoding(enc, 0), nmt::Error);
}

TEST(Search, BeamOfOneIsExactlyGreedy) {
  const int64_t V = 30;
  for (uint64_t seed : {1, 2, 3}) {
    auto model = random_model(small(seed == 2 ? "pre" : "post", "sinusoidal"), V, seed);
    const auto src = random_source(9, V, seed + 10);
    SearchOptions o;
    o.max_len_a = 1.0;
    o.max_len_b = 3;
    o.length_penalty = 0.6;
    const auto greedy = greedy_search(model, src, o);
    const auto beam = beam_search(model, src, o);  // beam_size 1 through the beam code path
    ASSERT_EQ(greedy.size(), beam.size());
    for (size_t i = 0; i < greedy.size(); ++i) {
      ASSERT_EQ(greedy[i].size(), 1u);
      ASSERT_EQ(beam[i].size(), 1u);
      EXPECT_EQ(greedy[i][0].tokens, beam[i][0].tokens) << "sentence " << i;
      EXPECT_EQ(greedy[i][0].ended, beam[i][0].ended);
      EXPECT_NEAR(greedy[i][0].score, beam[i][0].score, 1e-4);
    }
  }
}

// Scores are the model's own: recomputing a hypothesis with one uncached pass gives its
// log-probability, and the score is that over the GNMT penalty. Limits hold, n-best is sorted.
TEST(Search, BeamScoresLimitsAndNBest) {
  const int64_t V = 30;
  auto model = random_model(small("post", "learned"), V, 5);
  const auto src = random_source(6, V, 9);
  SearchOptions o;
  o.beam_size = 4;
  o.nbest = 3;
  o.length_penalty = 1.0;
  o.max_len_a = 0.5;
  o.max_len_b = 4;
  const auto out = search(model, src, o);
  ASSERT_EQ(out.size(), 6u);
  const auto src_lens = src.ne(kPadId).sum(1) - 1;
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_EQ(out[i].size(), 3u);
    const int64_t limit =
        max_output_length(src_lens[i].item<int64_t>(), o, model->config().max_positions - 1);
    for (size_t j = 0; j < out[i].size(); ++j) {
      const auto& h = out[i][j];
      EXPECT_LE(static_cast<int64_t>(h.tokens.size()), limit);
      if (!h.ended) EXPECT_EQ(static_cast<int64_t>(h.tokens.size()), limit);
      for (int t : h.tokens) EXPECT_NE(t, kEosId);
      EXPECT_NEAR(h.log_prob, full_log_prob(model, src[i], h), 1e-3);
      const int64_t len = static_cast<int64_t>(h.tokens.size()) + (h.ended ? 1 : 0);
      EXPECT_NEAR(h.score, h.log_prob / length_penalty(len, 1.0), 1e-9);
      if (j > 0) EXPECT_GE(out[i][j - 1].score, h.score);
    }
    EXPECT_NE(out[i][0].tokens, out[i][1].tokens);
  }
}

// A wider beam never finds a worse best hypothesis than greedy on these models, and the
// results do not depend on which other sentences share the batch.
TEST(Search, BeamNotWorseThanGreedyAndBatchIndependent) {
  const int64_t V = 30;
  auto model = random_model(small("pre", "sinusoidal"), V, 21);
  const auto src = random_source(8, V, 4);
  SearchOptions o;
  o.max_len_a = 1.0;
  o.max_len_b = 2;
  o.length_penalty = 0.0;
  const auto greedy = search(model, src, o);
  o.beam_size = 5;
  const auto beam = search(model, src, o);
  for (size_t i = 0; i < beam.size(); ++i) {
    EXPECT_GE(beam[i][0].score, greedy[i][0].score - 1e-4) << "sentence " << i;
    const auto alone = search(model, src.narrow(0, static_cast<int64_t>(i), 1), o);
    EXPECT_EQ(alone[0][0].tokens, beam[i][0].tokens) << "sentence " << i;
  }
}

TEST(Search, RejectsBadOptions) {
  auto model = random_model(small("post", "sinusoidal"), 20, 1);
  const auto src = random_source(1, 20, 1);
  SearchOptions o;
  o.beam_size = 2;
  o.nbest = 3;
  EXPECT_THROW(search(model, src, o), std::exception);
  o.beam_size = 0;
  o.nbest = 1;
  EXPECT_THROW(search(model, src, o), std::exception);
}

TEST(TopCandidates, HandComputedGroupOfTwo) {
  // Two rows of one sentence, V = 3. log_softmax([0, ln 2, ln 5]) = log([1, 2, 5] / 8).
  const float l2 = std::log(2.0f), l5 = std::log(5.0f);
  const auto logits = torch::tensor({0.0f, l2, l5, l5, 0.0f, l2}).view({2, 3});
  const auto scores = torch::tensor({-1.0f, -2.0f});
  const auto [values, ids] = nmt::top_candidates(logits, scores, 2, 3);
  ASSERT_EQ(values.sizes(), (std::vector<int64_t>{1, 3}));
  // Best three: row 0 token 2 (-1 + log 5/8), row 0 token 1 (-1 + log 2/8), row 1 token 0 (id 3).
  const std::vector<int64_t> want_ids{2, 1, 3};
  const std::vector<double> want{-1 + std::log(5.0 / 8), -1 + std::log(2.0 / 8),
                                 -2 + std::log(5.0 / 8)};
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(ids[0][i].item<int64_t>(), want_ids[static_cast<size_t>(i)]);
    EXPECT_NEAR(values[0][i].item<float>(), want[static_cast<size_t>(i)], 1e-6);
  }
}

TEST(TopCandidates, EqualValuesInIdOrderAndDeadRowsLast) {
  // Equal logits: the first ids win. A -inf score (a dead beam) only fills what is left.
  const auto logits = torch::zeros({2, 4});
  const float inf = std::numeric_limits<float>::infinity();
  auto [values, ids] = nmt::top_candidates(logits, torch::tensor({0.0f, -inf}), 2, 6);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(ids[0][i].item<int64_t>(), i);
    EXPECT_FLOAT_EQ(values[0][i].item<float>(), -std::log(4.0f));
  }
  EXPECT_EQ(values[0][4].item<float>(), -inf);
  EXPECT_EQ(values[0][5].item<float>(), -inf);
}

TEST(TopCandidates, FusedKernelEqualsTheAtenForm) {
  // The CPU kernel against the generic form that other devices run: the same candidates, values
  // within rounding (exp by a polynomial and another summation order). Widths cross the 64-value
  // chunks and the vocabulary is not a multiple of the vector lanes.
  torch::manual_seed(3);
  for (const auto& [group, width, V] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 1, 8000}, {5, 10, 8000}, {4, 8, 1000}, {3, 70, 203}}) {
    const int64_t R = 6 * group;
    const auto logits = torch::randn({R, V}) * 4.0;
    auto scores = torch::rand({R}) * -10.0;
    scores[1] = -std::numeric_limits<float>::infinity();
    const auto [values, ids] = nmt::top_candidates(logits, scores, group, width);
    const auto [want_values, want_ids] = nmt::top_candidates_aten(logits, scores, group, width);
    EXPECT_TRUE(torch::allclose(values, want_values, 1e-5, 1e-5)) << group << " " << width;
    EXPECT_TRUE(torch::equal(ids, want_ids)) << group << " " << width;
  }
}

TEST(TopCandidates, RejectsBadShapes) {
  const auto logits = torch::zeros({4, 3});
  EXPECT_THROW(nmt::top_candidates(logits, torch::zeros({4}), 3, 1), nmt::Error);  // 4 % 3
  EXPECT_THROW(nmt::top_candidates(logits, torch::zeros({4}), 2, 7), nmt::Error);  // 7 > 6
  EXPECT_THROW(nmt::top_candidates(logits, torch::zeros({3}), 1, 1), nmt::Error);
}

// DecodeOptions: the flags over the checkpoint's decode section, resolved once.
TEST(DecodeOptions, FlagsOverTheCheckpointsDecodeSection) {
  DecodeConfig config;
  config.beam_size = 4;
  config.length_penalty = 0.6;
  config.batch_tokens = 2000;
  config.max_len_a = 1.2;
  DecodeFlags flags;
  flags.device = "cpu";
  flags.precision = "fp32";
  flags.threads = 3;
  flags.length_penalty = 1.0;
  auto o = decode_options(flags, [&] { return config; });
  EXPECT_TRUE(o.device.is_cpu());
  EXPECT_EQ(o.translate.precision, Precision::kFp32);
  EXPECT_EQ(o.threads, 3);
  EXPECT_EQ(o.translate.search.beam_size, 4);
  EXPECT_EQ(o.translate.search.length_penalty, 1.0);
  EXPECT_EQ(o.translate.search.max_len_a, 1.2);
  EXPECT_EQ(o.translate.batch_tokens, 2000);
  EXPECT_EQ(o.translate.batch_workers, 3);  // --parallel auto on the CPU
  EXPECT_EQ(o.translate.min_batches_per_worker, 4);
  flags.beam = 1;
  flags.batch_tokens = 500;
  flags.parallel = "ops";
  o = decode_options(flags, [&] { return config; });
  EXPECT_EQ(o.translate.search.beam_size, 1);
  EXPECT_EQ(o.translate.batch_tokens, 500);
  EXPECT_EQ(o.translate.batch_workers, 1);
}

// The strategy is chosen once, where the options are made, from the flags over the checkpoint's
// decode section; each SearchMode from its flags, and each conflict refused there, naming the
// flag. Search then dispatches on the mode alone.
TEST(DecodeOptions, EachSearchModeIsChosenFromTheFlagsOnce) {
  DecodeConfig config;
  config.beam_size = 5;
  config.length_penalty = 0.6;
  int reads = 0;
  auto options = [&](const DecodeFlags& flags) {
    reads = 0;
    auto o = decode_options(flags, [&] {
      ++reads;
      return config;
    });
    EXPECT_EQ(reads, 1);
    return o.translate.search;
  };
  nmt_test::TempDir dir;
  const std::string phrases = dir / "constraints.txt";
  nmt_test::write_text(phrases, "Hund\n");
  DecodeFlags f;
  EXPECT_EQ(options(f).mode, SearchMode::kBeam);  // the config's beam 5
  f.beam = 1;
  EXPECT_EQ(options(f).mode, SearchMode::kGreedy);
  f = {};
  f.constraints = phrases;
  EXPECT_EQ(options(f).mode, SearchMode::kConstrainedBeam);
  f = {};
  f.sampling.enabled = true;
  f.nbest = 3;
  const SearchOptions sampling = options(f);
  EXPECT_EQ(sampling.mode, SearchMode::kSampling);
  EXPECT_EQ(sampling.beam_size, 1);  // not the config's 5
  EXPECT_EQ(sampling.nbest, 3);
  EXPECT_EQ(sampling.length_penalty, 0.0);  // a sample scores its log-probability
  EXPECT_EQ(rows_per_sentence(sampling), 3);
  // The config path (validation) resolves too.
  EXPECT_EQ(translate_options(config).search.mode, SearchMode::kBeam);
  EXPECT_EQ(translate_options(config, 1).search.mode, SearchMode::kGreedy);
  auto refused = [&](const DecodeFlags& flags, const std::string& message) {
    try {
      decode_options(flags, [&] { return config; });
      ADD_FAILURE() << "accepted: " << message;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  f = {};
  f.constraints = phrases;
  f.beam = 1;
  refused(f, "--constraints needs beam search: give --beam 2 or more");
  f.beam = 0;
  f.sampling.enabled = true;
  refused(f, "--constraints needs beam search: drop --sampling");
  f = {};
  f.sampling.enabled = true;
  f.beam = 3;
  refused(f, "--sampling draws one token a step");
  f = {};
  f.nbest = 6;
  refused(f, "--nbest 6 exceeds the beam size 5");
  f = {};
  f.sampling.enabled = true;
  f.sampling.temperature = 0;
  refused(f, "--temperature");
}

// search() runs the strategy the mode names, whatever the other fields say.
TEST(Search, DispatchesOnTheModeAlone) {
  auto model = random_model(small("pre", "sinusoidal"), 30, 3);
  const auto src = random_source(5, 30, 6);
  ModelScorer scorer(model);
  SearchOptions o;
  o.max_len_b = 4;
  o.beam_size = 4;
  o.mode = SearchMode::kGreedy;
  const auto greedy = search(scorer, src, o);
  const auto reference = greedy_search(scorer, src, o);
  for (size_t i = 0; i < greedy.size(); ++i) EXPECT_EQ(greedy[i][0].tokens, reference[i][0].tokens);
  std::vector<SentenceTerms> terms(5);
  terms[1].constraints = {{7}};
  o.mode = SearchMode::kBeam;
  EXPECT_THROW(search(scorer, src, o, {}, terms), Error);  // constraints need their mode
}

// auto, the default, is bf16 on a CPU with bfloat16 products and fp32 elsewhere.
TEST(DecodeOptions, PrecisionAutoIsTheDefault) {
  DecodeFlags flags;
  flags.device = "cpu";
  const auto o = decode_options(flags, [] { return DecodeConfig{}; });
  EXPECT_EQ(o.precision_setting, PrecisionSetting::kAuto);
  EXPECT_EQ(o.translate.precision, have_bf16_gemm() ? Precision::kBf16 : Precision::kFp32);
}

// A bad flag is refused, naming it, before the checkpoint's config is read.
TEST(DecodeOptions, BadFlagsAreRefusedBeforeTheConfigIsRead) {
  const auto never = []() -> DecodeConfig {
    ADD_FAILURE() << "the config was read";
    return {};
  };
  auto refused = [&](DecodeFlags flags, const std::string& message) {
    try {
      decode_options(flags, never);
      ADD_FAILURE() << "accepted: " << message;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  DecodeFlags f;
  f.threads = -1;
  refused(f, "--threads must be >= 0");
  f = {};
  f.parallel = "threads";
  refused(f, "--parallel: must be one of \"auto\", \"batches\", \"ops\", got \"threads\"");
  f = {};
  f.quantize = "int4";
  refused(f, "--quantize: must be one of \"int8\", got \"int4\"");
  f = {};
  f.device = "gpu";
  refused(f, "--device: unknown device");
  f = {};
  f.device = "cuda";
  f.quantize = "int8";
  refused(f, "--quantize int8 runs on the CPU only");
  f = {};
  f.device = "cpu";
  f.precision = "fp16";
  refused(f, "--precision fp16 runs on CUDA only");
  f = {};
  f.precision = "fp64";
  refused(f, "--precision");
}
