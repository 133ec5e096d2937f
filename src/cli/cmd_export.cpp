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
  cmd->add_option("--format", args->format, "Target format, one of " + choice_list<ExportFormat>())
      ->required();
  cmd->add_option("--output", args->output, "Model directory to write")->required();
  cmd->add_option("--quantization", args->quantization,
                  "Weights as one of " + choice_list<Ct2Quantization>() + " (default: float32)");
  cmd->add_flag("--force", args->force, "Replace an existing --output directory");
  cmd->callback([args] {
    setup_logging();
    parse_choice<ExportFormat>(args->format, "--format");  // one format so far
    const auto quantization = parse_choice<Ct2Quantization>(args->quantization, "--quantization");
    export_ctranslate2(args->checkpoint, args->output, quantization, args->force);
    spdlog::info("wrote the CTranslate2 model {} ({})", args->output, args->quantization);
  });
}

}  // namespace nmt
