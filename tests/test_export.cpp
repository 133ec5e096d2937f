// nmt export --format ctranslate2: model.bin byte for byte, each variable's name, shape and dtype,
// quantization, and a CTranslate2-style forward pass computed from the exported variables alone
// that reproduces nmt's logits. model.bin is read back by a reader written from CTranslate2's
// format description (src/export/ctranslate2.h), not by the writer's code.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "export/ctranslate2.h"
#include "helpers.h"
#include "model/transformer.h"
#include "model_helpers.h"
#include "quickstart_run.h"
#include "util/util.h"

using namespace nmt;
using nmt_test::QuickstartRun;

namespace {

struct ReadVariable {
  std::vector<int64_t> shape;
  int dtype = -1;
  std::string bytes;
};

struct ReadModel {
  uint32_t version = 0, revision = 0;
  std::string spec;
  std::vector<std::string> order;
  std::map<std::string, ReadVariable> variables;
  std::map<std::string, std::string> aliases;
};

class Reader {
 public:
  explicit Reader(std::string data) : data_(std::move(data)) {}
  template <class T>
  T get() {
    EXPECT_LE(pos_ + sizeof(T), data_.size());
    T v = 0;
    for (size_t i = 0; i < sizeof(T); ++i)
      v |= static_cast<T>(static_cast<uint64_t>(static_cast<unsigned char>(data_[pos_ + i]))
                          << (8 * i));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    const auto n = get<uint16_t>();
    EXPECT_GE(n, 1);
    std::string s = data_.substr(pos_, n - 1);
    EXPECT_EQ(data_[pos_ + n - 1], '\0');
    pos_ += n;
    return s;
  }
  std::string bytes(size_t n) {
    std::string s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  bool done() const { return pos_ == data_.size(); }

 private:
  std::string data_;
  size_t pos_ = 0;
};

size_t type_size(int dtype) {
  static const size_t sizes[] = {4, 1, 2, 4, 2, 2};
  return sizes[dtype];
}

ReadModel read_model(const std::string& data) {
  Reader r(data);
  ReadModel m;
  m.version = r.get<uint32_t>();
  m.spec = r.str();
  m.revision = r.get<uint32_t>();
  const auto count = r.get<uint32_t>();
  for (uint32_t i = 0; i < count; ++i) {
    const std::string name = r.str();
    ReadVariable v;
    const auto rank = r.get<uint8_t>();
    size_t elements = 1;
    for (int d = 0; d < rank; ++d) {
      v.shape.push_back(r.get<uint32_t>());
      elements *= static_cast<size_t>(v.shape.back());
    }
    v.dtype = r.get<uint8_t>();
    EXPECT_LE(v.dtype, 5) << name;
    const auto n = r.get<uint32_t>();
    EXPECT_EQ(n, elements * type_size(v.dtype)) << name;  // the engine's "invalid payload size"
    v.bytes = r.bytes(n);
    m.order.push_back(name);
    m.variables[name] = std::move(v);
  }
  const auto aliases = r.get<uint32_t>();
  for (uint32_t i = 0; i < aliases; ++i) {
    const std::string alias = r.str();
    m.aliases[alias] = r.str();
  }
  EXPECT_TRUE(r.done()) << "bytes after the aliases";
  return m;
}

std::string bytes_of(const Ct2Model& model) {
  std::string out;
  write_ct2_model(model, [&](const char* d, size_t n) { out.append(d, n); });
  return out;
}

// A variable as a float tensor (aliases followed), dequantized where it was quantized.
torch::Tensor tensor_of(const ReadModel& m, std::string name) {
  if (m.variables.count(name) == 0 && m.aliases.count(name) != 0) name = m.aliases.at(name);
  const ReadVariable& v = m.variables.at(name);
  const torch::ScalarType types[] = {torch::kFloat, torch::kChar,  torch::kShort,
                                     torch::kInt,   torch::kHalf,  torch::kBFloat16};
  auto t = torch::empty(v.shape, types[v.dtype]);
  std::memcpy(t.data_ptr(), v.bytes.data(), v.bytes.size());
  t = t.to(torch::kFloat);
  if (m.variables.count(name + "_scale") != 0) {
    const auto scale = tensor_of(m, name + "_scale");
    t = scale.dim() == 0 ? t / scale : t / scale.unsqueeze(1);
  }
  return t;
}

LoadedModel loaded_model(const ModelConfig& c, int64_t vocab, uint64_t seed) {
  LoadedModel m;
  m.config.model = c;
  m.model = nmt_test::random_model(c, vocab, seed);
  return m;
}

ModelConfig tiny(Norm norm, Positional positional, TieEmbeddings tie) {
  ModelConfig c;
  c.d_model = 16;
  c.heads = 4;
  c.encoder_layers = 2;
  c.decoder_layers = 3;
  c.d_ff = 24;
  c.max_positions = 40;
  c.norm = norm;
  c.positional = positional;
  c.tie_embeddings = tie;
  return c;
}

// CTranslate2's Transformer (layers/transformer.cc, layers/attention.cc) written from its
// documented semantics, on the variables of model.bin: embeddings * sqrt(d) + position rows,
// post-norm LN(x + f(x)) or pre-norm x + f(LN(x)), fused QKV and KV split by head.
struct Ct2Forward {
  const ReadModel& m;
  int64_t heads;
  bool pre;

