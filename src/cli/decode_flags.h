// Decoding flags shared by `translate` and `eval`: declared, checked and applied in one place.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "config/config.h"
#include "decode/translate.h"

namespace CLI {
class App;
}

namespace nmt {

// How --threads CPU threads share a chunk (--parallel).
enum class Parallel { kAuto, kBatches, kOps };

struct DecodeFlags {
  int64_t beam = 0;                // 0: decode.beam_size
  double length_penalty = -1;      // < 0: decode.length_penalty
  int64_t batch_tokens = 0;        // 0: decode.batch_tokens
  int threads = 0;                 // 0: all cores
  std::string quantize;            // "" (float) or "int8": int8 output projection
  std::string device = "auto";     // auto | cpu | cuda | cuda:N
  std::string precision = "fp32";  // fp32 | bf16 | fp16 (CUDA autocast) | auto
  std::string parallel = "auto";   // CPU threads' work: batches | ops | auto (see --parallel)
  std::vector<double> ensemble_weights;  // one per --checkpoint; empty: equal
  // Set by check_decode_flags from the texts above: each choice parsed once.
  PrecisionSetting precision_setting = PrecisionSetting::kFp32;
  Parallel parallel_mode = Parallel::kAuto;
  bool int8 = false;  // --quantize int8
};

// Adds --beam, --length-penalty, --batch-tokens, --threads, --parallel, --quantize, --device,
// --precision and --ensemble-weights.
void add_decode_flags(CLI::App* cmd, DecodeFlags& flags);

// Throws on out-of-range values and combinations that cannot work (int8 on CUDA); parses the
// choices into precision_setting and parallel_mode.
void check_decode_flags(DecodeFlags& flags);

// Sets LibTorch's CPU threads for inference and keeps freed buffers in the heap.
void use_inference_threads(const DecodeFlags& flags);

// The checkpoint's model on the flags' device (int8 runs on the CPU: with `auto` it picks the
// CPU), quantized when the flags ask for it. Logs the device. Several checkpoints (or weights)
// make an ensemble (model/ensemble.h) whose config, vocabularies and dir are the first's;
// models with other vocabularies are refused.
LoadedModel load_for_decoding(const std::vector<std::string>& checkpoints,
                              const DecodeFlags& flags);

// The checkpoint config's decode options with the given flags applied, for a model on `device`.
TranslateOptions decode_options(const DecodeFlags& flags, const Config& config,
                                const torch::Device& device);

}  // namespace nmt
