#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands.h"
#include "export/ctranslate2.h"
#include "util/log.h"
#include "util/util.h"

namespace nmt {

void add_export_command(CLI::App& app) {
  struct Args {
    std::string checkpoint, format, output, quantization = "float32";
    bool force = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "export", "Export a Transformer checkpoint to another engine's model format (CTranslate2)");
  cmd->add_option("--checkpoint", args->checkpoint,
                  "Checkpoint directory, or a run directory (its best checkpoint)")
      ->required();
  cmd->add_option("--format", args->format, "Target format: ctranslate2")->required();
  cmd->add_option("--output", args->output, "Model directory to write")->required();
  cmd->add_option("--quantization", args->quantization,
                  "Weights as float32 (default), int8, int16 or float16");
  cmd->add_flag("--force", args->force, "Replace an existing --output directory");
  cmd->callback([args] {
    setup_logging();
    if (args->format != "ctranslate2")
      throw Error("--format must be ctranslate2, not \"" + args->format + "\"");
    const auto quantization = parse_ct2_quantization(args->quantization);
    export_ctranslate2(args->checkpoint, args->output, quantization, args->force);
    spdlog::info("wrote the CTranslate2 model {} ({})", args->output, args->quantization);
  });
}

}  // namespace nmt
