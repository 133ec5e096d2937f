// Export to CTranslate2 (github.com/OpenNMT/CTranslate2), the inference engine that OpenNMT-py,
// fairseq and Marian users serve with. Writes its model directory directly: model.bin in its
// binary format (version 6, spec TransformerSpec revision 7), config.json and the vocabularies,
// as its own Python converters would for an equivalent OpenNMT-py Transformer.
//
// model.bin: u32 version, str spec name, u32 revision, u32 count, then per variable: str name,
// u8 rank, u32 dims[rank], u8 dtype (0 f32, 1 i8, 2 i16, 3 i32, 4 f16, 5 bf16), u32 bytes, the
// row-major data; then u32 count and (str alias, str target) pairs. str: u16 length with the
// NUL, the bytes, a NUL. Little-endian (the host's: CTranslate2 reads raw bytes).
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/checkpoint.h"

namespace nmt {

// How weights are stored (Ct2Quantization, config/config.h): as trained (float32), or quantized
// the way CTranslate2's converter does (int8: one scale per row, 127 / max |row|; int16: one
// scale, 1024 / max |W|; float16: all float tensors).

// model.bin's data types, by their ids in the file.
enum class Ct2Type : uint8_t {
  kFloat32 = 0,
  kInt8 = 1,
  kInt16 = 2,
  kInt32 = 3,
  kFloat16 = 4,
  kBFloat16 = 5
};

struct Ct2Variable {
  std::string name;
  torch::Tensor value;  // on the CPU, contiguous; a 0-dimensional tensor for a scalar
};

struct Ct2Model {
  std::string spec = "TransformerSpec";
  uint32_t revision = 7;
  std::vector<Ct2Variable> variables;                        // written in this order
  std::vector<std::pair<std::string, std::string>> aliases;  // alias -> variable
};

// The file type of a tensor's dtype; throws Error for a type model.bin cannot hold.
Ct2Type ct2_type(const torch::Tensor& t);

// The bytes of model.bin, handed to `sink` piece by piece (a variable's data in one piece).
void write_ct2_model(const Ct2Model& model,
                     const std::function<void(const char* data, size_t size)>& sink);

// The variables of a trained Transformer under CTranslate2's names, quantized as asked. Throws
// Error for a model CTranslate2 cannot represent (the RNN family).
Ct2Model ct2_transformer(const LoadedModel& loaded, Ct2Quantization quantization);

// config.json: the special tokens (by their pieces in nmt's vocabulary), the source's EOS,
// the LayerNorm epsilon.
nlohmann::json ct2_config(const LoadedModel& loaded);

// Writes the model directory `output` (model.bin, config.json, shared_vocabulary.json or
// source_ and target_vocabulary.json, and nmt's SentencePiece model(s) for tokenizing) through a temporary directory renamed into place. An
// existing non-empty `output` is refused unless `replace`.
void export_ctranslate2(const std::string& checkpoint, const std::string& output,
                        Ct2Quantization quantization, bool replace);

}  // namespace nmt
