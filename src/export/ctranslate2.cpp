#include "export/ctranslate2.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include "model/transformer.h"
#include "text/spm.h"
#include "text/vocabs.h"
#include "util/io.h"
#include "util/util.h"

namespace nmt {
namespace {

constexpr uint32_t kBinaryVersion = 6;

// Little-endian integers, as the engine reads them on the machines it runs on.
template <class T>
void put(std::string& out, T v) {
  static_assert(std::is_integral_v<T>);
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_string(std::string& out, const std::string& s) {
  if (s.size() + 1 > 0xffff) throw Error("ctranslate2: name too long: " + s.substr(0, 80));
  put<uint16_t>(out, static_cast<uint16_t>(s.size() + 1));
  out += s;
  out.push_back('\0');
}

bool is_little_endian() {
  const uint16_t one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

// The module's parameters and buffers by their dotted names.
std::map<std::string, torch::Tensor> named_tensors(const LoadedModel& m) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& p : m.model->named_parameters()) out[p.key()] = p.value().detach().cpu();
  for (const auto& b : m.model->named_buffers()) out[b.key()] = b.value().detach().cpu();
  return out;
}

torch::Tensor scalar_i8(int v) { return torch::full({}, v, torch::dtype(torch::kChar)); }
torch::Tensor scalar_i16(int v) { return torch::full({}, v, torch::dtype(torch::kShort)); }

// Builds the variable list: weights under CTranslate2's names, then the spec's scalars.
class SpecBuilder {
 public:
  explicit SpecBuilder(const LoadedModel& m) : tensors_(named_tensors(m)) {}

  void copy(const std::string& name, const std::string& from) {
    const auto it = tensors_.find(from);
    if (it == tensors_.end()) throw Error("ctranslate2: the checkpoint has no tensor " + from);
    add(name, it->second);
  }
  void add(const std::string& name, const torch::Tensor& value) {
    model_.variables.push_back({name, value.contiguous()});
  }
  void alias(const std::string& name, const std::string& target) {
    model_.aliases.emplace_back(name, target);
  }
  // A LayerNorm (gamma, beta) and a linear layer (weight, bias when it has one).
  void norm(const std::string& name, const std::string& from) {
    copy(name + "/gamma", from + ".weight");
    copy(name + "/beta", from + ".bias");
  }
  void linear(const std::string& name, const std::string& from) {
    copy(name + "/weight", from + ".weight");
    if (tensors_.count(from + ".bias") != 0) copy(name + "/bias", from + ".bias");
  }
  Ct2Model take() { return std::move(model_); }

