// The Transformer of "Attention Is All You Need" (encoder-decoder, cross-attention), one
// architecture behind the Seq2Seq interface (model/seq2seq.h).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <utility>
#include <vector>

#include "config/config.h"
#include "model/seq2seq.h"

namespace nmt {

// Sinusoidal table [positions, d]: pe[p, 2i] = sin(p / 10000^(2i/d)), pe[p, 2i+1] = cos(...).
torch::Tensor sinusoidal_table(int64_t positions, int64_t d_model);

struct TransformerState;

// Multi-head scaled dot-product attention. Self-attention uses one fused QKV projection;
// cross-attention projects queries from the decoder and keys/values (fused) from the memory.
class MultiHeadAttentionImpl : public torch::nn::Module {
 public:
  MultiHeadAttentionImpl(int64_t d_model, int64_t heads, double dropout, bool cross);
  // x: [B, Tq, d]; memory: [B, Tk, d] for cross-attention (ignored for self-attention);
  // bias: additive, broadcastable to [B, heads, Tq, Tk], or undefined. When `weights` is given it
  // receives the attention probabilities [B, heads, Tq, Tk].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& memory,
                        const torch::Tensor& bias, torch::Tensor* weights = nullptr);

  // Cross-attention keys | values of a memory [B, Tk, d] -> [B, Tk, 2d]: computed once per
  // sentence for incremental decoding.
  torch::Tensor memory_kv(const torch::Tensor& memory);

  // One incremental self-attention step for x [N, 1, d]: this position's keys and values go
  // into layer `layer`'s cache in `state`, and each row attends to its prefix's positions.
  torch::Tensor step_self(const torch::Tensor& x, TransformerState& state, size_t layer);

  // One incremental cross-attention step for x [N, 1, d] over kv from memory_kv, which may hold
  // one row per group of N / kv.size(0) consecutive rows of x. `weights`, when given, receives
  // the probabilities [N, heads, 1, S].
  torch::Tensor step_cross(const torch::Tensor& x, const torch::Tensor& kv,
                           const torch::Tensor& bias, torch::Tensor* weights = nullptr);

 private:
  // attention_aten on head views, then the output projection.
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& bias, torch::Tensor* weights);
  double drop_probability() const;  // the weights' dropout: 0 unless training

  int64_t d_model_, heads_, head_dim_;
  double dropout_;
  bool cross_;
  torch::nn::Linear qkv_{nullptr}, q_{nullptr}, kv_{nullptr}, out_{nullptr};
};
TORCH_MODULE(MultiHeadAttention);

// The feed-forward blocks' ReLU dropout: model.activation_dropout, or model.dropout when -1.
double activation_dropout(const ModelConfig& c);

class FeedForwardImpl : public torch::nn::Module {
 public:
  FeedForwardImpl(int64_t d_model, int64_t d_ff, double dropout);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  double dropout_;
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(FeedForward);

class EncoderLayerImpl : public torch::nn::Module {
 public:
  explicit EncoderLayerImpl(const ModelConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& self_bias);

 private:
  bool pre_norm_;
  double dropout_;
  MultiHeadAttention self_attn_{nullptr};
  torch::nn::LayerNorm self_attn_norm_{nullptr};
  FeedForward ffn_{nullptr};
  torch::nn::LayerNorm ffn_norm_{nullptr};
};
TORCH_MODULE(EncoderLayer);

// Incremental decoding state for N hypotheses. The `group` hypotheses of one source sentence
// (beam search) share that sentence's source-side caches, stored once, not per row.
//
// Self-attention keys and values are written once, when their step runs, and never move: step
// t's row r is row t * rows + r of each layer's table, and a hypothesis is the list of table
// rows of its prefix (`slots`). Reordering beams or dropping finished rows gathers that small
// index table instead of copying every layer's cache, and a step appends without a copy.
struct TransformerState : DecoderState {
  std::vector<torch::Tensor> self_kv;   // per layer [capacity * rows, 2d]: keys | values
  torch::Tensor slots;                  // [N, length] int64: table rows of each row's positions
  int64_t rows = 0;                     // rows at the first step: later steps have no more
  int64_t capacity = 0;                 // steps the tables hold before they grow
  std::vector<torch::Tensor> cross_kv;  // per layer [N / group, S, 2d], computed once
  torch::Tensor memory_bias;            // [N / group, 1, 1, S] source key-padding bias

