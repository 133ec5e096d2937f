#include "model/transformer.h"

#include <cmath>

#include "data/tensors.h"
#include "model/attention.h"
#include "model/dropout.h"
#include "model/linear.h"
#include "text/spm.h"
#include "util/util.h"

namespace nmt {

namespace F = torch::nn::functional;

torch::Tensor sinusoidal_table(int64_t positions, int64_t d_model) {
  auto pos = torch::arange(positions, torch::kDouble).unsqueeze(1);
  auto i2 = torch::arange(0, d_model, 2, torch::kDouble);
  auto angle = pos * torch::exp(i2 * (-std::log(10000.0) / static_cast<double>(d_model)));
  auto table = torch::zeros({positions, d_model}, torch::kDouble);
  table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, torch::indexing::None, 2)},
                   torch::sin(angle));
  table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, torch::indexing::None, 2)},
                   torch::cos(angle));
  return table.to(torch::kFloat);
}

namespace {
torch::nn::LayerNorm layer_norm(int64_t d) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(1e-5));
}

// Post-norm: norm(x + drop(f(x))). Pre-norm: x + drop(f(norm(x))).
template <class Fn>
torch::Tensor residual(const torch::Tensor& x, torch::nn::LayerNorm& norm, bool pre_norm,
                       double dropout, bool training, Fn&& f) {
  if (pre_norm) return x + nmt::dropout(f(norm(x)), dropout, training);
  return norm(x + nmt::dropout(f(x), dropout, training));
}
}  // namespace

MultiHeadAttentionImpl::MultiHeadAttentionImpl(int64_t d_model, int64_t heads, double dropout,
                                               bool cross)
    : d_model_(d_model),
      heads_(heads),
      head_dim_(d_model / heads),
      dropout_(dropout),
      cross_(cross) {
  if (cross_) {
    q_ = register_module("q", xavier_linear(d_model, d_model));
    kv_ = register_module("kv", xavier_linear(d_model, 2 * d_model));
  } else {
    qkv_ = register_module("qkv", xavier_linear(d_model, 3 * d_model));
  }
  out_ = register_module("out", xavier_linear(d_model, d_model));
}

double MultiHeadAttentionImpl::drop_probability() const { return is_training() ? dropout_ : 0.0; }

torch::Tensor MultiHeadAttentionImpl::attend(const torch::Tensor& q, const torch::Tensor& k,
                                             const torch::Tensor& v, const torch::Tensor& bias,
                                             torch::Tensor* weights) {
  const double p = drop_probability();
  return linear(out_, attention_aten(q, k, v, bias, p, p > 0.0 ? dropout_key() : 0, weights));
}

torch::Tensor MultiHeadAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& memory,
                                              const torch::Tensor& bias, torch::Tensor* weights) {
  const auto q = cross_ ? linear(q_, x) : linear(qkv_, x);
  const auto kv = cross_ ? linear(kv_, memory) : torch::Tensor();
  if (weights == nullptr && fused_attention_applies(q)) {
    // The key is drawn where the ATen path draws it: the two paths consume the generator alike.
    const double p = drop_probability();
    return linear(out_, attention_fused(q, kv, heads_, bias, p, p > 0.0 ? dropout_key() : 0));
  }
  if (cross_) {
    const auto k_v = split_heads(kv, 2, heads_);
    return attend(split_heads(q, 1, heads_)[0], k_v[0], k_v[1], bias, weights);
  }
  const auto qkv = split_heads(q, 3, heads_);
  return attend(qkv[0], qkv[1], qkv[2], bias, weights);
}

torch::Tensor MultiHeadAttentionImpl::memory_kv(const torch::Tensor& memory) {
  return linear(kv_, memory);
}

torch::Tensor MultiHeadAttentionImpl::step_self(const torch::Tensor& x, TransformerState& state,
                                                size_t layer) {
  const int64_t N = x.size(0);
  const auto qkv = linear(qkv_, x.view({N, d_model_}));  // [N, 3d]: q | k | v
  state.store(layer, qkv.narrow(1, d_model_, 2 * d_model_));
  // The newest position may attend to every cached one: no mask needed.
  const auto context =
      attention_step_gather(qkv.narrow(1, 0, d_model_), state.self_kv[layer], state.slots, heads_);
  return linear(out_, context).view({N, 1, d_model_});
}

torch::Tensor MultiHeadAttentionImpl::step_cross(const torch::Tensor& x, const torch::Tensor& kv,
                                                 const torch::Tensor& bias,
                                                 torch::Tensor* weights) {
  const int64_t N = x.size(0);
  const auto context =
      attention_step_grouped(linear(q_, x.view({N, d_model_})), kv, bias, heads_, weights);
  return linear(out_, context).view({N, 1, d_model_});
}

double activation_dropout(const ModelConfig& c) {
  return c.activation_dropout < 0 ? c.dropout : c.activation_dropout;
}

