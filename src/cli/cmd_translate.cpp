#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <iostream>

#include "ckpt/checkpoint.h"
#include "cli/commands.h"
#include "cli/decode_flags.h"
#include "decode/translate.h"
#include "util/io.h"
#include "util/line_reader.h"
#include "util/log.h"
#include "util/util.h"

namespace nmt {
namespace {

struct TranslateArgs {
  std::vector<std::string> checkpoints;
  std::string input;
  std::string output;
  DecodeFlags decode;
  int64_t nbest = 0;
  bool scores = false;
  std::string attention_out;
  int64_t attention_layer = -1;
  int64_t attention_head = -1;
  int64_t chunk_lines = 1000;
};

// The checkpoints and decoding options, resolved once: the shared flags over the checkpoint's
// decode section, then translate's own (n-best, attention). Throws Error on a bad flag before
// anything loads.
DecodeRequest translate_request(const TranslateArgs& args) {
  if (args.chunk_lines < 1) throw Error("--chunk-lines must be >= 1");
  if (args.nbest < 0) throw Error("--nbest must be >= 1");
  if (args.attention_layer < -1 || args.attention_head < -1)
    throw Error("--attention-layer and --attention-head must be >= 0");
  DecodeRequest request = decode_request(args.decode, args.checkpoints);
  DecodeOptions& options = request.options;
  auto& search = options.translate.search;
  search.nbest = args.nbest > 0 ? args.nbest : 1;
  if (search.nbest > search.beam_size)
    throw Error("--nbest " + std::to_string(search.nbest) + " exceeds the beam size " +
                std::to_string(search.beam_size) + " (raise --beam)");
  options.translate.attention = !args.attention_out.empty();
  options.translate.attention_layer = args.attention_layer;
  options.translate.attention_head = args.attention_head;
  return request;
}

void log_totals(const TranslateStats& total, double secs) {
  if (total.truncated > 0)
    spdlog::warn("{} lines were longer than the model's input limit and were truncated",
                 total.truncated);
  if (total.replaced_bytes > 0)
    spdlog::warn("{} invalid UTF-8 or NUL bytes were replaced with U+FFFD", total.replaced_bytes);
  spdlog::info("translated {} lines in {:.2f} s ({:.1f} sentences/s, {:.1f} target tokens/s)",
               total.lines, secs, static_cast<double>(total.lines) / std::max(secs, 1e-9),
               static_cast<double>(total.output_tokens) / std::max(secs, 1e-9));
}

void run_translate(const TranslateArgs& args, const DecodeRequest& request) {
  const DecodeOptions& options = request.options;
  use_inference_threads(options);
  // Files first: a missing input or an unwritable output is refused before the model loads.
  LineReader in(args.input.empty() ? "-" : args.input);  // plain or gzip; "-": stdin
  OutFile out_file = args.output.empty() ? OutFile::standard_output()
                                         : OutFile(args.output, OutFile::Mode::kTruncate);
  if (!args.attention_out.empty()) check_writable_dir(args.attention_out);
  const DecodingModels d = load_for_decoding(request.checkpoints, options);
  spdlog::info("loaded {}", d.first().dir);
  spdlog::info("beam {}, length penalty {}", options.translate.search.beam_size,
               options.translate.search.length_penalty);

  OutFileStream out(out_file);
  const auto start = std::chrono::steady_clock::now();
  StreamOptions stream;
  stream.chunk_lines = args.chunk_lines;
  stream.nbest = args.nbest > 0;
  stream.scores = args.scores;
  stream.attention_dir = args.attention_out;
  const TranslateStats total =
      translate_stream(*d.scorer, d.first().vocabs, in, out, d.translate, stream);
  out_file.close();
  log_totals(total,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace

void add_translate_command(CLI::App& app) {
  auto args = std::make_shared<TranslateArgs>();
  auto* cmd = app.add_subcommand("translate", "Translate text, one sentence a line");
  cmd->add_option("--checkpoint", args->checkpoints,
                  "Checkpoint directory, or a run directory (its best checkpoint, else newest); "
                  "repeat it for an ensemble")
      ->required()
      ->take_all();
  cmd->add_option("--input", args->input, "Input file (default: stdin)");
  cmd->add_option("--output", args->output, "Output file (default: stdout)");
  add_decode_flags(cmd, args->decode);
  cmd->add_option("--nbest", args->nbest,
                  "Write the N best hypotheses as 'index ||| hypothesis ||| score' lines");
  cmd->add_flag("--scores", args->scores, "Add each hypothesis' score as a tab-separated column");
  cmd->add_option("--attention-out", args->attention_out,
                  "Write a cross-attention heatmap (NNNNNN.svg) and its weights (NNNNNN.json) "
                  "per input line into this directory");
  cmd->add_option("--attention-layer", args->attention_layer,
                  "Decoder layer for --attention-out, 0-based (default: the last)");
  cmd->add_option("--attention-head", args->attention_head,
                  "Head for --attention-out, 0-based (default: mean over heads)");
  cmd->add_option("--chunk-lines", args->chunk_lines,
                  "Lines read, translated and flushed at a time: output starts before the input "
                  "ends (default: 1000)");
  cmd->callback([args] {
    setup_logging();
    run_translate(*args, translate_request(*args));
  });
}

}  // namespace nmt
