#include "cli/decode_flags.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include <torch/torch.h>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "model/device.h"
#include "model/quantize.h"
#include "util/blas.h"
#include "config/config.h"
#include "util/util.h"

namespace nmt {

void add_model_flags(CLI::App* cmd, DecodeFlags& flags) {
  cmd->add_option("--batch-tokens", flags.batch_tokens,
                  "Source-token budget per batch, beams included (default: decode.batch_tokens)");
  cmd->add_option("--threads", flags.threads, "CPU threads (0 = all cores)");
  cmd->add_option("--device", flags.device,
                  "auto (CUDA when available, else the CPU), cpu, cuda or cuda:N (default: auto)");
  cmd->add_option(
      "--precision", flags.precision,
      "fp32, or bf16 / fp16 (CUDA autocast; bf16 also on AVX512-BF16 CPUs), or auto (bf16 on "
      "a CPU with AVX512-BF16, else fp32) (default: auto)");
  cmd->add_option("--ensemble-weights", flags.ensemble_weights,
                  "With several --checkpoint: each model's weight in the mean of log-probabilities, "
                  "comma-separated (default: equal)")
      ->delimiter(',');
  cmd->add_option("--tag", flags.tag,
                  "Start every source line with this piece, as a tagged corpus of the training "
                  "data (data.train[i].tag, e.g. \"<BT>\") started its sources (default: none)");
}

void add_search_flags(CLI::App* cmd, DecodeFlags& flags) {
  cmd->add_option("--beam", flags.beam, "Beam size; 1 = greedy (default: decode.beam_size)");
  cmd->add_option("--length-penalty", flags.length_penalty,
                  "GNMT length penalty alpha (default: decode.length_penalty)");
  add_model_flags(cmd, flags);
  cmd->add_option("--parallel", flags.parallel,
                  "How CPU threads share the work, one of " + choice_list<Parallel>() +
                      ": batches (one batch per thread, side by side), ops (one batch at a time, "
                      "each op on all threads), or auto (batches when a chunk has at least 4 "
                      "batches per thread, else ops) (default: auto)");
  cmd->add_option("--quantize", flags.quantize,
                  "One of " + choice_list<Quantize>() +
                      ": dynamic int8 quantization of the output projection (CPU; faster, may "
                      "cost BLEU)");
}

void add_decode_flags(CLI::App* cmd, DecodeFlags& flags) {
  add_search_flags(cmd, flags);
  cmd->add_option("--constraints", flags.constraints,
                  "Target phrases each translation must contain: one line per input line, "
                  "phrases separated by tabs, an empty line for none (beam search)");
  cmd->add_option("--avoid", flags.avoid,
                  "Target phrases no translation may contain: one line per input line, phrases "
                  "separated by tabs");
}

void add_sampling_flags(CLI::App* cmd, DecodeFlags& flags) {
  cmd->add_option("--nbest", flags.nbest,
                  "Write the N best hypotheses as 'index ||| hypothesis ||| score' lines");
  auto& sampling = flags.sampling;
  cmd->add_flag("--sampling", sampling.enabled,
                "Draw each token from the model's distribution instead of searching (beam 1); "
                "with --nbest N, N samples per line");
  cmd->add_option("--temperature", sampling.temperature,
                  "With --sampling: divides the log-probabilities (< 1 sharpens) (default: 1)");
  cmd->add_option("--top-k", sampling.top_k,
                  "With --sampling: draw among the K most likely tokens (default: 0 = all)");
  cmd->add_option("--top-p", sampling.top_p,
                  "With --sampling: draw among the fewest most likely tokens whose probability "
                  "reaches P (default: 1 = all)");
  cmd->add_option("--seed", sampling.seed,
                  "With --sampling: the same seed gives the same samples whatever the threads, "
                  "batches or chunks (default: 1)");
}

namespace {

// Where the models run and in what precision: the flags' part of the options.
DecodeOptions resolve_where(const DecodeFlags& flags) {
  if (flags.threads < 0) throw Error("--threads must be >= 0");
  if (flags.beam < 0) throw Error("--beam must be >= 1");
  if (flags.nbest < 0) throw Error("--nbest must be >= 1");
  for (const auto* file : {&flags.constraints, &flags.avoid})
    if (!file->empty() && *file != "-" && ::access(file->c_str(), R_OK) != 0)
      throw Error("cannot read " + *file + ": " + std::strerror(errno));
  if (!is_device_name(flags.device))
    throw Error("--device: unknown device \"" + flags.device + "\" (auto, cpu, cuda or cuda:N)");
  DecodeOptions o;
  o.int8 = !flags.quantize.empty() &&
           parse_choice<Quantize>(flags.quantize, "--quantize") == Quantize::kInt8;
  if (o.int8 && flags.device.rfind("cuda", 0) == 0)
    throw Error("--quantize int8 runs on the CPU only: use --device cpu, or drop --quantize");
  o.precision_setting = parse_choice<PrecisionSetting>(flags.precision, "--precision");
  // int8 runs on the CPU: with auto it picks the CPU.
  o.device = o.int8 && flags.device == "auto" ? torch::Device(torch::kCPU)
                                              : resolve_device(flags.device, "--device");
  // The one place the precision is resolved: refuses fp16 off CUDA, and bf16 on a CPU without
  // native bfloat16 products.
  o.translate.precision = resolve_precision(o.precision_setting, o.device, "--precision");
  o.threads = flags.threads > 0 ? flags.threads : hardware_threads();
  o.ensemble_weights = flags.ensemble_weights;
  o.tag = flags.tag;
  return o;
}

}  // namespace

namespace {

// The search the flags ask for over the checkpoint's decode section, its strategy resolved.
SearchOptions search_options(const DecodeFlags& flags, const DecodeConfig& decode) {
  SearchOptions s = translate_options(decode, flags.beam).search;
  if (flags.length_penalty >= 0) s.length_penalty = flags.length_penalty;
  s.nbest = flags.nbest > 0 ? flags.nbest : 1;
  if (flags.sampling.enabled) {
    // One token a step: the config's beam does not apply, a --beam above 1 is refused below.
    s.beam_size = flags.beam > 0 ? flags.beam : 1;
    s.sampling = flags.sampling;
    // A sample's score is its log-probability, as nmt score gives it, unless a penalty is asked.
    if (flags.length_penalty < 0) s.length_penalty = 0.0;
  }
  s.mode = resolve_search_mode(s, !flags.constraints.empty());
  return s;
}

}  // namespace

DecodeOptions decode_options(const DecodeFlags& flags,
                             const std::function<DecodeConfig()>& decode_config) {
  const Parallel parallel = parse_choice<Parallel>(flags.parallel, "--parallel");
  DecodeOptions o = resolve_where(flags);
  const Precision precision = o.translate.precision;
  const DecodeConfig decode = decode_config();
  o.translate = translate_options(decode, flags.beam);
  o.translate.search = search_options(flags, decode);
  o.translate.precision = precision;
  if (flags.batch_tokens > 0) o.translate.batch_tokens = flags.batch_tokens;
  o.translate.constraints_file = flags.constraints;
  o.translate.avoid_file = flags.avoid;
  if (o.device.is_cpu() && parallel != Parallel::kOps) {
    o.translate.batch_workers = o.threads;
    // Measured on Multi30k at 2 threads: beam 5 (17 batches of 1,000 lines) gains from side by
    // side, greedy (4 batches) loses a little.
    o.translate.min_batches_per_worker = parallel == Parallel::kAuto ? 4 : 1;
  }
  return o;
}

DecodeRequest decode_request(const DecodeFlags& flags, const std::vector<std::string>& paths) {
  if (paths.empty()) throw Error("give a --checkpoint");
  DecodeRequest r;
  r.options = decode_options(flags, [&] {
    for (const auto& p : paths) r.checkpoints.push_back(resolve_checkpoint(p));
    return read_checkpoint_config(r.checkpoints.front()).decode;
  });
  return r;
}

void use_inference_threads(const DecodeOptions& options) {
  torch::set_num_threads(options.threads);
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

// --tag's piece id in the source vocabulary (-1 without --tag).
int64_t tag_id(const std::string& tag, const Vocabs& vocabs) {
  if (tag.empty()) return -1;
  const std::optional<int> id = tag_piece(vocabs.src, tag);
  if (!id)
    throw Error("tag '" + tag +
                "' is not a piece of the source vocabulary (train with data.train[i].tag)");
  spdlog::info("source lines start with tag {} (piece {})", tag, *id);
  return *id;
}

}  // namespace

DecodingModels load_for_decoding(const std::vector<std::string>& checkpoints,
                                 const DecodeOptions& options) {
  if (checkpoints.empty()) throw Error("give a --checkpoint");
  const auto& weights = options.ensemble_weights;
  if (!weights.empty() && weights.size() != checkpoints.size())
    throw Error("--ensemble-weights has " + std::to_string(weights.size()) + " weights for " +
                std::to_string(checkpoints.size()) + " checkpoints");
  DecodingModels d;
  std::vector<Seq2Seq> models;
  for (const auto& c : checkpoints) {
    d.models.push_back(load_model(c, options.device));
    if (d.models.size() > 1) check_same_vocabularies(d.models.front(), d.models.back());
    if (options.int8) d.models.back().model->quantize_int8();
    models.push_back(d.models.back().model);
  }
  log_device_and_precision("", options.device, options.precision_setting,
                           options.translate.precision);
  if (options.int8)
    spdlog::info("output projection quantized to int8 (dynamic, {}-bit activations)",
                 int8_reduced_range() ? "7" : "8");
  d.translate = options.translate;
  d.translate.tag_id = tag_id(options.tag, d.first().vocabs);
  // One checkpoint decodes through its own model; several (or weights) through an ensemble.
  d.scorer = make_scorer(models, weights);
  if (models.size() > 1 || !weights.empty()) spdlog::info("ensemble of {} models", models.size());
  return d;
}

std::string splitter_language(const std::string& source_lang, const Config& config) {
  if (!source_lang.empty()) return source_lang;
  const auto& corpora = config.data.training.corpora;
  if (!corpora.empty()) {
    const std::string& src = corpora.front().src;
    const auto dot = src.rfind('.');
    const std::string ext = dot == std::string::npos ? "" : src.substr(dot + 1);
    if (ext.size() == 2 && std::isalpha(static_cast<unsigned char>(ext[0])) &&
        std::isalpha(static_cast<unsigned char>(ext[1])))
      return ext;
  }
  return "en";
}

}  // namespace nmt