 private:
  std::map<std::string, torch::Tensor> tensors_;
  Ct2Model model_;
};

void add_layers(SpecBuilder& b, const ModelConfig& c) {
  for (int64_t i = 0; i < c.encoder_layers; ++i) {
    const std::string to = "encoder/layer_" + std::to_string(i) + "/";
    const std::string from = "encoder." + std::to_string(i) + ".";
    b.norm(to + "self_attention/layer_norm", from + "self_attn_norm");
    b.linear(to + "self_attention/linear_0", from + "self_attn.qkv");  // q | k | v rows
    b.linear(to + "self_attention/linear_1", from + "self_attn.out");
    b.norm(to + "ffn/layer_norm", from + "ffn_norm");
    b.linear(to + "ffn/linear_0", from + "ffn.fc1");
    b.linear(to + "ffn/linear_1", from + "ffn.fc2");
  }
  for (int64_t i = 0; i < c.decoder_layers; ++i) {
    const std::string to = "decoder/layer_" + std::to_string(i) + "/";
    const std::string from = "decoder." + std::to_string(i) + ".";
    b.norm(to + "self_attention/layer_norm", from + "self_attn_norm");
    b.linear(to + "self_attention/linear_0", from + "self_attn.qkv");
    b.linear(to + "self_attention/linear_1", from + "self_attn.out");
    b.norm(to + "attention/layer_norm", from + "cross_attn_norm");
    b.linear(to + "attention/linear_0", from + "cross_attn.q");
    b.linear(to + "attention/linear_1", from + "cross_attn.kv");  // k | v rows
    b.linear(to + "attention/linear_2", from + "cross_attn.out");
    b.norm(to + "ffn/layer_norm", from + "ffn_norm");
    b.linear(to + "ffn/linear_0", from + "ffn.fc1");
    b.linear(to + "ffn/linear_1", from + "ffn.fc2");
  }
}

// Embeddings (scaled by sqrt(d_model), as nmt does), positions as explicit tables (the engine's
// own sinusoids are laid out differently), the tied matrices as aliases.
void add_embeddings(SpecBuilder& b, const ModelConfig& c) {
  const std::string src_emb = "encoder/embeddings_0/weight", tgt_emb = "decoder/embeddings/weight";
  b.copy(tgt_emb, c.tie_embeddings == TieEmbeddings::kAll ? "src_embed.weight" : "tgt_embed.weight");
  if (c.tie_embeddings == TieEmbeddings::kAll)
    b.alias(src_emb, tgt_emb);
  else
    b.copy(src_emb, "src_embed.weight");
  if (c.tie_embeddings == TieEmbeddings::kNone)
    b.copy("decoder/projection/weight", "out_proj.weight");
  else
    b.alias("decoder/projection/weight", tgt_emb);
  const std::string src_pos = "encoder/position_encodings/encodings";
  const std::string tgt_pos = "decoder/position_encodings/encodings";
  if (c.positional == Positional::kLearned) {
    b.copy(src_pos, "src_pos.weight");
    b.copy(tgt_pos, "tgt_pos.weight");
  } else {
    b.add(tgt_pos, sinusoidal_table(c.max_positions, c.d_model));
    b.alias(src_pos, tgt_pos);
  }
  if (c.norm == Norm::kPre) {
    b.norm("encoder/layer_norm", "encoder_norm");
    b.norm("decoder/layer_norm", "decoder_norm");
  }
}

// The scalars OpenNMT-py's converter writes. pre_norm must be written: absent means pre-norm.
void add_scalars(SpecBuilder& b, const ModelConfig& c) {
  const int pre = c.norm == Norm::kPre ? 1 : 0;
  for (const std::string side : {"encoder", "decoder"}) {
    b.add(side + "/activation", scalar_i8(0));  // ReLU
    b.add(side + "/num_heads", scalar_i16(static_cast<int>(c.heads)));
    b.add(side + "/pre_norm", scalar_i8(pre));
    b.add(side + "/scale_embeddings", scalar_i8(1));
  }
  b.add("encoder/embeddings_merge", scalar_i8(0));
  b.add("encoder/multi_query_attention", scalar_i8(0));
  b.add("decoder/alignment_layer", scalar_i16(-1));
  b.add("decoder/alignment_heads", scalar_i16(1));
  for (const char* flag : {"alibi", "alibi_use_positive_positions", "scale_alibi",
                           "start_from_zero_embedding"})
    b.add(std::string("decoder/") + flag, scalar_i8(0));
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Linear and embedding weights: what the engine's converter quantizes.
bool quantizable(const std::string& name) {
  return ends_with(name, "/weight") && name.find("layer_norm") == std::string::npos;
}

std::vector<Ct2Variable> quantize(const Ct2Variable& v, Ct2Quantization q) {
  const torch::Tensor w = v.value.to(torch::kFloat);
  if (q == Ct2Quantization::kInt8) {
    auto amax = w.abs().amax(1);
    amax = torch::where(amax == 0, torch::full_like(amax, 127.0f), amax);
    const auto scale = torch::full_like(amax, 127.0f) / amax;
    // torch::round is round-half-to-even, as numpy's rint in the converter.
    const auto qw = torch::round(w * scale.unsqueeze(1)).to(torch::kChar);
    return {{v.name, qw.contiguous()}, {v.name + "_scale", scale.contiguous()}};
  }
  // int16: one scale for the tensor.
  const float amax = w.abs().max().item<float>();
  const float scale = amax == 0 ? 1.0f : 1024.0f / amax;
  const auto qw = torch::round(w * scale).clamp(-32768, 32767).to(torch::kShort);
  return {{v.name, qw.contiguous()}, {v.name + "_scale", torch::full({}, scale, torch::dtype(torch::kFloat))}};
}

void apply_quantization(Ct2Model& model, Ct2Quantization q) {
  if (q == Ct2Quantization::kFloat32) return;
  std::vector<Ct2Variable> out;
  for (auto& v : model.variables) {
    const bool is_float = v.value.is_floating_point();
    if (q == Ct2Quantization::kFloat16) {
      if (is_float && v.value.dim() > 0) v.value = v.value.to(torch::kHalf).contiguous();
      out.push_back(std::move(v));
    } else if (is_float && v.value.dim() == 2 && quantizable(v.name)) {
      for (auto& part : quantize(v, q)) out.push_back(std::move(part));
    } else {
      out.push_back(std::move(v));
    }
  }
  model.variables = std::move(out);
}

std::string vocabulary_json(const SentencePiece& spm) {
  nlohmann::json pieces = nlohmann::json::array();
  for (int i = 0; i < spm.size(); ++i) pieces.push_back(spm.piece(i));
  return pieces.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void write_directory(const std::string& dir, const LoadedModel& loaded, const Ct2Model& model) {
  OutFile bin(dir + "/model.bin", OutFile::Mode::kTruncate);
  write_ct2_model(model, [&](const char* data, size_t size) { bin.write({data, size}); });
  bin.sync();
  bin.close();
  write_file_synced(dir + "/config.json", ct2_config(loaded).dump(2) + "\n");
  const Vocabs& v = loaded.vocabs;
  const std::string src = vocabulary_json(v.src), tgt = vocabulary_json(v.tgt);
  if (src == tgt) {
    write_file_synced(dir + "/shared_vocabulary.json", src);
  } else {
    write_file_synced(dir + "/source_vocabulary.json", src);
    write_file_synced(dir + "/target_vocabulary.json", tgt);
  }
  write_vocabs(dir, v);  // the SentencePiece models a server tokenizes with
  fsync_dir(dir);
}

}  // namespace

Ct2Type ct2_type(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat: return Ct2Type::kFloat32;
    case torch::kChar: return Ct2Type::kInt8;
    case torch::kShort: return Ct2Type::kInt16;
    case torch::kInt: return Ct2Type::kInt32;
    case torch::kHalf: return Ct2Type::kFloat16;
    case torch::kBFloat16: return Ct2Type::kBFloat16;
    default: throw Error(std::string("ctranslate2: no model.bin type for ") +
                         c10::toString(t.scalar_type()));
  }
}

void write_ct2_model(const Ct2Model& model,
                     const std::function<void(const char* data, size_t size)>& sink) {
  if (!is_little_endian()) throw Error("ctranslate2: export needs a little-endian machine");
  std::string head;
  put<uint32_t>(head, kBinaryVersion);
  put_string(head, model.spec);
  put<uint32_t>(head, model.revision);
  put<uint32_t>(head, static_cast<uint32_t>(model.variables.size()));
  sink(head.data(), head.size());
  for (const auto& v : model.variables) {
    const torch::Tensor t = v.value.cpu().contiguous();
    const auto bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    if (bytes > 0xffffffffULL) throw Error("ctranslate2: " + v.name + " is over 4 GiB");
    std::string meta;
    put_string(meta, v.name);
    put<uint8_t>(meta, static_cast<uint8_t>(t.dim()));
    for (const int64_t d : t.sizes()) put<uint32_t>(meta, static_cast<uint32_t>(d));
    put<uint8_t>(meta, static_cast<uint8_t>(ct2_type(t)));
    put<uint32_t>(meta, static_cast<uint32_t>(bytes));
    sink(meta.data(), meta.size());
    sink(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(bytes));
  }
  std::string tail;
  put<uint32_t>(tail, static_cast<uint32_t>(model.aliases.size()));
  for (const auto& [alias, target] : model.aliases) {
    put_string(tail, alias);
    put_string(tail, target);
  }
  sink(tail.data(), tail.size());
}

Ct2Model ct2_transformer(const LoadedModel& loaded, Ct2Quantization quantization) {
  const ModelConfig& c = loaded.config.model;
  if (c.arch != Arch::kTransformer)
    throw Error("ctranslate2: only Transformer models can be exported; CTranslate2 has no "
                "recurrent encoder-decoder (its TransformerSpec has attention layers only, and "
                "its converters refuse RNN models too)");
  torch::NoGradGuard no_grad;
  SpecBuilder b(loaded);
  add_embeddings(b, c);
  add_layers(b, c);
  add_scalars(b, c);
  Ct2Model model = b.take();
  std::stable_sort(model.variables.begin(), model.variables.end(),
                   [](const Ct2Variable& a, const Ct2Variable& z) { return a.name < z.name; });
  apply_quantization(model, quantization);
  return model;
}

nlohmann::json ct2_config(const LoadedModel& loaded) {
  const SentencePiece& tgt = loaded.vocabs.tgt;
  return {{"add_source_bos", false},
          {"add_source_eos", true},  // nmt's sources end in EOS
          {"bos_token", tgt.piece(kBosId)},
          {"decoder_start_token", tgt.piece(kBosId)},
          {"eos_token", tgt.piece(kEosId)},
          {"unk_token", tgt.piece(kUnkId)},
          {"layer_norm_epsilon", 1e-5},
          {"multi_query_attention", false}};
}

void export_ctranslate2(const std::string& checkpoint, const std::string& output,
                        Ct2Quantization quantization, bool replace) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(output, ec) && !fs::is_empty(output, ec) && !replace)
    throw Error(output + " exists and is not empty (--force replaces it)");
  const LoadedModel loaded = load_model(checkpoint);
  const Ct2Model model = ct2_transformer(loaded, quantization);
  const fs::path out = fs::path(output).lexically_normal();
  const std::string tmp = (out.has_filename() ? out : out.parent_path()).string() + ".tmp-" +
                          std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  create_directories(tmp);
  try {
    write_directory(tmp, loaded, model);
    replace_directory(tmp, output);
    fs::remove_all(tmp, ec);  // the old directory, where it was swapped out
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  const std::string parent = out.parent_path().string();
  fsync_dir(parent.empty() ? "." : parent);
}

}  // namespace nmt
