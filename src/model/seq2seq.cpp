#include "model/seq2seq.h"

#include <algorithm>
#include <cmath>

#include "model/rnn.h"
#include "model/transformer.h"
#include "text/spm.h"
#include "util/util.h"

namespace nmt {

namespace {
// torch::nn::Module::save's layout, with every tensor written from the CPU.
void save_tree(const torch::nn::Module& module, torch::serialize::OutputArchive& archive,
               const std::vector<std::string>& skip_buffers) {
  torch::NoGradGuard no_grad;
  auto on_cpu = [](const torch::Tensor& t) {
    if (t.device().is_cpu()) return t;
    return t.to(torch::kCPU).set_requires_grad(t.requires_grad());
  };
  for (const auto& p : module.named_parameters(/*recurse=*/false))
    archive.write(p.key(), on_cpu(p.value()));
  for (const auto& b : module.named_buffers(/*recurse=*/false))
    if (std::find(skip_buffers.begin(), skip_buffers.end(), b.key()) == skip_buffers.end())
      archive.write(b.key(), on_cpu(b.value()), /*is_buffer=*/true);
  for (const auto& child : module.named_children()) {
    if (!child.value()->is_serializable()) continue;
    torch::serialize::OutputArchive child_archive(archive.compilation_unit());
    save_tree(*child.value(), child_archive, {});
    archive.write(child.key(), child_archive);
  }
}
}  // namespace

torch::Tensor DecoderState::source_rows(const torch::Tensor& index) const {
  return group == 1 ? index : index.view({-1, group}).select(1, 0).div(group, "floor");
}

torch::nn::Embedding normal_embedding(int64_t rows, int64_t dim) {
  torch::nn::Embedding e(torch::nn::EmbeddingOptions(rows, dim).padding_idx(kPadId));
  torch::NoGradGuard no_grad;
  e->weight.normal_(0.0, std::pow(static_cast<double>(dim), -0.5));
  e->weight[kPadId].zero_();
  return e;
}

torch::nn::Linear xavier_linear(int64_t in, int64_t out, bool bias) {
  torch::nn::Linear l(torch::nn::LinearOptions(in, out).bias(bias));
  torch::nn::init::xavier_uniform_(l->weight);
  if (bias) torch::nn::init::zeros_(l->bias);
  return l;
}

void check_length(int64_t length, int64_t max_positions) {
  if (length > max_positions)
    throw Error("sequence of " + std::to_string(length) + " tokens exceeds model.max_positions " +
                std::to_string(max_positions));
}

void Seq2SeqImpl::register_embeddings(int64_t src_vocab, int64_t tgt_vocab) {
  const ModelConfig& c = config_;
  if (c.tie_embeddings == TieEmbeddings::kAll && src_vocab != tgt_vocab)
    throw Error("tie_embeddings=all needs one vocabulary");
  src_embed_ = register_module("src_embed", normal_embedding(src_vocab, c.d_model));
  tgt_embed_ = c.tie_embeddings == TieEmbeddings::kAll
                   ? src_embed_
                   : register_module("tgt_embed", normal_embedding(tgt_vocab, c.d_model));
  if (c.tie_embeddings == TieEmbeddings::kNone)
    out_proj_ = register_module("out_proj", xavier_linear(c.d_model, tgt_vocab, false));
}

torch::Tensor Seq2SeqImpl::project(const torch::Tensor& states) {
  return output_.forward(states, out_proj_ ? out_proj_->weight : tgt_embed_->weight, is_training());
}

void Seq2SeqImpl::quantize_int8() {
  eval();
  output_.quantize(out_proj_ ? out_proj_->weight : tgt_embed_->weight);
}

torch::Tensor Seq2SeqImpl::forward(const torch::Tensor& src, const torch::Tensor& tgt_in) {
  return project(decode(tgt_in, encode(src)));
}

torch::Device Seq2SeqImpl::device() const {
  const auto params = parameters();
  return params.empty() ? torch::Device(torch::kCPU) : params.front().device();
}

std::vector<torch::Tensor> Seq2SeqImpl::saved_tensors() const {
  auto out = parameters();
  for (const auto& b : named_buffers())
    if (!is_derived(b.key())) out.push_back(b.value());
  return out;
}

void Seq2SeqImpl::save(torch::serialize::OutputArchive& archive) const {
  save_tree(*this, archive, derived_buffers_);
}

void Seq2SeqImpl::load(torch::serialize::InputArchive& archive) {
  for (auto& p : named_parameters(/*recurse=*/false)) archive.read(p.key(), p.value());
  for (auto& b : named_buffers(/*recurse=*/false))
    if (!is_derived(b.key())) archive.read(b.key(), b.value(), /*is_buffer=*/true);
  for (const auto& child : named_children()) {
    if (!child.value()->is_serializable()) continue;
    torch::serialize::InputArchive child_archive;
    archive.read(child.key(), child_archive);
    child.value()->load(child_archive);
  }
}

torch::Tensor Seq2SeqImpl::register_derived_buffer(const std::string& name,
                                                   const torch::Tensor& value) {
  derived_buffers_.push_back(name);
  return register_buffer(name, value);
}

bool Seq2SeqImpl::is_derived(const std::string& name) const {
  return std::find(derived_buffers_.begin(), derived_buffers_.end(), name) !=
         derived_buffers_.end();
}

Seq2Seq make_model(const ModelConfig& config, int64_t src_vocab, int64_t tgt_vocab) {
  if (config.arch == Arch::kTransformer)
    return Seq2Seq(std::shared_ptr<Seq2SeqImpl>(
        std::make_shared<TransformerImpl>(config, src_vocab, tgt_vocab)));
  if (config.arch == Arch::kRnn)
    return Seq2Seq(
        std::shared_ptr<Seq2SeqImpl>(std::make_shared<RnnImpl>(config, src_vocab, tgt_vocab)));
  throw Error(std::string("model.arch: unknown architecture \"") + name_of(config.arch) + "\"");
}

}  // namespace nmt
