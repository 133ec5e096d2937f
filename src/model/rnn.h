// The recurrent encoder-decoder with attention (model.arch = "rnn"), one architecture behind the
// Seq2Seq interface (model/seq2seq.h).
//
// Encoder: embeddings, then model.rnn.layers bidirectional GRU or LSTM layers of hidden / 2 units
// a direction (packed, so padding never enters a state); memory h_j = [forward; backward].
// Decoder (Luong et al. 2015, with input feeding): at step t
//   s_t = RNN([embed(y_t); a_{t-1}], s_{t-1})          (layers of `hidden` units)
//   c_t = sum_j softmax_j(score(s_t, h_j)) h_j          (padding masked out)
//   a_t = dropout(tanh(W_c [c_t; s_t]))                 (the attentional vector, d_model wide)
// and a_t is both the output state (projected to the vocabulary as in the Transformer) and the
// next step's extra input. The scores: bahdanau v . tanh(W s + U h), luong_dot s . h,
// luong_general s . W h. The decoder starts from tanh(bridge(last encoder states)), a_0 = 0.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "config/config.h"
#include "model/seq2seq.h"

namespace nmt {

// Attention scores [N, g, S] of g queries per memory row, as pure functions.
// Additive (Bahdanau): v . tanh(q_i + k_j) for projected queries q [N, g, A], keys k [N, S, A],
// and v [A].
torch::Tensor additive_scores(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v);
// Multiplicative (Luong dot; general with k = W h): q_i . k_j for q [N, g, H], k [N, S, H].
torch::Tensor dot_scores(const torch::Tensor& q, const torch::Tensor& k);
// Softmax over the source of scores [N, g, S] plus the key-padding bias [N, 1, 1, S].
torch::Tensor attention_weights(const torch::Tensor& scores, const torch::Tensor& bias);

// A stack of unidirectional GRU or LSTM layers stepped one position at a time, with the
// parameters (names, shapes, gate order and initialisation) of torch.nn.GRU / LSTM.
class StackedCellsImpl : public torch::nn::Module {
 public:
  StackedCellsImpl(RnnCell cell, int64_t input, int64_t hidden, int64_t layers,
                   double dropout);
  // Layer 0's input-side gate pre-activations x W_ih[:, :width]^T + b_ih for the first `width`
  // input columns, any leading shape: computed once for a whole target sequence.
  torch::Tensor input_gates(const torch::Tensor& x, int64_t width) const;
  // W_ih[:, width:]^T, layer 0's weights for the input columns after the first `width`: taken
  // once per sequence, since every narrow() of a parameter adds a gradient of its full size.
  torch::Tensor extra_weight(int64_t width) const;
  // One step: layer 0 gets `gates0` (from input_gates) plus extra x extra_weight for the
  // remaining input columns; h (and c for an LSTM) [layers, N, hidden] are replaced.
  torch::Tensor step(const torch::Tensor& gates0, const torch::Tensor& extra,
                     const torch::Tensor& extra_weight, torch::Tensor& h, torch::Tensor& c);
  bool lstm() const { return lstm_; }

 private:
  bool lstm_;
  double dropout_;
  std::vector<torch::Tensor> w_ih_, w_hh_, b_ih_, b_hh_;
};
TORCH_MODULE(StackedCells);

// The attention of the decoder: scores of one kind, keys precomputed once per sentence.
class RnnAttentionImpl : public torch::nn::Module {
 public:
  RnnAttentionImpl(RnnAttentionKind kind, int64_t hidden);
  // What the scores compare the queries with, [B, S, H], from the memory [B, S, H].
  torch::Tensor keys(const torch::Tensor& memory);
  // Context [N, H] and weights [N, S] for queries [N, H] (groups of N / B consecutive rows
  // share a memory row).
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& query,
                                                  const torch::Tensor& memory,
                                                  const torch::Tensor& keys,
                                                  const torch::Tensor& bias);

 private:
  // query_ and v_ only for bahdanau, key_ also for luong_general.
  torch::nn::Linear query_{nullptr}, key_{nullptr}, v_{nullptr};
};
TORCH_MODULE(RnnAttention);

// Incremental decoding state: the decoder's recurrent state and last attentional vector for N
// rows; the memory, its keys and bias once per sentence.
struct RnnState : DecoderState {
  torch::Tensor h, c;                       // [layers, N, hidden] (c only for an LSTM)
  torch::Tensor feed;                       // [N, d_model] the previous attentional vector
  torch::Tensor feed_weight;                // [d_model, gates] layer 0's weights for `feed`
  torch::Tensor memory, keys, memory_bias;  // [N / group, S, hidden], [N / group, 1, 1, S]

  void select(const torch::Tensor& index) override;
  void reorder(const torch::Tensor& index) override;
};

class RnnImpl : public Seq2SeqImpl {
 public:
  RnnImpl(const ModelConfig& c, int64_t src_vocab, int64_t tgt_vocab);

  Encoded encode(const torch::Tensor& src) override;
  // The one attention distribution of each step in `attention`, [B, 1, T, S].
  torch::Tensor decode(const torch::Tensor& tgt_in, const Encoded& enc,
                       std::vector<torch::Tensor>* attention = nullptr) override;
  std::unique_ptr<DecoderState> start_decoding(const Encoded& enc, int64_t group = 1) override;
  torch::Tensor decode_step(const torch::Tensor& tokens, DecoderState& state,
                            std::vector<torch::Tensor>* attention = nullptr) override;

  int64_t max_positions() const override { return config().max_positions; }
  int64_t attention_layers() const override { return 1; }
  int64_t attention_heads() const override { return 1; }

 private:
  // The state after the bridge, for `group` rows per sentence.
  std::unique_ptr<RnnState> initial_state(const Encoded& enc, int64_t group);
  // One decoder step from layer-0 input gates [N, G]; returns a_t [N, d_model].
  torch::Tensor step(const torch::Tensor& gates0, RnnState& state, torch::Tensor* weights);

  torch::nn::GRU encoder_gru_{nullptr};
  torch::nn::LSTM encoder_lstm_{nullptr};
  torch::nn::Linear bridge_{nullptr}, bridge_cell_{nullptr};
  StackedCells decoder_{nullptr};
  RnnAttention attention_{nullptr};
  torch::nn::Linear combine_{nullptr};
};
TORCH_MODULE(Rnn);

}  // namespace nmt