  torch::Tensor var(const std::string& n) const { return tensor_of(m, n); }
  torch::Tensor dense(const std::string& n, const torch::Tensor& x) const {
    const std::string b = n + "/bias";
    return torch::linear(x, var(n + "/weight"),
                         m.variables.count(b) ? var(b) : torch::Tensor());
  }
  torch::Tensor norm(const std::string& n, const torch::Tensor& x) const {
    return torch::layer_norm(x, {x.size(-1)}, var(n + "/gamma"), var(n + "/beta"), 1e-5);
  }
  torch::Tensor split(const torch::Tensor& x) const {  // [B, T, D] -> [B, H, T, D/H]
    return x.view({x.size(0), x.size(1), heads, -1}).transpose(1, 2);
  }
  torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& bias) const {
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    auto w = torch::softmax(torch::matmul(q, k.transpose(-1, -2)) * scale + bias, -1);
    auto ctx = torch::matmul(w, v).transpose(1, 2).contiguous();
    return ctx.view({ctx.size(0), ctx.size(1), -1});
  }
  template <class F>
  torch::Tensor sublayer(const std::string& ln, const torch::Tensor& x, F f) const {
    return pre ? x + f(norm(ln, x)) : norm(ln, x + f(x));
  }
  torch::Tensor self_attention(const std::string& s, const torch::Tensor& x,
                               const torch::Tensor& bias) const {
    return sublayer(s + "/layer_norm", x, [&](const torch::Tensor& y) {
      const auto qkv = dense(s + "/linear_0", y).chunk(3, -1);
      return dense(s + "/linear_1", attend(split(qkv[0]), split(qkv[1]), split(qkv[2]), bias));
    });
  }
  torch::Tensor ffn(const std::string& s, const torch::Tensor& x) const {
    return sublayer(s + "/layer_norm", x, [&](const torch::Tensor& y) {
      return dense(s + "/linear_1", torch::relu(dense(s + "/linear_0", y)));
    });
  }
  torch::Tensor embed(const std::string& side, const std::string& table,
                      const torch::Tensor& ids) const {
    const auto e = torch::embedding(var(table), ids) * std::sqrt(static_cast<double>(var(table).size(1)));
    return e + var(side + "/position_encodings/encodings").narrow(0, 0, ids.size(1));
  }
  torch::Tensor logits(const torch::Tensor& src, const torch::Tensor& tgt) const {
    const auto src_bias = torch::where(src.eq(kPadId), -1e9, 0.0).to(torch::kFloat).view(
        {src.size(0), 1, 1, src.size(1)});
    auto x = embed("encoder", "encoder/embeddings_0/weight", src);
    for (int i = 0; m.variables.count("encoder/layer_" + std::to_string(i) + "/ffn/linear_0/weight");
         ++i) {
      const std::string l = "encoder/layer_" + std::to_string(i);
      x = ffn(l + "/ffn", self_attention(l + "/self_attention", x, src_bias));
    }
    if (pre) x = norm("encoder/layer_norm", x);
    const int64_t T = tgt.size(1);
    const auto causal = torch::triu(torch::full({T, T}, -1e9), 1);
    auto y = embed("decoder", "decoder/embeddings/weight", tgt);
    for (int i = 0; m.variables.count("decoder/layer_" + std::to_string(i) + "/ffn/linear_0/weight");
         ++i) {
      const std::string l = "decoder/layer_" + std::to_string(i);
      y = self_attention(l + "/self_attention", y, causal);
      y = sublayer(l + "/attention/layer_norm", y, [&](const torch::Tensor& q) {
        const auto kv = dense(l + "/attention/linear_1", x).chunk(2, -1);
        return dense(l + "/attention/linear_2",
                     attend(split(dense(l + "/attention/linear_0", q)), split(kv[0]),
                            split(kv[1]), src_bias));
      });
      y = ffn(l + "/ffn", y);
    }
    if (pre) y = norm("decoder/layer_norm", y);
    return dense("decoder/projection", y);
  }
};

void expect_same_logits(const ModelConfig& c, Ct2Quantization q, double tolerance) {
  torch::NoGradGuard no_grad;
  LoadedModel loaded = loaded_model(c, 30, 7);
  const ReadModel m = read_model(bytes_of(ct2_transformer(loaded, q)));
  const auto src = nmt_test::random_source(3, 30, 11);
  const auto tgt = nmt_test::random_source(3, 30, 12);
  const auto want = loaded.model->forward(src, tgt);
  const Ct2Forward f{m, c.heads, c.norm == Norm::kPre};
  const auto got = f.logits(src, tgt);
  // Padded target positions differ only where nmt and the reference both ignore them.
  const auto real = tgt.ne(kPadId).unsqueeze(-1).expand_as(want);
  const double diff = (got - want).abs().masked_select(real).max().item<double>();
  EXPECT_LT(diff, tolerance) << "max |logit difference| " << diff;
}

}  // namespace

