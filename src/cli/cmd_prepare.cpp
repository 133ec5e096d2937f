#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <optional>

#include "cli/commands.h"
#include "config/config.h"
#include "config/parse.h"
#include "config/validate.h"
#include "data/prepare.h"
#include "data/vocab_sample.h"
#include "util/io.h"
#include "util/log.h"
#include "util/util.h"

namespace nmt {

void add_prepare_command(CLI::App& app) {
  struct Args {
    std::string config, out;
    std::vector<std::string> overrides;
    int threads = 0;
    bool vocab_only = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "prepare",
      "Encode a config's training corpora once into a token store (data.train_store) that "
      "nmt train maps instead of reading text");
  cmd->add_option("--config", args->config, "JSON config file (its data and vocab sections)")
      ->required();
  cmd->add_option("--out", args->out, "Directory of the store (replaced when it exists)")
      ->required();
  cmd->add_option("--threads", args->threads, "Encoding threads (default: train.threads)");
  cmd->add_option("--set", args->overrides, "Override a config key: --set data.dedup=true")
      ->take_all();
  cmd->add_flag("--vocab-only", args->vocab_only,
                "Only train the vocabulary (from the sample) into DIR, without encoding");
  cmd->callback([args] {
    setup_logging();
    Config config = load_config_file(args->config, args->overrides);
    if (config.data.training.from_store())
      throw Error("prepare: data.train_store names a store already; prepare reads the text files");
    validate_data_files(config);
    if (args->threads < 0) throw Error("--threads must be >= 0");
    const int threads = args->threads > 0 ? args->threads : effective_threads(config);
    if (args->vocab_only) {
      create_directories(args->out);
      write_vocabs(args->out, train_vocabs(config, effective_threads(config)));
      spdlog::info("wrote the vocabulary to {}", args->out);
      return;
    }
    const std::optional<Vocabs> vocabs = named_vocabs(config.vocab);
    spdlog::info("nmt prepare: {} corpus file pair(s) -> {}, {} thread(s)",
                 config.data.training.corpora.size(), args->out, threads);
    prepare_store(config, vocabs ? &*vocabs : nullptr, args->out, threads);
  });
}

}  // namespace nmt
