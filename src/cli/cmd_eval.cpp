#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "util/util.h"

namespace nmt {

void add_eval_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "Score a checkpoint or a hypothesis file (BLEU, chrF)");
  auto checkpoint = std::make_shared<std::string>();
  cmd->add_option("--checkpoint", *checkpoint, "Checkpoint or run directory");
  cmd->callback([] {
    throw Error(
        "nmt eval is not available yet in this version: BLEU/chrF scoring arrives with "
        "the decoding and evaluation work. Use `nmt translate` to produce hypotheses.");
  });
}

}  // namespace nmt
