// What search decodes with: a scorer gives the next-token scores of a batch's rows and keeps or
// moves rows as search asks. One model is one scorer; an ensemble is a list of (scorer, weight).
// Search knows nothing of how many models there are, and models know nothing of ensembles
// (Marian's scorers; CTranslate2's split of a model from what runs it).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <utility>
#include <vector>

#include "model/seq2seq.h"

namespace nmt {

// A scorer's decoding state for the N rows of one batch, in groups of `group` consecutive rows
// (a sentence's beams), as model/seq2seq.h's DecoderState.
class ScorerState {
 public:
  virtual ~ScorerState() = default;
  // Keeps rows `index` (int64 on the scorer's device): whole groups, as DecoderState::select.
  virtual void select(const torch::Tensor& index) = 0;
  // Moves rows inside their own group only, as DecoderState::reorder.
  virtual void reorder(const torch::Tensor& index) = 0;
};

class Scorer {
 public:
  virtual ~Scorer() = default;
  // Encodes src [B, S] (EOS-terminated rows, right-padded, on device()) and starts decoding
  // `group` rows per sentence.
  virtual std::unique_ptr<ScorerState> start(const torch::Tensor& src, int64_t group) = 0;
  // Feeds one token per row [N]; returns the next tokens' scores [N, V]: log-probabilities up to
  // a constant per row, which search normalises away (log_softmax of the scores is the
  // distribution). A fresh tensor: search may overwrite it.
  virtual torch::Tensor step(const torch::Tensor& tokens, ScorerState& state) = 0;
  // The same scores teacher-forced: [B, T, V] for BOS-prefixed target inputs [B, T].
  virtual torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& tgt_in) = 0;
  // The source attention that attention maps show, [B, heads, T, S] per decoder layer, for
  // target inputs tgt_in [B, T]; attention_layers() and attention_heads() describe it.
  virtual std::vector<torch::Tensor> attention(const torch::Tensor& src,
                                               const torch::Tensor& tgt_in) = 0;
  virtual int64_t attention_layers() const = 0;
  virtual int64_t attention_heads() const = 0;
  // Longest source (with EOS) or target input (with BOS) taken.
  virtual int64_t max_positions() const = 0;
  // Where src and tokens go.
  virtual torch::Device device() const = 0;
};

// One model: its logits are the scores, so search over it decodes exactly as over the model.
class ModelScorer : public Scorer {
 public:
  explicit ModelScorer(Seq2Seq model) : model_(std::move(model)) {}

  std::unique_ptr<ScorerState> start(const torch::Tensor& src, int64_t group) override;
  torch::Tensor step(const torch::Tensor& tokens, ScorerState& state) override;
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& tgt_in) override;
  std::vector<torch::Tensor> attention(const torch::Tensor& src,
                                       const torch::Tensor& tgt_in) override;
  int64_t attention_layers() const override { return model_->attention_layers(); }
  int64_t attention_heads() const override { return model_->attention_heads(); }
  int64_t max_positions() const override { return model_->max_positions(); }
  torch::Device device() const override { return model_->device(); }

  Seq2Seq& model() { return model_; }

 private:
  Seq2Seq model_;
};

// Members mixed by the weighted mean of their log-probabilities (a log-linear mixture, as
// Marian's ensembles). Since search normalises the scores, the mixture is computed as the
// weighted sum of the members' scores: log_softmax(sum w_i log_softmax(x_i)) equals
// log_softmax(sum w_i x_i), and the sum costs one pass over [N, V] without the normalisers.
// Attention comes from the first member; max_positions is the smallest. Members may differ in
// architecture and size but must share the vocabularies (the caller checks).
class EnsembleScorer : public Scorer {
 public:
  // weights: one per member, >= 0, not all 0 (normalised to sum 1); empty: equal weights.
  // Throws Error on a bad count or value.
  EnsembleScorer(std::vector<std::unique_ptr<Scorer>> members, std::vector<double> weights);

  std::unique_ptr<ScorerState> start(const torch::Tensor& src, int64_t group) override;
  torch::Tensor step(const torch::Tensor& tokens, ScorerState& state) override;
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& tgt_in) override;
  std::vector<torch::Tensor> attention(const torch::Tensor& src,
                                       const torch::Tensor& tgt_in) override;
  int64_t attention_layers() const override;
  int64_t attention_heads() const override;
  int64_t max_positions() const override;
  torch::Device device() const override;

  const std::vector<double>& weights() const { return weights_; }

 private:
  std::vector<std::unique_ptr<Scorer>> members_;
  std::vector<double> weights_;
};

// One model's scorer, or with several models (or any weights) an ensemble of them.
std::unique_ptr<Scorer> make_scorer(const std::vector<Seq2Seq>& models,
                                    const std::vector<double>& weights = {});

// acc = acc_scale * acc + w * x, in place on acc ([N, V] scores of one device; float CPU
// tensors in one fused pass). Returns acc, converted to float when it was not.
torch::Tensor mix_scores(torch::Tensor acc, double acc_scale, const torch::Tensor& x, double w);

}  // namespace nmt
