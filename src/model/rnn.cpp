#include "model/rnn.h"

#include <cmath>

#include "data/tensors.h"
#include "model/dropout.h"
#include "model/linear.h"
#include "text/spm.h"
#include "util/util.h"

namespace nmt {

namespace rnn_utils = torch::nn::utils::rnn;

torch::Tensor additive_scores(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v) {
  return torch::matmul(torch::tanh(q.unsqueeze(2) + k.unsqueeze(1)), v);
}

torch::Tensor dot_scores(const torch::Tensor& q, const torch::Tensor& k) {
  return torch::bmm(q, k.transpose(1, 2));
}

torch::Tensor attention_weights(const torch::Tensor& scores, const torch::Tensor& bias) {
  return torch::softmax(scores + bias.squeeze(1), -1);
}

StackedCellsImpl::StackedCellsImpl(RnnCell cell, int64_t input, int64_t hidden, int64_t layers,
                                   double dropout)
    : lstm_(cell == RnnCell::kLstm), dropout_(dropout) {
  const int64_t gates = (lstm_ ? 4 : 3) * hidden;
  // torch.nn.GRU / LSTM's initialisation: U(-1/sqrt(hidden), 1/sqrt(hidden)) for every tensor.
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
  auto make = [&](const std::string& name, std::vector<int64_t> shape) {
    torch::NoGradGuard no_grad;
    return register_parameter(name, torch::empty(shape).uniform_(-bound, bound));
  };
  for (int64_t l = 0; l < layers; ++l) {
    const std::string s = "_l" + std::to_string(l);
    w_ih_.push_back(make("weight_ih" + s, {gates, l == 0 ? input : hidden}));
    w_hh_.push_back(make("weight_hh" + s, {gates, hidden}));
    b_ih_.push_back(make("bias_ih" + s, {gates}));
    b_hh_.push_back(make("bias_hh" + s, {gates}));
  }
}

torch::Tensor StackedCellsImpl::input_gates(const torch::Tensor& x, int64_t width) const {
  return nmt::linear(x, w_ih_[0].narrow(1, 0, width), b_ih_[0]);
}

torch::Tensor StackedCellsImpl::extra_weight(int64_t width) const {
  return w_ih_[0].narrow(1, width, w_ih_[0].size(1) - width).t();
}

torch::Tensor StackedCellsImpl::step(const torch::Tensor& gates0, const torch::Tensor& extra,
                                     const torch::Tensor& extra_weight, torch::Tensor& h,
                                     torch::Tensor& c) {
  const size_t layers = w_ih_.size();
  // unbind, not h[l]: one gradient node for all layers instead of one full-size one per layer.
  const auto h_in = h.unbind(0);
  const auto c_in = lstm_ ? c.unbind(0) : std::vector<torch::Tensor>();
  std::vector<torch::Tensor> hs, cs;
  torch::Tensor x;  // the input of layers above the first
  for (size_t l = 0; l < layers; ++l) {
    const auto gi = l == 0 ? gates0 + torch::matmul(extra, extra_weight)
                           : torch::addmm(b_ih_[l], x, w_ih_[l].t());
    const auto gh = torch::addmm(b_hh_[l], h_in[l], w_hh_[l].t());
    torch::Tensor out;
    if (lstm_) {
      const auto g = (gi + gh).chunk(4, 1);  // input, forget, cell, output: torch's order
      const auto cell = torch::sigmoid(g[1]) * c_in[l] + torch::sigmoid(g[0]) * torch::tanh(g[2]);
      out = torch::sigmoid(g[3]) * torch::tanh(cell);
      cs.push_back(cell);
    } else {
      const auto i = gi.chunk(3, 1), r = gh.chunk(3, 1);  // reset, update, new: torch's order
      const auto reset = torch::sigmoid(i[0] + r[0]);
      const auto update = torch::sigmoid(i[1] + r[1]);
      const auto fresh = torch::tanh(i[2] + reset * r[2]);
      out = fresh + update * (h_in[l] - fresh);
    }
    hs.push_back(out);
    if (l + 1 < layers) x = nmt::dropout(out, dropout_, is_training());
  }
  h = torch::stack(hs);
  if (lstm_) c = torch::stack(cs);
  return hs.back();
}

RnnAttentionImpl::RnnAttentionImpl(RnnAttentionKind kind, int64_t hidden) {
  if (kind == RnnAttentionKind::kBahdanau) {
    query_ = register_module("query", xavier_linear(hidden, hidden));
    key_ = register_module("key", xavier_linear(hidden, hidden, false));
    v_ = register_module("v", xavier_linear(hidden, 1, false));
  } else if (kind == RnnAttentionKind::kLuongGeneral) {
    key_ = register_module("key", xavier_linear(hidden, hidden, false));
  }
}

torch::Tensor RnnAttentionImpl::keys(const torch::Tensor& memory) {
  return key_ ? linear(key_, memory) : memory;
}

std::pair<torch::Tensor, torch::Tensor> RnnAttentionImpl::forward(const torch::Tensor& query,
                                                                  const torch::Tensor& memory,
                                                                  const torch::Tensor& keys,
                                                                  const torch::Tensor& bias) {
  const int64_t N = query.size(0), B = memory.size(0), S = memory.size(1);
  const auto q = query.view({B, N / B, query.size(1)});
  const auto scores = query_ ? additive_scores(linear(query_, q), keys, v_->weight.view({-1}))
                             : dot_scores(q, keys);
  const auto weights = attention_weights(scores, bias);  // [B, group, S]
  return {torch::bmm(weights, memory).view({N, -1}), weights.view({N, S})};
}

void RnnState::reorder(const torch::Tensor& index) {
  h = h.index_select(1, index);
  if (c.defined()) c = c.index_select(1, index);
  feed = feed.index_select(0, index);
}

void RnnState::select(const torch::Tensor& index) {
  reorder(index);
  const auto sentences = source_rows(index);
  const bool shared = keys.is_same(memory);  // dot attention compares with the memory itself
  memory = memory.index_select(0, sentences);
  keys = shared ? memory : keys.index_select(0, sentences);
  memory_bias = memory_bias.index_select(0, sentences);
}

RnnImpl::RnnImpl(const ModelConfig& c, int64_t src_vocab, int64_t tgt_vocab) : Seq2SeqImpl(c) {
  const RnnConfig& r = c.rnn;
  if (r.hidden % 2 != 0) throw Error("model.rnn.hidden must be even");
  register_embeddings(src_vocab, tgt_vocab);
  const double between = r.layers > 1 ? c.dropout : 0.0;
  if (r.cell == RnnCell::kLstm)
    encoder_lstm_ =
        register_module("encoder", torch::nn::LSTM(torch::nn::LSTMOptions(c.d_model, r.hidden / 2)
                                                       .num_layers(r.layers)
                                                       .bidirectional(true)
                                                       .batch_first(true)
                                                       .dropout(between)));
  else
    encoder_gru_ =
        register_module("encoder", torch::nn::GRU(torch::nn::GRUOptions(c.d_model, r.hidden / 2)
                                                      .num_layers(r.layers)
                                                      .bidirectional(true)
                                                      .batch_first(true)
                                                      .dropout(between)));
  bridge_ = register_module("bridge", xavier_linear(r.hidden, r.hidden));
  if (r.cell == RnnCell::kLstm)
    bridge_cell_ = register_module("bridge_cell", xavier_linear(r.hidden, r.hidden));
  decoder_ = register_module("decoder",
                             StackedCells(r.cell, 2 * c.d_model, r.hidden, r.layers, c.dropout));
  attention_ = register_module("attention", RnnAttention(r.attention, r.hidden));
  combine_ = register_module("combine", xavier_linear(2 * r.hidden, c.d_model, false));
}

Encoded RnnImpl::encode(const torch::Tensor& src) {
  const int64_t B = src.size(0), S = src.size(1), layers = config().rnn.layers,
                hidden = config().rnn.hidden;
  check_length(S, max_positions());
  Encoded enc;
  const auto padding = key_padding_mask(src, kPadId);
  enc.bias = mask_to_bias(padding).view({B, 1, 1, S});
  const auto x = nmt::dropout(src_embed_(src), config().dropout, is_training());
  // Packed by true length, so the backward direction starts at each row's last token. The
  // lengths go to the host once a batch: packing needs them there.
  const auto lengths = padding.logical_not().sum(1).to(torch::kCPU);
  const auto packed = rnn_utils::pack_padded_sequence(x, lengths, /*batch_first=*/true,
                                                      /*enforce_sorted=*/false);
  torch::Tensor out;
  std::vector<torch::Tensor> last;
  if (encoder_lstm_) {
    auto [o, hc] = encoder_lstm_->forward_with_packed_input(packed);
    out = std::get<0>(rnn_utils::pad_packed_sequence(o, /*batch_first=*/true, 0.0, S));
    last = {std::get<0>(hc), std::get<1>(hc)};
  } else {
    auto [o, h] = encoder_gru_->forward_with_packed_input(packed);
    out = std::get<0>(rnn_utils::pad_packed_sequence(o, /*batch_first=*/true, 0.0, S));
    last = {h};
  }
  enc.memory = out;
  // [layers * 2, B, hidden / 2], directions inner -> [layers, B, hidden] as [forward; backward].
  for (const auto& t : last)
    enc.final_states.push_back(
        t.view({layers, 2, B, hidden / 2}).permute({0, 2, 1, 3}).reshape({layers, B, hidden}));
  return enc;
}

std::unique_ptr<RnnState> RnnImpl::initial_state(const Encoded& enc, int64_t group) {
  if (group < 1) throw Error("start_decoding: group must be >= 1, got " + std::to_string(group));
  if (enc.final_states.size() != (bridge_cell_ ? 2u : 1u))
    throw Error("the RNN decoder needs the RNN encoder's final states");
  auto state = std::make_unique<RnnState>();
  state->group = group;
  auto rows = [&](const torch::Tensor& t) {
    return group == 1 ? t : t.repeat_interleave(group, 1);
  };
  state->h = rows(torch::tanh(bridge_(enc.final_states[0])));
  if (bridge_cell_) state->c = rows(torch::tanh(bridge_cell_(enc.final_states[1])));
  state->feed = torch::zeros({enc.memory.size(0) * group, config().d_model},
                             enc.memory.options().dtype(state->h.scalar_type()));
  state->feed_weight = decoder_->extra_weight(config().d_model);
  state->memory = enc.memory;
  state->keys = attention_->keys(enc.memory);
  state->memory_bias = enc.bias;
  return state;
}

torch::Tensor RnnImpl::step(const torch::Tensor& gates0, RnnState& state, torch::Tensor* weights) {
  const auto top = decoder_->step(gates0, state.feed, state.feed_weight, state.h, state.c);
  auto [context, w] = attention_(top, state.memory, state.keys, state.memory_bias);
  if (weights != nullptr) *weights = w;
  state.feed = nmt::dropout(torch::tanh(linear(combine_, torch::cat({context, top}, 1))),
                            config().dropout, is_training());
  return state.feed;
}

torch::Tensor RnnImpl::decode(const torch::Tensor& tgt_in, const Encoded& enc,
                              std::vector<torch::Tensor>* attention) {
  const int64_t T = tgt_in.size(1);
  check_length(T, max_positions());
  const auto embedded = nmt::dropout(tgt_embed_(tgt_in), config().dropout, is_training());
  // Layer 0's products with the embeddings at once; only the fed-back part is per step.
  const auto gates = decoder_->input_gates(embedded, config().d_model);
  auto state = initial_state(enc, 1);
  std::vector<torch::Tensor> outputs, weights(T);
  // unbind, not select(1, t): each select's gradient would be a zero tensor of the gates' full
  // size, T of them summed (quadratic in T); unbind's is one stack.
  const auto per_step = gates.unbind(1);
  for (int64_t t = 0; t < T; ++t)
    outputs.push_back(step(per_step[t], *state, attention ? &weights[t] : nullptr));
  if (attention != nullptr) attention->assign(1, torch::stack(weights, 1).unsqueeze(1));
  return torch::stack(outputs, 1);
}

std::unique_ptr<DecoderState> RnnImpl::start_decoding(const Encoded& enc, int64_t group) {
  return initial_state(enc, group);
}

torch::Tensor RnnImpl::decode_step(const torch::Tensor& tokens, DecoderState& decoder_state,
                                   std::vector<torch::Tensor>* attention) {
  auto* state = dynamic_cast<RnnState*>(&decoder_state);
  if (state == nullptr) throw Error("decode_step: the state was not made by this RNN");
  check_length(state->length + 1, max_positions());
  const auto embedded = nmt::dropout(tgt_embed_(tokens), config().dropout, is_training());
  torch::Tensor w;
  const auto out =
      step(decoder_->input_gates(embedded, config().d_model), *state, attention ? &w : nullptr);
  if (attention != nullptr) attention->assign(1, w.view({w.size(0), 1, 1, w.size(1)}));
  ++state->length;
  return out;
}

}  // namespace nmt