FeedForwardImpl::FeedForwardImpl(int64_t d_model, int64_t d_ff, double dropout)
    : dropout_(dropout) {
  fc1_ = register_module("fc1", xavier_linear(d_model, d_ff));
  fc2_ = register_module("fc2", xavier_linear(d_ff, d_model));
}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x) {
  return linear(fc2_, nmt::relu_dropout(linear(fc1_, x), dropout_, is_training()));
}

EncoderLayerImpl::EncoderLayerImpl(const ModelConfig& c)
    : pre_norm_(c.norm == Norm::kPre), dropout_(c.dropout) {
  self_attn_ = register_module("self_attn",
                               MultiHeadAttention(c.d_model, c.heads, c.attention_dropout, false));
  self_attn_norm_ = register_module("self_attn_norm", layer_norm(c.d_model));
  ffn_ = register_module("ffn", FeedForward(c.d_model, c.d_ff, activation_dropout(c)));
  ffn_norm_ = register_module("ffn_norm", layer_norm(c.d_model));
}

torch::Tensor EncoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& self_bias) {
  auto h =
      residual(x, self_attn_norm_, pre_norm_, dropout_, is_training(),
               [&](const torch::Tensor& y) { return self_attn_(y, torch::Tensor(), self_bias); });
  return residual(h, ffn_norm_, pre_norm_, dropout_, is_training(),
                  [&](const torch::Tensor& y) { return ffn_(y); });
}

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& c)
    : pre_norm_(c.norm == Norm::kPre), dropout_(c.dropout) {
  self_attn_ = register_module("self_attn",
                               MultiHeadAttention(c.d_model, c.heads, c.attention_dropout, false));
  self_attn_norm_ = register_module("self_attn_norm", layer_norm(c.d_model));
  cross_attn_ = register_module("cross_attn",
                                MultiHeadAttention(c.d_model, c.heads, c.attention_dropout, true));
  cross_attn_norm_ = register_module("cross_attn_norm", layer_norm(c.d_model));
  ffn_ = register_module("ffn", FeedForward(c.d_model, c.d_ff, activation_dropout(c)));
  ffn_norm_ = register_module("ffn_norm", layer_norm(c.d_model));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& self_bias,
                                        const torch::Tensor& memory,
                                        const torch::Tensor& memory_bias,
                                        torch::Tensor* cross_weights) {
  auto h =
      residual(x, self_attn_norm_, pre_norm_, dropout_, is_training(),
               [&](const torch::Tensor& y) { return self_attn_(y, torch::Tensor(), self_bias); });
  h = residual(
      h, cross_attn_norm_, pre_norm_, dropout_, is_training(),
      [&](const torch::Tensor& y) { return cross_attn_(y, memory, memory_bias, cross_weights); });
  return residual(h, ffn_norm_, pre_norm_, dropout_, is_training(),
                  [&](const torch::Tensor& y) { return ffn_(y); });
}

torch::Tensor DecoderLayerImpl::step(const torch::Tensor& x, TransformerState& state, size_t i,
                                     torch::Tensor* cross_weights) {
  auto h = residual(x, self_attn_norm_, pre_norm_, dropout_, is_training(),
                    [&](const torch::Tensor& y) { return self_attn_->step_self(y, state, i); });
  h = residual(
      h, cross_attn_norm_, pre_norm_, dropout_, is_training(), [&](const torch::Tensor& y) {
        return cross_attn_->step_cross(y, state.cross_kv[i], state.memory_bias, cross_weights);
      });
  return residual(h, ffn_norm_, pre_norm_, dropout_, is_training(),
                  [&](const torch::Tensor& y) { return ffn_(y); });
}

void TransformerState::select(const torch::Tensor& index) {
  reorder(index);
  const auto sentences = source_rows(index);
  for (auto& t : cross_kv) t = t.index_select(0, sentences);
  memory_bias = memory_bias.index_select(0, sentences);
}

void TransformerState::reorder(const torch::Tensor& index) {
  if (slots.defined()) slots = slots.index_select(0, index);
}

void TransformerState::begin_step(int64_t n, const torch::Device& device) {
  if (n > rows)
    throw Error("decode_step: " + std::to_string(n) + " rows, more than the " +
                std::to_string(rows) + " decoding started with");
  if (slots.defined() && slots.size(0) != n)
    throw Error("decode_step: " + std::to_string(n) + " rows, but the state holds " +
                std::to_string(slots.size(0)));
  if (length >= capacity) {
    // Doubling keeps the copies to about one per stored step.
    const int64_t grown = std::max<int64_t>(16, 2 * capacity);
    for (auto& table : self_kv) {
      if (!table.defined()) continue;
      auto bigger = torch::empty({grown * rows, table.size(1)}, table.options());
      bigger.narrow(0, 0, length * rows).copy_(table.narrow(0, 0, length * rows));
      table = bigger;
    }
    capacity = grown;
  }
  const auto column =
      torch::arange(length * rows, length * rows + n, torch::dtype(torch::kLong).device(device))
          .view({n, 1});
  slots = slots.defined() ? torch::cat({slots, column}, 1) : column;
}