  void select(const torch::Tensor& index) override;
  // The source-side caches are identical within a group, so only the slots move.
  void reorder(const torch::Tensor& index) override;

  // Before a step of n rows: room for one more step in the tables, and each row's slot for it.
  void begin_step(int64_t n, const torch::Device& device);
  // Layer `layer`'s keys | values [n, 2d] of the step begun.
  void store(size_t layer, const torch::Tensor& kv);
};

class DecoderLayerImpl : public torch::nn::Module {
 public:
  explicit DecoderLayerImpl(const ModelConfig& c);
  // cross_weights, when given, receives the cross-attention probabilities [B, heads, T, S].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& self_bias,
                        const torch::Tensor& memory, const torch::Tensor& memory_bias,
                        torch::Tensor* cross_weights = nullptr);
  // One position x [N, 1, d] using and extending layer `i` of the state.
  torch::Tensor step(const torch::Tensor& x, TransformerState& state, size_t i,
                     torch::Tensor* cross_weights = nullptr);
  torch::Tensor memory_kv(const torch::Tensor& memory) { return cross_attn_->memory_kv(memory); }

 private:
  bool pre_norm_;
  double dropout_;
  MultiHeadAttention self_attn_{nullptr};
  torch::nn::LayerNorm self_attn_norm_{nullptr};
  MultiHeadAttention cross_attn_{nullptr};
  torch::nn::LayerNorm cross_attn_norm_{nullptr};
  FeedForward ffn_{nullptr};
  torch::nn::LayerNorm ffn_norm_{nullptr};
};
TORCH_MODULE(DecoderLayer);

class TransformerImpl : public Seq2SeqImpl {
 public:
  TransformerImpl(const ModelConfig& c, int64_t src_vocab, int64_t tgt_vocab);

  Encoded encode(const torch::Tensor& src) override;
  // Causally masked; `attention` receives each decoder layer's cross-attention [B, heads, T, S].
  torch::Tensor decode(const torch::Tensor& tgt_in, const Encoded& enc,
                       std::vector<torch::Tensor>* attention = nullptr) override;
  // Computes every layer's cross-attention keys and values once, stored once per sentence.
  std::unique_ptr<DecoderState> start_decoding(const Encoded& enc, int64_t group = 1) override;
  // Needs a TransformerState from start_decoding.
  torch::Tensor decode_step(const torch::Tensor& tokens, DecoderState& state,
                            std::vector<torch::Tensor>* attention = nullptr) override;

  int64_t max_positions() const override { return config().max_positions; }
  int64_t attention_layers() const override { return config().decoder_layers; }
  int64_t attention_heads() const override { return config().heads; }

 private:
  // Scaled embeddings plus positions offset, offset+1, ... for tokens [B, T].
  torch::Tensor embed(const torch::Tensor& tokens, torch::nn::Embedding& table,
                      const torch::nn::Embedding& learned_positions, int64_t offset = 0);

  double scale_;
  torch::Tensor sinusoids_;  // a derived buffer: rebuilt from the config, never saved
  torch::nn::Embedding src_pos_{nullptr}, tgt_pos_{nullptr};
  torch::nn::ModuleList encoder_{nullptr}, decoder_{nullptr};
  torch::nn::LayerNorm encoder_norm_{nullptr}, decoder_norm_{nullptr};
};
TORCH_MODULE(Transformer);

}  // namespace nmt