TEST(Ctranslate2Export, ModelBinBytesFollowTheFormat) {
  Ct2Model model;
  model.variables.push_back({"a/weight", torch::tensor({1.0f, -2.0f, 0.5f, 4.0f}).view({2, 2})});
  model.variables.push_back({"a/heads", torch::full({}, 3, torch::dtype(torch::kShort))});
  model.aliases.emplace_back("b/weight", "a/weight");
  const std::string got = bytes_of(model);
  // Hand-assembled: version 6, "TransformerSpec" (u16 16 with its NUL), revision 7, 2 variables.
  std::string want("\x06\x00\x00\x00\x10\x00", 6);
  want += std::string("TransformerSpec\0", 16);
  want += std::string("\x07\x00\x00\x00\x02\x00\x00\x00", 8);
  want += std::string("\x09\x00" "a/weight\0" "\x02" "\x02\x00\x00\x00\x02\x00\x00\x00" "\x00"
                      "\x10\x00\x00\x00", 25);
  const float w[] = {1.0f, -2.0f, 0.5f, 4.0f};
  want += std::string(reinterpret_cast<const char*>(w), 16);
  want += std::string("\x08\x00" "a/heads\0" "\x00" "\x02" "\x02\x00\x00\x00" "\x03\x00", 18);
  want += std::string("\x01\x00\x00\x00" "\x09\x00" "b/weight\0" "\x09\x00" "a/weight\0", 26);
  EXPECT_EQ(got, want);
  EXPECT_EQ(ct2_type(torch::zeros({1}, torch::kBFloat16)), Ct2Type::kBFloat16);
  EXPECT_THROW(ct2_type(torch::zeros({1}, torch::kDouble)), Error);
}