void TransformerState::store(size_t layer, const torch::Tensor& kv) {
  auto& table = self_kv[layer];
  if (!table.defined()) table = torch::empty({capacity * rows, kv.size(1)}, kv.options());
  table.narrow(0, length * rows, kv.size(0)).copy_(kv);
}

TransformerImpl::TransformerImpl(const ModelConfig& c, int64_t src_vocab, int64_t tgt_vocab)
    : Seq2SeqImpl(c), scale_(std::sqrt(static_cast<double>(c.d_model))) {
  // N(0, d^-1/2): after the sqrt(d) scale the embeddings have unit variance.
  register_embeddings(src_vocab, tgt_vocab);
  if (c.positional == Positional::kLearned) {
    src_pos_ = register_module("src_pos", normal_embedding(c.max_positions, c.d_model));
    tgt_pos_ = register_module("tgt_pos", normal_embedding(c.max_positions, c.d_model));
  } else {
    sinusoids_ = register_derived_buffer("sinusoids", sinusoidal_table(c.max_positions, c.d_model));
  }
  encoder_ = register_module("encoder", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.encoder_layers; ++i) encoder_->push_back(EncoderLayer(c));
  decoder_ = register_module("decoder", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.decoder_layers; ++i) decoder_->push_back(DecoderLayer(c));
  if (c.norm == Norm::kPre) {
    encoder_norm_ = register_module("encoder_norm", layer_norm(c.d_model));
    decoder_norm_ = register_module("decoder_norm", layer_norm(c.d_model));
  }
}

torch::Tensor TransformerImpl::embed(const torch::Tensor& tokens, torch::nn::Embedding& table,
                                     const torch::nn::Embedding& learned_positions,
                                     int64_t offset) {
  const int64_t T = tokens.size(1);
  check_length(offset + T, max_positions());
  auto x = table->forward(tokens) * scale_;
  if (learned_positions)
    x = x + learned_positions->weight.narrow(0, offset, T);
  else
    x = x + sinusoids_.narrow(0, offset, T);
  return nmt::dropout(x, config().dropout, is_training());
}

Encoded TransformerImpl::encode(const torch::Tensor& src) {
  Encoded enc;
  enc.bias = mask_to_bias(key_padding_mask(src, kPadId)).view({src.size(0), 1, 1, src.size(1)});
  auto x = embed(src, src_embed_, src_pos_);
  for (const auto& layer : *encoder_) x = layer->as<EncoderLayer>()->forward(x, enc.bias);
  enc.memory = encoder_norm_ ? encoder_norm_(x) : x;
  return enc;
}

torch::Tensor TransformerImpl::decode(const torch::Tensor& tgt_in, const Encoded& enc,
                                      std::vector<torch::Tensor>* cross_weights) {
  const int64_t T = tgt_in.size(1);
  // Right-padded targets: the causal mask alone keeps real positions off the padding.
  auto self_bias = mask_to_bias(causal_mask(T, tgt_in.device()));
  auto x = embed(tgt_in, tgt_embed_, tgt_pos_);
  if (cross_weights != nullptr) cross_weights->assign(decoder_->size(), torch::Tensor());
  for (size_t i = 0; i < decoder_->size(); ++i)
    x = decoder_[i]->as<DecoderLayer>()->forward(
        x, self_bias, enc.memory, enc.bias,
        cross_weights != nullptr ? &(*cross_weights)[i] : nullptr);
  return decoder_norm_ ? decoder_norm_(x) : x;
}

std::unique_ptr<DecoderState> TransformerImpl::start_decoding(const Encoded& enc, int64_t group) {
  if (group < 1) throw Error("start_decoding: group must be >= 1, got " + std::to_string(group));
  auto state = std::make_unique<TransformerState>();
  state->group = group;
  const size_t layers = decoder_->size();
  state->rows = enc.memory.size(0) * group;
  state->self_kv.resize(layers);
  for (size_t i = 0; i < layers; ++i)
    state->cross_kv.push_back(decoder_[i]->as<DecoderLayer>()->memory_kv(enc.memory));
  state->memory_bias = enc.bias;
  return state;
}

torch::Tensor TransformerImpl::decode_step(const torch::Tensor& tokens, DecoderState& decoder_state,
                                           std::vector<torch::Tensor>* cross_weights) {
  auto* cast = dynamic_cast<TransformerState*>(&decoder_state);
  if (cast == nullptr) throw Error("decode_step: the state was not made by this Transformer");
  TransformerState& state = *cast;
  auto x = embed(tokens.view({-1, 1}), tgt_embed_, tgt_pos_, state.length);
  state.begin_step(x.size(0), x.device());
  if (cross_weights != nullptr) cross_weights->assign(decoder_->size(), torch::Tensor());
  for (size_t i = 0; i < decoder_->size(); ++i)
    x = decoder_[i]->as<DecoderLayer>()->step(
        x, state, i, cross_weights != nullptr ? &(*cross_weights)[i] : nullptr);
  ++state.length;
  x = x.squeeze(1);
  return decoder_norm_ ? decoder_norm_(x) : x;
}

}  // namespace nmt
