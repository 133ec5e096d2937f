#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <chrono>

#include "cli/commands.h"
#include "cli/decode_flags.h"
#include "decode/forced.h"
#include "util/io.h"
#include "util/line_reader.h"
#include "util/log.h"
#include "util/util.h"

namespace nmt {
namespace {

struct ScoreArgs {
  std::vector<std::string> checkpoints;
  std::string src, tgt, output;
  DecodeFlags decode;
  bool normalize = false;
  int64_t chunk_lines = 10000;
};

void run_score(const ScoreArgs& args) {
  if (args.chunk_lines < 1) throw Error("--chunk-lines must be >= 1");
  const DecodeRequest request = decode_request(args.decode, args.checkpoints);
  const DecodeOptions& options = request.options;
  use_inference_threads(options);
  // Files first: a missing input or an unwritable output is refused before the models load.
  LineReader src(args.src), tgt(args.tgt);
  OutFile out_file = args.output.empty() ? OutFile::standard_output()
                                         : OutFile(args.output, OutFile::Mode::kTruncate);
  const DecodingModels d = load_for_decoding(request.checkpoints, options);
  spdlog::info("loaded {}", d.first().dir);
  ScoreOptions o;
  o.batch_tokens = options.translate.batch_tokens;
  o.precision = options.translate.precision;
  o.normalize = args.normalize;
  o.chunk_lines = args.chunk_lines;
  o.tag_id = d.translate.tag_id;
  OutFileStream out(out_file);
  const auto start = std::chrono::steady_clock::now();
  const ScoreStats stats = score_stream(*d.scorer, d.first().vocabs, src, tgt, out, o);
  out_file.close();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (stats.truncated > 0)
    spdlog::warn("{} sentences were longer than the model's limit and were scored truncated",
                 stats.truncated);
  if (stats.replaced_bytes > 0)
    spdlog::warn("{} invalid UTF-8 or NUL bytes were replaced with U+FFFD", stats.replaced_bytes);
  spdlog::info("scored {} pairs in {:.2f} s ({:.1f} pairs/s)", stats.pairs, secs,
               static_cast<double>(stats.pairs) / std::max(secs, 1e-9));
}

}  // namespace

void add_score_command(CLI::App& app) {
  auto args = std::make_shared<ScoreArgs>();
  auto* cmd = app.add_subcommand(
      "score", "Score sentence pairs by forced decoding: log P(target | source), one line a pair");
  cmd->add_option("--checkpoint", args->checkpoints,
                  "Checkpoint directory, or a run directory (its best checkpoint, else newest); "
                  "repeat it for an ensemble")
      ->required()
      ->take_all();
  cmd->add_option("--src", args->src, "Source sentences, one a line (plain or gzip; - = stdin)")
      ->required();
  cmd->add_option("--tgt", args->tgt, "Target sentences, aligned with --src (plain or gzip)")
      ->required();
  cmd->add_option("--output", args->output, "Output file (default: stdout)");
  cmd->add_flag("--normalize", args->normalize,
                "Divide each log-probability by the target's pieces + 1 (EOS): a per-token score "
                "(cross-entropy with the sign flipped)");
  add_model_flags(cmd, args->decode);
  cmd->add_option("--chunk-lines", args->chunk_lines,
                  "Pairs read, scored and written at a time (default: 10000)");
  cmd->callback([args] {
    setup_logging();
    run_score(*args);
  });
}

}  // namespace nmt