TEST(Ctranslate2Export, VariablesHaveTheSpecsNamesShapesAndTypes) {
  const ModelConfig c = tiny(Norm::kPost, Positional::kSinusoidal, TieEmbeddings::kAll);
  const LoadedModel loaded = loaded_model(c, 30, 3);
  const ReadModel m = read_model(bytes_of(ct2_transformer(loaded, Ct2Quantization::kFloat32)));
  EXPECT_EQ(m.version, 6u);
  EXPECT_EQ(m.spec, "TransformerSpec");
  EXPECT_EQ(m.revision, 7u);
  // 26 + 12N + 20M names with every bias, less the projection's bias (nmt's output layer has
  // none), the three aliased tables and the two final norms a post-norm model lacks.
  EXPECT_EQ(m.variables.size(), 26u + 12 * 2 + 20 * 3 - 1 - 3 - 4);
  EXPECT_TRUE(std::is_sorted(m.order.begin(), m.order.end()));
  const std::map<std::string, std::string> aliases = {
      {"encoder/embeddings_0/weight", "decoder/embeddings/weight"},
      {"decoder/projection/weight", "decoder/embeddings/weight"},
      {"encoder/position_encodings/encodings", "decoder/position_encodings/encodings"}};
  EXPECT_EQ(m.aliases, aliases);
  auto shape = [&](const std::string& n) { return m.variables.at(n).shape; };
  using S = std::vector<int64_t>;
  EXPECT_EQ(shape("decoder/embeddings/weight"), S({30, 16}));
  EXPECT_EQ(shape("decoder/position_encodings/encodings"), S({40, 16}));
  EXPECT_EQ(shape("encoder/layer_1/self_attention/linear_0/weight"), S({48, 16}));
  EXPECT_EQ(shape("encoder/layer_1/self_attention/linear_0/bias"), S({48}));
  EXPECT_EQ(shape("decoder/layer_2/attention/linear_0/weight"), S({16, 16}));
  EXPECT_EQ(shape("decoder/layer_2/attention/linear_1/weight"), S({32, 16}));
  EXPECT_EQ(shape("decoder/layer_2/attention/linear_2/weight"), S({16, 16}));
  EXPECT_EQ(shape("decoder/layer_0/ffn/linear_0/weight"), S({24, 16}));
  EXPECT_EQ(shape("decoder/layer_0/ffn/layer_norm/gamma"), S({16}));
  EXPECT_EQ(m.variables.count("encoder/layer_norm/gamma"), 0u);  // post-norm: no final norm
  for (const auto& [name, v] : m.variables)
    EXPECT_EQ(v.dtype, v.shape.empty() ? (name.find("num_heads") != std::string::npos ||
                                                  name.find("alignment") != std::string::npos
                                              ? 2
                                              : 1)
                                       : 0)
        << name;
  EXPECT_EQ(tensor_of(m, "decoder/num_heads").item<float>(), 4.0f);
  EXPECT_EQ(tensor_of(m, "encoder/pre_norm").item<float>(), 0.0f);
  EXPECT_EQ(tensor_of(m, "decoder/alignment_layer").item<float>(), -1.0f);
  // The values are the checkpoint's tensors, bit for bit.
  const auto params = loaded.model->named_parameters();
  EXPECT_TRUE(torch::equal(tensor_of(m, "decoder/layer_1/self_attention/linear_0/weight"),
                           params["decoder.1.self_attn.qkv.weight"]));
  EXPECT_TRUE(torch::equal(tensor_of(m, "decoder/layer_1/attention/linear_1/bias"),
                           params["decoder.1.cross_attn.kv.bias"]));
  EXPECT_TRUE(torch::equal(tensor_of(m, "encoder/embeddings_0/weight"), params["src_embed.weight"]));
  EXPECT_TRUE(torch::equal(tensor_of(m, "encoder/position_encodings/encodings"),
                           sinusoidal_table(40, 16)));
}

