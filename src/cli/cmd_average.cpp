#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <filesystem>

#include "ckpt/checkpoint.h"
#include "cli/commands.h"
#include "util/io.h"
#include "util/log.h"
#include "util/util.h"

namespace nmt {

void add_average_command(CLI::App& app) {
  struct Args {
    std::vector<std::string> checkpoints;
    std::string run_dir, output;
    int64_t last = 0;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "average", "Average the weights of checkpoints into one checkpoint for eval/translate");
  auto* list = cmd->add_option("--checkpoints", args->checkpoints, "Checkpoint directories");
  auto* last = cmd->add_option("--last", args->last,
                               "Average the newest N checkpoints of --run-dir instead");
  cmd->add_option("--run-dir", args->run_dir, "Run directory for --last");
  cmd->add_option("--output", args->output, "Directory of the averaged checkpoint")->required();
  list->excludes(last);
  cmd->callback([args] {
    setup_logging();
    std::vector<std::string> dirs = args->checkpoints;
    if (args->last != 0 || !args->run_dir.empty()) {
      if (args->last < 1) throw Error("--last must be >= 1");
      if (args->run_dir.empty()) throw Error("--last needs --run-dir");
      const auto all = list_checkpoints(args->run_dir);
      if (static_cast<int64_t>(all.size()) < args->last)
        throw Error("--last " + std::to_string(args->last) + ": " + args->run_dir + " has only " +
                    std::to_string(all.size()) + " complete checkpoints");
      dirs.assign(all.end() - args->last, all.end());
    }
    if (dirs.empty()) throw Error("give --checkpoints A B ... or --last N --run-dir DIR");
    // An unwritable destination is refused before the checkpoints are read.
    const std::string parent = std::filesystem::path(args->output).parent_path().string();
    check_writable_dir(parent.empty() ? "." : parent);
    for (const auto& d : dirs) spdlog::info("averaging {}", d);
    const auto out = average_checkpoints(dirs, args->output);
    spdlog::info("wrote {} (average of {} checkpoints)", out, dirs.size());
  });
}

}  // namespace nmt
