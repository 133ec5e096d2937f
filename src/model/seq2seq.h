// The model interface that training, search, validation and translation call, and the factory
// that builds a model from its config. Nothing outside model/ names a concrete architecture.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "model/quantize.h"

namespace nmt {

// Encoder output as decoders and search see it.
struct Encoded {
  torch::Tensor memory;  // [B, S, d] source states
  torch::Tensor bias;    // [B, 1, 1, S] additive key-padding bias (0 or -inf), model dtype
  // A recurrent encoder's last states, [layers, B, d] each (h, and c for an LSTM), that its
  // decoder starts from; empty for the Transformer.
  std::vector<torch::Tensor> final_states;
};

// Incremental decoding state for N rows (hypotheses). Rows come in groups: the `group` rows of
// one source sentence (its beams) are consecutive and may share the source-side caches.
class DecoderState {
 public:
  virtual ~DecoderState() = default;
  // Keeps rows `index` (int64 on the model's device, may repeat): finished rows leave, survivors
  // move. With group > 1, index keeps whole groups, each drawn from one old group.
  virtual void select(const torch::Tensor& index) = 0;
  // Moves rows inside their own group only (beam reordering): the source side stays.
  virtual void reorder(const torch::Tensor& index) = 0;

  int64_t length = 0;  // target positions fed so far
  int64_t group = 1;   // rows per source sentence

 protected:
  // The source-side rows after select(index): one per group, the old group of each new group's
  // first row.
  torch::Tensor source_rows(const torch::Tensor& index) const;
};

class Seq2SeqImpl : public torch::nn::Module {
 public:
  explicit Seq2SeqImpl(ModelConfig config) : config_(std::move(config)) {}

  virtual Encoded encode(const torch::Tensor& src) = 0;
  // Decoder output states [B, T, d] for BOS-prefixed target inputs [B, T], teacher-forced (the
  // training pass). With `attention`, each attention layer's source attention [B, heads, T, S].
  virtual torch::Tensor decode(const torch::Tensor& tgt_in, const Encoded& enc,
                               std::vector<torch::Tensor>* attention = nullptr) = 0;
  // Incremental decoding: the source-side work is done once here, for `group` rows per sentence.
  virtual std::unique_ptr<DecoderState> start_decoding(const Encoded& enc, int64_t group = 1) = 0;
  // Feeds one token per row [N]; returns the output states [N, d], equal to decode() at that
  // position. `attention` as in decode(), here [N, heads, 1, S].
  virtual torch::Tensor decode_step(const torch::Tensor& tokens, DecoderState& state,
                                    std::vector<torch::Tensor>* attention = nullptr) = 0;
  // Vocabulary logits for output states of any leading shape: states W^T (no bias), W the tied
  // target embedding or out_proj, the same in every family. (Ensembles are decode/scorer.h's:
  // a model is one model.)
  torch::Tensor project(const torch::Tensor& states);
  // project(decode(tgt_in, encode(src))).
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& tgt_in);

  // Longest source (with EOS) or target input (with BOS) the model takes.
  virtual int64_t max_positions() const = 0;
  // Layers and heads of the source attention that decode() reports.
  virtual int64_t attention_layers() const = 0;
  virtual int64_t attention_heads() const = 0;
  // Dynamic int8 quantization of the output projection, for inference on the CPU
  // (model/quantize.h): weights are quantized once here, activations per call. Puts the model in
  // eval mode; training mode then refuses to run the projection. The d_model-wide layers stay
  // float: with this LibTorch's oneDNN engine each call with a new activation scale compiles a
  // kernel, which costs more than those small products (docs/performance.md). Refuses a model
  // on CUDA.
  void quantize_int8();

  const ModelConfig& config() const { return config_; }
  // Where the parameters are.
  torch::Device device() const;
  // The tensors model.pt holds: parameters, then buffers that are not derived (see below).
  std::vector<torch::Tensor> saved_tensors() const;

  // model.pt: as torch::nn::Module's, but tensors are written from the CPU (so a checkpoint made
  // on a GPU loads anywhere) and derived buffers are left out (so adding one keeps the format).
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 protected:
  // A buffer computed from the config (a position table): it moves with the model's device but
  // is not saved.
  torch::Tensor register_derived_buffer(const std::string& name, const torch::Tensor& value);
  // Registers the embeddings every family has, first, so that parameters keep their order:
  // src_embed, tgt_embed (unless model.tie_embeddings is "all") and, with "none", the output
  // matrix out_proj; embeddings as normal_embedding makes them. Throws when "all" is given two
  // vocabularies.
  void register_embeddings(int64_t src_vocab, int64_t tgt_vocab);

  torch::nn::Embedding src_embed_{nullptr}, tgt_embed_{nullptr};

 private:
  bool is_derived(const std::string& name) const;

  ModelConfig config_;
  std::vector<std::string> derived_buffers_;
  torch::nn::Linear out_proj_{nullptr};  // only with tie_embeddings "none"
  OutputProjection output_;              // int8 after quantize_int8()
};
TORCH_MODULE(Seq2Seq);

// Building blocks of both families.
// An embedding table [rows, dim] drawn from N(0, dim^-1/2), the padding row zero.
torch::nn::Embedding normal_embedding(int64_t rows, int64_t dim);
// A linear layer with Xavier-uniform weights and zero bias.
torch::nn::Linear xavier_linear(int64_t in, int64_t out, bool bias = true);
// Throws unless a sequence of `length` positions fits the model's max_positions.
void check_length(int64_t length, int64_t max_positions);

// The model model.arch names, freshly initialised from the global generator (torch::manual_seed).
Seq2Seq make_model(const ModelConfig& config, int64_t src_vocab, int64_t tgt_vocab);

}  // namespace nmt