TEST(Ctranslate2Export, UntiedLearnedPreNormModelKeepsItsOwnTables) {
  const ModelConfig c = tiny(Norm::kPre, Positional::kLearned, TieEmbeddings::kNone);
  const LoadedModel loaded = loaded_model(c, 30, 4);
  const ReadModel m = read_model(bytes_of(ct2_transformer(loaded, Ct2Quantization::kFloat32)));
  EXPECT_TRUE(m.aliases.empty());
  EXPECT_EQ(m.variables.size(), 26u + 12 * 2 + 20 * 3 - 1);  // no projection bias
  const auto params = loaded.model->named_parameters();
  EXPECT_TRUE(torch::equal(tensor_of(m, "decoder/projection/weight"), params["out_proj.weight"]));
  EXPECT_EQ(m.variables.count("decoder/projection/bias"), 0u);  // nmt's output layer has none
  EXPECT_TRUE(torch::equal(tensor_of(m, "decoder/position_encodings/encodings"),
                           params["tgt_pos.weight"]));
  EXPECT_TRUE(torch::equal(tensor_of(m, "encoder/layer_norm/beta"), params["encoder_norm.bias"]));
  EXPECT_EQ(tensor_of(m, "decoder/pre_norm").item<float>(), 1.0f);
}

// The exported variables, run the way CTranslate2 runs them, give nmt's logits.
TEST(Ctranslate2Export, EngineSemanticsReproduceTheLogits) {
  expect_same_logits(tiny(Norm::kPost, Positional::kSinusoidal, TieEmbeddings::kAll),
                     Ct2Quantization::kFloat32, 1e-4);
  expect_same_logits(tiny(Norm::kPre, Positional::kLearned, TieEmbeddings::kNone),
                     Ct2Quantization::kFloat32, 1e-4);
  expect_same_logits(tiny(Norm::kPost, Positional::kSinusoidal, TieEmbeddings::kDecoder),
                     Ct2Quantization::kFloat32, 1e-4);
  // Quantized weights stay close: int8 and int16 within their rounding.
  expect_same_logits(tiny(Norm::kPre, Positional::kSinusoidal, TieEmbeddings::kAll),
                     Ct2Quantization::kInt16, 0.05);
  expect_same_logits(tiny(Norm::kPre, Positional::kSinusoidal, TieEmbeddings::kAll),
                     Ct2Quantization::kInt8, 0.5);
}

