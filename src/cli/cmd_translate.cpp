#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <optional>
#include <chrono>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "ckpt/checkpoint.h"
#include "cli/commands.h"
#include "cli/decode_flags.h"
#include "decode/output.h"
#include "doc/document.h"
#include "decode/translate.h"
#include "util/io.h"
#include "util/line_reader.h"
#include "util/lock.h"
#include "util/log.h"
#include "util/signals.h"
#include "util/util.h"

namespace nmt {
namespace {

struct TranslateArgs {
  std::vector<std::string> checkpoints;
  std::string input;
  std::string output;
  DecodeFlags decode;
  bool scores = false;
  std::string attention_out;
  int64_t attention_layer = -1;
  int64_t attention_head = -1;
  std::string alignment;  // "" (none), hard or soft
  int64_t alignment_layer = -1;
  std::string alignment_step = "predict";  // --alignment-step
  std::string reverse_checkpoint;          // --reverse-checkpoint ("" = none)
  int64_t chunk_lines = 1000;
  std::string format = "lines";  // lines | text | html (--format)
  bool wrapped = false;
  bool html_lenient = false;
  std::string source_lang;  // the splitter's language ("": the training data's)
  bool progress = false;
  bool resume = false;
};

// The checkpoints and decoding options, resolved once: the shared flags (the search's among
// them) over the checkpoint's decode section, then translate's own (attention, alignments).
// Throws Error on a bad flag before anything loads.
DecodeRequest translate_request(const TranslateArgs& args) {
  if (args.chunk_lines < 1) throw Error("--chunk-lines must be >= 1");
  if (args.attention_layer < -1 || args.attention_head < -1)
    throw Error("--attention-layer and --attention-head must be >= 0");
  if (args.resume && args.output.empty())
    throw Error("--resume needs --output, the file to continue");
  DecodeRequest request = decode_request(args.decode, args.checkpoints);
  DecodeOptions& options = request.options;
  options.translate.attention = !args.attention_out.empty();
  options.translate.attention_layer = args.attention_layer;
  options.translate.attention_head = args.attention_head;
  if (!args.alignment.empty())
    options.translate.alignment = parse_choice<AlignmentMode>(args.alignment, "--alignment");
  if (args.alignment_layer < -1) throw Error("--alignment-layer must be >= 0");
  options.translate.alignment_layer = args.alignment_layer;
  options.translate.alignment_step =
      parse_choice<AlignmentStep>(args.alignment_step, "--alignment-step");
  if (!args.reverse_checkpoint.empty() && args.alignment.empty() && args.format != "html")
    throw Error("--reverse-checkpoint aligns words: give --alignment or --format html");
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

std::string clock_text(double secs) {
  const auto s = static_cast<long long>(secs + 0.5);
  char buf[48];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm%02llds", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  return buf;
}

// --progress: lines done, lines/s and an ETA on stderr every few seconds and at the end.
class Progress {
 public:
  // total: the input's lines (-1: unknown, as for standard input); skipped: done before (--resume).
  Progress(int64_t total, int64_t skipped) : total_(total), done_(skipped), skipped_(skipped) {}

  void add(int64_t lines) {
    done_ += lines;
    if (seconds() - last_ >= kEverySeconds) report(false);
  }
  void report(bool end) {
    last_ = seconds();
    const double rate = static_cast<double>(done_ - skipped_) / std::max(last_, 1e-9);
    std::string line = "progress: " + std::to_string(done_);
    if (total_ >= 0) {
      char pct[32];
      std::snprintf(pct, sizeof pct, " (%.1f%%)",
                    100.0 * static_cast<double>(done_) / std::max<double>(1, total_));
      line += " / " + std::to_string(total_) + " lines" + pct;
    } else {
      line += " lines";
    }
    char speed[48];
    std::snprintf(speed, sizeof speed, ", %.1f lines/s", rate);
    line += speed;
    if (end)
      line += ", " + clock_text(last_) + " in all";
    else if (total_ >= 0 && rate > 0)
      line += ", ETA " + clock_text(static_cast<double>(total_ - done_) / rate);
    spdlog::info("{}", line);
  }

 private:
  static constexpr double kEverySeconds = 5.0;
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  int64_t total_, done_, skipped_;
  double last_ = 0.0;
};

// --resume: keeps the output's lines up to the start of the chunk an interrupted run was
// writing (a cut last line, or part of a chunk, goes) and returns the input lines they cover.
// Restarting at a chunk boundary gives every later batch the lines it had before, so the output
// is byte-identical to an uninterrupted run's.
int64_t prepare_resume(const std::string& path, int64_t lines_per_input, int64_t chunk_lines) {
  if (::access(path.c_str(), F_OK) != 0) return 0;  // nothing yet: a fresh start
  std::vector<uint64_t> ends;  // byte offset after each complete line
  {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> block(1 << 20);
    uint64_t offset = 0;
    while (in.read(block.data(), static_cast<std::streamsize>(block.size())) || in.gcount() > 0) {
      const auto n = static_cast<size_t>(in.gcount());
      for (size_t i = 0; i < n; ++i)
        if (block[i] == '\n') ends.push_back(offset + i + 1);
      offset += n;
    }
  }
  const auto complete = static_cast<int64_t>(ends.size());
  const int64_t inputs = complete / lines_per_input / chunk_lines * chunk_lines;
  const int64_t keep_lines = inputs * lines_per_input;
  const uint64_t keep_bytes = keep_lines == 0 ? 0 : ends[static_cast<size_t>(keep_lines - 1)];
  if (::truncate(path.c_str(), static_cast<off_t>(keep_bytes)) != 0)
    throw Error("cannot truncate " + path + " to resume it: " + std::strerror(errno));
  spdlog::info("resuming {}: {} complete lines kept, from input line {}", path, keep_lines,
               inputs + 1);
  return inputs;
}

void run_translate(const TranslateArgs& args, const DecodeRequest& request) {
  const DecodeOptions& options = request.options;
  DocumentOptions document;
  document.format = parse_choice<InputFormat>(args.format, "--format");
  document.wrapped = args.wrapped;
  document.html_lenient = args.html_lenient;
  use_inference_threads(options);
  // Files first: a missing input or an unwritable output is refused before the model loads.
  const std::string input = args.input.empty() ? "-" : args.input;
  LineReader in(input);  // plain or gzip; "-": stdin
  // One writer per output file: a second job on it (or a --resume while the first runs) is
  // refused before it reads or truncates anything.
  std::optional<FileLock> output_lock;
  if (!args.output.empty()) output_lock.emplace(args.output);
  StreamOptions stream;
  stream.chunk_lines = args.chunk_lines;
  OutputOptions output;
  output.document = document.format != InputFormat::kLines;
  output.nbest = args.decode.nbest > 0;
  output.scores = args.scores;
  output.attention_dir = args.attention_out;
  if (args.resume)
    stream.skip_lines = prepare_resume(args.output, output.nbest ? args.decode.nbest : 1,
                                       args.chunk_lines);
  OutFile out_file = args.output.empty()
                         ? OutFile::standard_output()
                         : OutFile(args.output, args.resume ? OutFile::Mode::kAppend
                                                            : OutFile::Mode::kTruncate);
  if (!args.attention_out.empty()) check_writable_dir(args.attention_out);
  DecodingModels d = load_for_decoding(request.checkpoints, options);
  spdlog::info("loaded {}", d.first().dir);
  std::optional<DecodingModels> reverse;
  if (!args.reverse_checkpoint.empty()) {
    DecodeOptions one = options;  // the reverse model alone, without the forward's tag
    one.ensemble_weights.clear();
    one.tag.clear();
    reverse.emplace(load_for_decoding({args.reverse_checkpoint}, one));
    d.translate.reverse_scorer = reverse->scorer.get();
    d.translate.reverse_vocabs = &reverse->first().vocabs;
    spdlog::info("alignments symmetrized with the reverse model {}", reverse->first().dir);
  }
  if (document.format != InputFormat::kLines) {
    document.language = splitter_language(args.source_lang, d.first().config);
    spdlog::info("{} input: paragraphs split into sentences ({} non-breaking prefixes){}",
                 args.format, document.language, args.wrapped ? ", wrapped" : "");
  }
  use_document_format(stream, *d.scorer, d.first().vocabs, d.translate, document);
  const auto& search = options.translate.search;
  if (search.mode == SearchMode::kSampling)
    spdlog::info("sampling: temperature {}, top-k {}, top-p {}, seed {}",
                 search.sampling.temperature, search.sampling.top_k, search.sampling.top_p,
                 search.sampling.seed);
  else
    spdlog::info("beam {}, length penalty {}", search.beam_size, search.length_penalty);

  // SIGINT and SIGTERM end the job after the running batches, with the lines done written.
  StopSignals signals;
  stream.hooks.stop_requested = [&signals] { return signals.requested() != 0; };
  std::optional<Progress> progress;
  if (args.progress) {
    progress.emplace(input == "-" ? -1 : count_lines(input), stream.skip_lines);
    stream.hooks.on_lines = [&progress](int64_t n) { progress->add(n); };
  }
  OutFileStream out(out_file);
  const auto start = std::chrono::steady_clock::now();
  const TranslateStats total =
      translate_stream(*d.scorer, d.first().vocabs, in, out, d.translate, stream, output);
  out_file.close();
  if (progress) progress->report(true);
  log_totals(total,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (const int sig = signals.requested()) {
    spdlog::warn("stopped by signal {}: {} lines written; --resume continues", sig,
                 stream.skip_lines + total.lines);
    throw Interrupted(sig);
  }
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
  add_sampling_flags(cmd, args->decode);
  cmd->add_flag("--scores", args->scores, "Add each hypothesis' score as a tab-separated column");
  cmd->add_option("--attention-out", args->attention_out,
                  "Write a cross-attention heatmap (NNNNNN.svg) and its weights (NNNNNN.json) "
                  "per input line into this directory");
  cmd->add_option("--attention-layer", args->attention_layer,
                  "Decoder layer for --attention-out, 0-based (default: the last)");
  cmd->add_option("--attention-head", args->attention_head,
                  "Head for --attention-out, 0-based (default: mean over heads)");
  cmd->add_option("--alignment", args->alignment,
                  "Word alignments from the cross-attention, one of " +
                      choice_list<AlignmentMode>() +
                      ": hard (the default) writes "
                  "'hypothesis ||| i-j ...' (source word i, hypothesis word j, 0-based); soft "
                  "writes one JSON object per hypothesis with the word-level matrix")
      ->expected(0, 1)
      ->default_str("hard");
  cmd->add_option("--alignment-layer", args->alignment_layer,
                  "Decoder layer for --alignment, 0-based (default: the last)");
  cmd->add_option("--alignment-step", args->alignment_step,
                  "Which decoder step's attention aligns a target piece, one of " +
                      choice_list<AlignmentStep>() +
                      ": the step that predicts it (the default) or the step that consumes it as "
                      "input (Shift-Att)");
  cmd->add_option("--reverse-checkpoint", args->reverse_checkpoint,
                  "A target-to-source model: --alignment's (and --format html's) links become "
                  "both directions' links symmetrized by grow-diag-final-and");
  cmd->add_option("--format", args->format,
                  "What a unit of input is, one of " + choice_list<InputFormat>() +
                      ": a sentence a line (the default), a paragraph of text a line (split "
                      "into sentences, rebuilt with its own spacing), or a paragraph of HTML "
                      "(tags put back on the translation through word alignments)");
  cmd->add_flag("--html-lenient", args->html_lenient,
                "With --format html: copy markup that cannot be matched (a stray closing tag, an "
                "unterminated tag) through as text instead of stopping with an error");
  cmd->add_flag("--wrapped", args->wrapped,
                "With --format text: paragraphs are separated by blank lines and their lines "
                "joined; each paragraph is one output line, each blank line stays");
  cmd->add_option("--source-lang", args->source_lang,
                  "The source language's non-breaking prefixes for splitting sentences (en, de, "
                  "fr, es, cs; default: the training source file's extension, else en)");
  cmd->add_option("--chunk-lines", args->chunk_lines,
                  "Lines read, translated and flushed at a time: output starts before the input "
                  "ends (default: 1000)");
  cmd->add_flag("--progress", args->progress,
                "Log lines done, lines/s and the time left every few seconds and at the end");
  cmd->add_flag("--resume", args->resume,
                "Continue an interrupted --output: keep its complete lines and translate the "
                "rest, giving the file an uninterrupted run writes (same flags)");
  cmd->callback([args] {
    setup_logging();
    run_translate(*args, translate_request(*args));
  });
}

}  // namespace nmt
