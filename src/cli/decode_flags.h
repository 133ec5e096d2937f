// Decoding flags shared by `translate` and `eval`: declared here, and turned once, with the
// checkpoint's decode section, into the decode layer's DecodeOptions (decode/translate.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "config/config.h"
#include "decode/sampling.h"
#include "decode/scorer.h"
#include "decode/translate.h"

namespace CLI {
class App;
}

namespace nmt {

// The flags as given: CLI11 writes them here, decode_options reads them.
struct DecodeFlags {
  int64_t beam = 0;                // 0: decode.beam_size
  double length_penalty = -1;      // < 0: decode.length_penalty
  int64_t batch_tokens = 0;        // 0: decode.batch_tokens
  int threads = 0;                 // 0: all cores
  std::string quantize;            // "" (float) or "int8": int8 output projection
  std::string device = "auto";     // auto | cpu | cuda | cuda:N
  std::string precision = "auto";  // fp32 | bf16 | fp16 (CUDA autocast) | auto
  std::string parallel = "auto";   // CPU threads' work: batches | ops | auto (see --parallel)
  std::vector<double> ensemble_weights;  // one per --checkpoint; empty: equal
  std::string tag;                       // a source piece to start every line with ("" = none)
  std::string constraints;               // --constraints FILE: phrases each output must contain
  std::string avoid;                     // --avoid FILE: phrases no output may contain
  int64_t nbest = 0;                     // --nbest (translate): 0 = 1
  SamplingOptions sampling;              // --sampling and its settings (translate)
};

// Adds what running the models takes: --batch-tokens, --threads, --device, --precision,
// --ensemble-weights and --tag (what nmt score takes).
void add_model_flags(CLI::App* cmd, DecodeFlags& flags);

// Adds the model flags and the search's: --beam, --length-penalty, --parallel and --quantize.
void add_search_flags(CLI::App* cmd, DecodeFlags& flags);

// Adds the search flags and the term files: --constraints and --avoid.
void add_decode_flags(CLI::App* cmd, DecodeFlags& flags);

// Adds what only translate searches with: --nbest, --sampling, --temperature, --top-k, --top-p
// and --seed.
void add_sampling_flags(CLI::App* cmd, DecodeFlags& flags);

// The options the flags ask for. Checks the flags and resolves the device and the precision on
// it first, throwing Error naming the flag (out-of-range values, unknown choices, int8 on CUDA,
// fp16 off CUDA, bf16 on a CPU without bfloat16 products); only then calls decode_config for
// the checkpoint's decode section, whose values the flags override. The search's strategy
// (SearchMode) is resolved here, once (resolve_search_mode), with its checks.
DecodeOptions decode_options(const DecodeFlags& flags,
                             const std::function<DecodeConfig()>& decode_config);

// A decoding command's checkpoints and options.
struct DecodeRequest {
  std::vector<std::string> checkpoints;  // checkpoint directories (a run directory's resolved)
  DecodeOptions options;
};

// decode_options for --checkpoint paths (checkpoint or run directories): after the flags are
// checked, each path is resolved once (a run directory's choice is logged) and the first one's
// decode section read.
DecodeRequest decode_request(const DecodeFlags& flags, const std::vector<std::string>& paths);

// Sets LibTorch's CPU threads for inference and keeps freed buffers in the heap.
void use_inference_threads(const DecodeOptions& options);

// The models a decoding command loaded and the scorer that search runs over: one model, or an
// ensemble of them (decode/scorer.h). models.front() gives the config, vocabularies and dir.
struct DecodingModels {
  std::vector<LoadedModel> models;
  std::unique_ptr<Scorer> scorer;
  // What to translate with: the options' translate part, with --tag's piece id resolved in
  // the models' source vocabulary.
  TranslateOptions translate;
  const LoadedModel& first() const { return models.front(); }
};

// The checkpoints' models on the options' device, quantized when asked, and their scorer. Logs
// the device and precision. Several checkpoints (or weights) make an ensemble; models with other
// vocabularies are refused, and so is a --tag that is not a piece of their source vocabulary.
DecodingModels load_for_decoding(const std::vector<std::string>& checkpoints,
                                 const DecodeOptions& options);

// The sentence splitter's language for --format text|html: --source-lang when given, else the
// extension of the first training corpus's source file when it is a language code ("train.en"),
// else English.
std::string splitter_language(const std::string& source_lang, const Config& config);

}  // namespace nmt
