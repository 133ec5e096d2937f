// An ensemble of models behind the Seq2Seq interface, for search and evaluation: every member
// encodes the source and decodes with its own caches; the ensemble's scores per step are the
// weighted mean of the members' log-probabilities (log_softmax of each member's logits), which
// search then normalises like any logits (a log-linear mixture, as Marian's ensembles). Source
// attention comes from the first member. Members may differ in architecture and size but must
// share the vocabularies (the caller checks: ckpt loads them). Not for training.
#pragma once

#include <vector>

#include "model/seq2seq.h"

namespace nmt {

class EnsembleImpl : public Seq2SeqImpl {
 public:
  // weights: one per member, >= 0, not all 0 (normalised to sum 1); empty: equal weights.
  // Throws Error on a bad count or value.
  EnsembleImpl(std::vector<Seq2Seq> members, std::vector<double> weights);

  Encoded encode(const torch::Tensor& src) override;
  torch::Tensor decode(const torch::Tensor& tgt_in, const Encoded& enc,
                       std::vector<torch::Tensor>* attention = nullptr) override;
  std::unique_ptr<DecoderState> start_decoding(const Encoded& enc, int64_t group = 1) override;
  torch::Tensor decode_step(const torch::Tensor& tokens, DecoderState& state,
                            std::vector<torch::Tensor>* attention = nullptr) override;
  // States are the members' output states side by side ([..., sum of d_model]).
  torch::Tensor project(const torch::Tensor& states) override;
  int64_t max_positions() const override;
  int64_t attention_layers() const override;
  int64_t attention_heads() const override;

  const std::vector<double>& weights() const { return weights_; }

 private:
  torch::Tensor join(std::vector<torch::Tensor> parts) const;

  std::vector<Seq2Seq> members_;
  std::vector<double> weights_;
  std::vector<int64_t> widths_;  // each member's d_model
};
TORCH_MODULE(Ensemble);

}  // namespace nmt
