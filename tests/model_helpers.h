// Random sources and freshly initialised models for the model, decoding and search tests.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "config/config.h"
#include "data/tensors.h"
#include "model/seq2seq.h"
#include "text/spm.h"

namespace nmt_test {

// A one-layer Transformer with dropout on, for the engine's tests (device, step, state).
inline nmt::ModelConfig tiny_model() {
  nmt::ModelConfig c;
  c.d_model = 16;
  c.heads = 2;
  c.encoder_layers = 1;
  c.decoder_layers = 1;
  c.d_ff = 32;
  c.dropout = 0.2;
  c.attention_dropout = 0.1;
  c.max_positions = 64;
  c.tie_embeddings = nmt::TieEmbeddings::kAll;
  return c;
}

// Two encoder and two decoder layers of width 32, no dropout: the search tests' model.
inline nmt::ModelConfig search_model() {
  nmt::ModelConfig c;
  c.d_model = 32;
  c.heads = 4;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.d_ff = 64;
  c.tie_embeddings = nmt::TieEmbeddings::kNone;
  c.max_positions = 40;
  return c;
}

// `rows` rows of random ids in [4, vocab) ending in EOS, right-padded to different lengths: row
// i has min_len + (i * 5) % spread ids before its EOS.
inline torch::Tensor random_source(int64_t rows, int64_t vocab, uint64_t seed, int64_t min_len = 3,
                                   int64_t spread = 9) {
  torch::manual_seed(seed);
  std::vector<std::vector<int64_t>> seqs;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t len = min_len + (i * 5) % spread;
    auto ids = torch::randint(4, vocab, {len}, torch::kLong);
    std::vector<int64_t> row(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + len);
    row.push_back(nmt::kEosId);
    seqs.push_back(row);
  }
  return nmt::pad_sequences(seqs, nmt::kPadId);
}

// The model config.arch names, initialised from `seed`, in eval mode.
inline nmt::Seq2Seq random_model(const nmt::ModelConfig& c, int64_t vocab, uint64_t seed) {
  torch::manual_seed(seed);
  nmt::Seq2Seq model = nmt::make_model(c, vocab, vocab);
  model->eval();
  return model;
}

// Cached step-by-step decoding of `tgt_in` gives the logits and the source attention of the full
// teacher-forced pass at every position.
inline void expect_steps_match_full_pass(nmt::Seq2Seq& model, const torch::Tensor& src,
                                         const torch::Tensor& tgt_in) {
  torch::NoGradGuard no_grad;
  const auto enc = model->encode(src);
  std::vector<torch::Tensor> full_weights;
  const auto full = model->project(model->decode(tgt_in, enc, &full_weights));
  auto state = model->start_decoding(enc);
  for (int64_t t = 0; t < tgt_in.size(1); ++t) {
    std::vector<torch::Tensor> step_weights;
    const auto step =
        model->project(model->decode_step(tgt_in.select(1, t), *state, &step_weights));
    EXPECT_TRUE(torch::allclose(step, full.select(1, t), 1e-5, 1e-5))
        << "step " << t << " max diff " << (step - full.select(1, t)).abs().max().item<float>();
    ASSERT_EQ(step_weights.size(), full_weights.size());
    for (size_t l = 0; l < step_weights.size(); ++l)
      EXPECT_TRUE(
          torch::allclose(step_weights[l].squeeze(2), full_weights[l].select(2, t), 1e-5, 1e-6));
  }
  EXPECT_EQ(state->length, tgt_in.size(1));
}

}  // namespace nmt_test
