#include "cli/decode_flags.h"

#include <torch/torch.h>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "model/device.h"
#include "model/ensemble.h"
#include "model/quantize.h"
#include "util/blas.h"
#include "util/util.h"

namespace nmt {

void add_decode_flags(CLI::App* cmd, DecodeFlags& flags) {
  cmd->add_option("--beam", flags.beam, "Beam size; 1 = greedy (default: decode.beam_size)");
  cmd->add_option("--length-penalty", flags.length_penalty,
                  "GNMT length penalty alpha (default: decode.length_penalty)");
  cmd->add_option("--batch-tokens", flags.batch_tokens,
                  "Source-token budget per batch, beams included (default: decode.batch_tokens)");
  cmd->add_option("--threads", flags.threads, "CPU threads (0 = all cores)");
  cmd->add_option("--parallel", flags.parallel,
                  "How CPU threads share the work: batches (one batch per thread, side by side), "
                  "ops (one batch at a time, each op on all threads), or auto (batches when a "
                  "chunk has at least 4 batches per thread, else ops) (default: auto)");
  cmd->add_option(
      "--quantize", flags.quantize,
      "int8: dynamic int8 quantization of the output projection (CPU; faster, may cost BLEU)");
  cmd->add_option("--device", flags.device,
                  "auto (CUDA when available, else the CPU), cpu, cuda or cuda:N (default: auto)");
  cmd->add_option(
      "--precision", flags.precision,
      "fp32, or bf16 / fp16 (CUDA autocast; bf16 also on AVX512-BF16 CPUs: faster, may cost "
      "BLEU), or auto (bf16 on a CPU with AVX512-BF16, else fp32) (default: fp32)");
  cmd->add_option("--ensemble-weights", flags.ensemble_weights,
                  "With several --checkpoint: each model's weight in the mean of log-probabilities, "
                  "comma-separated (default: equal)")
      ->delimiter(',');
}

void check_decode_flags(DecodeFlags& flags) {
  if (flags.threads < 0) throw Error("--threads must be >= 0");
  if (flags.beam < 0) throw Error("--beam must be >= 1");
  if (flags.parallel == "auto")
    flags.parallel_mode = Parallel::kAuto;
  else if (flags.parallel == "batches")
    flags.parallel_mode = Parallel::kBatches;
  else if (flags.parallel == "ops")
    flags.parallel_mode = Parallel::kOps;
  else
    throw Error("--parallel must be auto, batches or ops, got \"" + flags.parallel + "\"");
  flags.precision_setting = parse_choice<PrecisionSetting>(flags.precision, "--precision");
  if (!flags.quantize.empty() && flags.quantize != "int8")
    throw Error("--quantize must be int8, got \"" + flags.quantize + "\"");
  flags.int8 = flags.quantize == "int8";
  if (!is_device_name(flags.device))
    throw Error("--device: unknown device \"" + flags.device + "\" (auto, cpu, cuda or cuda:N)");
  if (flags.int8 && flags.device.rfind("cuda", 0) == 0)
    throw Error("--quantize int8 runs on the CPU only: use --device cpu, or drop --quantize");
}

void use_inference_threads(const DecodeFlags& flags) {
  torch::set_num_threads(flags.threads > 0 ? flags.threads : hardware_threads());
  keep_freed_memory();
}

namespace {

// Ensemble members must decode into one vocabulary: their SentencePiece models are compared.
void check_same_vocabularies(const LoadedModel& first, const LoadedModel& other) {
  if (first.vocabs.src.bytes() != other.vocabs.src.bytes() ||
      first.vocabs.tgt.bytes() != other.vocabs.tgt.bytes())
    throw Error("an ensemble's models must share the vocabularies: " + other.dir +
                " has other SentencePiece models than " + first.dir);
}

}  // namespace

LoadedModel load_for_decoding(const std::vector<std::string>& checkpoints,
                              const DecodeFlags& flags) {
  if (checkpoints.empty()) throw Error("give a --checkpoint");
  if (!flags.ensemble_weights.empty() && flags.ensemble_weights.size() != checkpoints.size())
    throw Error("--ensemble-weights has " + std::to_string(flags.ensemble_weights.size()) +
                " weights for " + std::to_string(checkpoints.size()) + " checkpoints");
  const bool int8 = flags.int8;
  const torch::Device device = int8 && flags.device == "auto"
                                   ? torch::Device(torch::kCPU)
                                   : resolve_device(flags.device, "--device");
  // Refuses fp16 off CUDA, and bf16 on a CPU without native bfloat16 products, early.
  const Precision precision = resolve_precision(flags.precision_setting, device, "--precision");
  std::vector<LoadedModel> loaded;
  for (const auto& c : checkpoints) {
    loaded.push_back(load_model(c, device));
    if (loaded.size() > 1) check_same_vocabularies(loaded.front(), loaded.back());
    if (int8) loaded.back().model->quantize_int8();
  }
  log_device_and_precision("", device, flags.precision_setting, precision);
  if (int8)
    spdlog::info("output projection quantized to int8 (dynamic, {}-bit activations)",
                 int8_reduced_range() ? "7" : "8");
  LoadedModel m = loaded.front();
  // One checkpoint decodes through its own model, as before ensembles existed.
  if (loaded.size() == 1 && flags.ensemble_weights.empty()) return m;
  std::vector<Seq2Seq> members;
  for (const auto& l : loaded) members.push_back(l.model);
  std::shared_ptr<Seq2SeqImpl> ensemble =
      std::make_shared<EnsembleImpl>(std::move(members), flags.ensemble_weights);
  m.model = Seq2Seq(ensemble);
  m.model->eval();
  spdlog::info("ensemble of {} models", loaded.size());
  return m;
}

TranslateOptions decode_options(const DecodeFlags& flags, const Config& config,
                                const torch::Device& device) {
  TranslateOptions options = translate_options(config, flags.beam);
  if (flags.batch_tokens > 0) options.batch_tokens = flags.batch_tokens;
  if (flags.length_penalty >= 0) options.search.length_penalty = flags.length_penalty;
  options.precision = resolve_precision(flags.precision_setting, device, "--precision");
  if (device.is_cpu() && flags.parallel_mode != Parallel::kOps) {
    options.batch_workers = torch::get_num_threads();
    // Measured on Multi30k at 2 threads: beam 5 (17 batches of 1,000 lines) gains from side by
    // side, greedy (4 batches) loses a little.
    options.min_batches_per_worker = flags.parallel_mode == Parallel::kAuto ? 4 : 1;
  }
  return options;
}

}  // namespace nmt
