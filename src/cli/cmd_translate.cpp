#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>

#include "ckpt/checkpoint.h"
#include "cli/commands.h"
#include "decode/greedy.h"
#include "util/log.h"
#include "util/util.h"

namespace nmt {

namespace {
// Lines per chunk: output is flushed after each, so pipes see results before EOF.
constexpr size_t kChunkLines = 1000;
}  // namespace

void add_translate_command(CLI::App& app) {
  struct Args {
    std::string checkpoint;
    std::string input;
    std::string output;
    int64_t batch_tokens = 0;
    int threads = 0;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("translate", "Translate text, one sentence a line (greedy)");
  cmd->add_option("--checkpoint", args->checkpoint, "Checkpoint directory or run directory")
      ->required();
  cmd->add_option("--input", args->input, "Input file (default: stdin)");
  cmd->add_option("--output", args->output, "Output file (default: stdout)");
  cmd->add_option("--batch-tokens", args->batch_tokens,
                  "Source-token budget per batch (default: decode.batch_tokens)");
  cmd->add_option("--threads", args->threads, "CPU threads (0 = all cores)");
  cmd->callback([args] {
    setup_logging();
    if (args->threads < 0) throw Error("--threads must be >= 0");
    torch::set_num_threads(args->threads > 0 ? args->threads : hardware_threads());
    keep_freed_memory();
    LoadedModel m = load_model(args->checkpoint);
    spdlog::info("loaded {}", m.dir);
    const int64_t batch_tokens =
        args->batch_tokens > 0 ? args->batch_tokens : m.config.decode.batch_tokens;
    const DecodeLimits limits{m.config.decode.max_len_a, m.config.decode.max_len_b};

    std::ifstream in_file;
    if (!args->input.empty()) {
      in_file.open(args->input, std::ios::binary);
      if (!in_file) throw Error("cannot open input " + args->input);
    }
    std::istream& in = args->input.empty() ? std::cin : in_file;
    std::ofstream out_file;
    if (!args->output.empty()) {
      out_file.open(args->output, std::ios::binary | std::ios::trunc);
      if (!out_file) throw Error("cannot write output " + args->output);
    }
    std::ostream& out = args->output.empty() ? std::cout : out_file;

    TranslateStats total;
    std::vector<std::string> chunk;
    std::string line;
    auto flush_chunk = [&] {
      TranslateStats s;
      for (const auto& hyp : translate_lines(m, chunk, batch_tokens, limits, &s))
        out << hyp << '\n';
      out.flush();
      if (!out) throw Error("cannot write output");
      total.lines += s.lines;
      total.truncated += s.truncated;
      total.replaced_bytes += s.replaced_bytes;
      chunk.clear();
    };
    while (std::getline(in, line)) {
      chomp_cr(line);
      chunk.push_back(std::move(line));
      if (chunk.size() >= kChunkLines) flush_chunk();
    }
    if (!chunk.empty()) flush_chunk();
    if (total.truncated > 0)
      spdlog::warn("{} lines were longer than the model's input limit and were truncated",
                   total.truncated);
    if (total.replaced_bytes > 0)
      spdlog::warn("{} invalid UTF-8 or NUL bytes were replaced with U+FFFD", total.replaced_bytes);
    spdlog::info("translated {} lines", total.lines);
  });
}

}  // namespace nmt
