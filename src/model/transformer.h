// The Transformer of "Attention Is All You Need" (encoder-decoder, cross-attention).
#pragma once

#include <torch/torch.h>

#include "config/config.h"

namespace nmt {

// Sinusoidal table [positions, d]: pe[p, 2i] = sin(p / 10000^(2i/d)), pe[p, 2i+1] = cos(...).
torch::Tensor sinusoidal_table(int64_t positions, int64_t d_model);

// Multi-head scaled dot-product attention. Self-attention uses one fused QKV projection;
// cross-attention projects queries from the decoder and keys/values (fused) from the memory.
class MultiHeadAttentionImpl : public torch::nn::Module {
 public:
  MultiHeadAttentionImpl(int64_t d_model, int64_t heads, double dropout, bool cross);
  // x: [B, Tq, d]; memory: [B, Tk, d] for cross-attention (ignored for self-attention);
  // bias: additive, broadcastable to [B, heads, Tq, Tk], or undefined.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& memory,
                        const torch::Tensor& bias);

 private:
  int64_t d_model_, heads_, head_dim_;
  double dropout_;
  bool cross_;
  torch::nn::Linear qkv_{nullptr}, q_{nullptr}, kv_{nullptr}, out_{nullptr};
};
TORCH_MODULE(MultiHeadAttention);

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

class DecoderLayerImpl : public torch::nn::Module {
 public:
  explicit DecoderLayerImpl(const ModelConfig& c);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& self_bias,
                        const torch::Tensor& memory, const torch::Tensor& memory_bias);

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

struct Encoded {
  torch::Tensor memory;  // [B, S, d]
  torch::Tensor bias;    // [B, 1, 1, S] additive key-padding bias
};

class TransformerImpl : public torch::nn::Module {
 public:
  TransformerImpl(const ModelConfig& c, int64_t src_vocab, int64_t tgt_vocab);

  Encoded encode(const torch::Tensor& src);
  // Decoder hidden states [B, T, d] for target inputs (BOS-prefixed), causally masked.
  torch::Tensor decode(const torch::Tensor& tgt_in, const Encoded& enc);
  // Vocabulary logits for hidden states of any leading shape.
  torch::Tensor project(const torch::Tensor& hidden);
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& tgt_in);

  const ModelConfig& config() const { return config_; }

 private:
  torch::Tensor embed(const torch::Tensor& tokens, torch::nn::Embedding& table,
                      const torch::nn::Embedding& learned_positions);

  ModelConfig config_;
  double scale_;
  torch::Tensor sinusoids_;  // not a parameter: rebuilt from the config
  torch::nn::Embedding src_embed_{nullptr}, tgt_embed_{nullptr};
  torch::nn::Embedding src_pos_{nullptr}, tgt_pos_{nullptr};
  torch::nn::Linear out_proj_{nullptr};
  torch::nn::ModuleList encoder_{nullptr}, decoder_{nullptr};
  torch::nn::LayerNorm encoder_norm_{nullptr}, decoder_norm_{nullptr};
};
TORCH_MODULE(Transformer);

}  // namespace nmt
