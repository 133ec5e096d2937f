#include "cli/decode_flags.h"

#include <torch/torch.h>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "util/util.h"

namespace nmt {

void add_decode_flags(CLI::App* cmd, DecodeFlags& flags) {
  cmd->add_option("--beam", flags.beam, "Beam size; 1 = greedy (default: decode.beam_size)");
  cmd->add_option("--length-penalty", flags.length_penalty,
                  "GNMT length penalty alpha (default: decode.length_penalty)");
  cmd->add_option("--batch-tokens", flags.batch_tokens,
                  "Source-token budget per batch, beams included (default: decode.batch_tokens)");
  cmd->add_option("--threads", flags.threads, "CPU threads (0 = all cores)");
  cmd->add_option(
      "--quantize", flags.quantize,
      "int8: dynamic int8 quantization of the output projection (faster, may cost BLEU)");
}

void check_decode_flags(const DecodeFlags& flags) {
  if (flags.threads < 0) throw Error("--threads must be >= 0");
  if (flags.beam < 0) throw Error("--beam must be >= 1");
  if (!flags.quantize.empty() && flags.quantize != "int8")
    throw Error("--quantize must be int8, got \"" + flags.quantize + "\"");
}

void use_inference_threads(const DecodeFlags& flags) {
  torch::set_num_threads(flags.threads > 0 ? flags.threads : hardware_threads());
  keep_freed_memory();
}

LoadedModel load_for_decoding(const std::string& checkpoint, const DecodeFlags& flags) {
  LoadedModel m = load_model(checkpoint);
  if (flags.quantize == "int8") {
    m.model->quantize_int8();
    spdlog::info("output projection quantized to int8 (dynamic)");
  }
  return m;
}

TranslateOptions decode_options(const DecodeFlags& flags, const Config& config) {
  TranslateOptions options = translate_options(config, flags.beam);
  if (flags.batch_tokens > 0) options.batch_tokens = flags.batch_tokens;
  if (flags.length_penalty >= 0) options.search.length_penalty = flags.length_penalty;
  return options;
}

}  // namespace nmt