TEST(Ctranslate2Export, QuantizationIsStoredAsTheConverterStoresIt) {
  const ModelConfig c = tiny(Norm::kPost, Positional::kSinusoidal, TieEmbeddings::kAll);
  const LoadedModel loaded = loaded_model(c, 30, 5);
  const auto w = loaded.model->named_parameters()["encoder.0.ffn.fc1.weight"];
  const std::string name = "encoder/layer_0/ffn/linear_0/weight";

  const ReadModel i8 = read_model(bytes_of(ct2_transformer(loaded, Ct2Quantization::kInt8)));
  EXPECT_EQ(i8.variables.at(name).dtype, 1);
  EXPECT_EQ(i8.variables.at(name + "_scale").dtype, 0);
  EXPECT_EQ(i8.variables.at(name + "_scale").shape, std::vector<int64_t>({24}));
  EXPECT_EQ(i8.variables.at("decoder/embeddings/weight").dtype, 1);  // embeddings too
  EXPECT_EQ(i8.variables.at("encoder/layer_0/ffn/linear_0/bias").dtype, 0);
  EXPECT_EQ(i8.variables.at("encoder/layer_0/ffn/layer_norm/gamma").dtype, 0);
  // scale = 127 / max |row|: each row's largest weight maps to +-127.
  const auto scale = tensor_of(i8, name + "_scale");
  EXPECT_TRUE(torch::allclose(scale, 127.0 / w.abs().amax(1), 1e-6, 0));
  const auto deq = tensor_of(i8, name);
  EXPECT_LE(((deq - w).abs() * scale.unsqueeze(1)).max().item<float>(), 0.5f + 1e-4f);

  const ReadModel i16 = read_model(bytes_of(ct2_transformer(loaded, Ct2Quantization::kInt16)));
  EXPECT_EQ(i16.variables.at(name).dtype, 2);
  EXPECT_TRUE(i16.variables.at(name + "_scale").shape.empty());
  EXPECT_NEAR(tensor_of(i16, name + "_scale").item<float>(), 1024.0f / w.abs().max().item<float>(),
              1e-3);

  const ReadModel f16 = read_model(bytes_of(ct2_transformer(loaded, Ct2Quantization::kFloat16)));
  for (const auto& [n, v] : f16.variables) EXPECT_EQ(v.dtype, v.shape.empty() ? v.dtype : 4) << n;
  EXPECT_EQ(f16.variables.at(name).dtype, 4);
  EXPECT_EQ(f16.variables.at("encoder/pre_norm").dtype, 1);  // scalars keep their type
  EXPECT_THROW(parse_choice<Ct2Quantization>("int4", "--quantization"), Error);
}

TEST(Ctranslate2Export, RnnIsRefusedWithTheReason) {
  ModelConfig c;
  c.arch = Arch::kRnn;
  c.d_model = 16;
  LoadedModel loaded;
  loaded.config.model = c;
  try {
    ct2_transformer(loaded, Ct2Quantization::kFloat32);
    FAIL() << "an RNN was exported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("only Transformer models"), std::string::npos) << e.what();
  }
}

// Through the binary on the trained quickstart model: the directory, its config and vocabulary.
TEST_F(QuickstartRun, ExportsACtranslate2Directory) {
  using nmt_test::run_command;
  const std::string out = path("ct2");
  const std::string cmd =
      nmt_test::nmt_bin() + " export --checkpoint " + run() + " --format ctranslate2 --output " + out;
  const auto r = run_command(cmd + " --quantization int8");
  ASSERT_EQ(r.status, 0) << r.output;
  const ReadModel m = read_model(nmt_test::read_text(out + "/model.bin"));
  EXPECT_EQ(m.variables.at("decoder/embeddings/weight").dtype, 1);
  const auto config = nlohmann::json::parse(nmt_test::read_text(out + "/config.json"));
  EXPECT_EQ(config["bos_token"], "<s>");
  EXPECT_EQ(config["eos_token"], "</s>");
  EXPECT_EQ(config["unk_token"], "<unk>");
  EXPECT_EQ(config["add_source_eos"], true);
  const auto vocab = nlohmann::json::parse(nmt_test::read_text(out + "/shared_vocabulary.json"));
  EXPECT_EQ(static_cast<int64_t>(vocab.size()), m.variables.at("decoder/embeddings/weight").shape[0]);
  EXPECT_EQ(vocab[3], "</s>");
  EXPECT_EQ(nmt_test::read_text(out + "/spm.model"), nmt_test::read_text(run() + "/spm.model"));
  // An existing directory is kept unless --force; the RNN's refusal and a bad format are errors.
  const auto again = run_command(cmd);
  EXPECT_EQ(again.status, 1) << again.output;
  EXPECT_NE(again.output.find("--force"), std::string::npos) << again.output;
  const auto forced = run_command(cmd + " --force");
  EXPECT_EQ(forced.status, 0) << forced.output;
  EXPECT_EQ(read_model(nmt_test::read_text(out + "/model.bin")).variables.at(
                "decoder/embeddings/weight").dtype, 0);
  EXPECT_EQ(run_command(nmt_test::nmt_bin() + " export --checkpoint " + run() +
                        " --format onnx --output " + path("x")).status, 1);
}
