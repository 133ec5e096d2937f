#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands.h"
#include "train/curves.h"
#include "util/io.h"
#include "util/log.h"
#include "util/util.h"

namespace nmt {

void add_plot_command(CLI::App& app) {
  struct Args {
    std::vector<std::string> run_dirs;
    std::string output, metric = "bleu", title;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "plot", "Draw the training curves of one or more runs (metrics.jsonl) into one SVG");
  cmd->add_option("run_dirs", args->run_dirs, "Run directories, overlaid in this order")
      ->required();
  cmd->add_option("--output", args->output, "SVG file to write")->required();
  cmd->add_option("--metric", args->metric, "Validation metric panel: bleu or chrf")
      ->capture_default_str();
  cmd->add_option("--title", args->title, "Title (default: the run names)");
  cmd->callback([args] {
    setup_logging();
    if (args->metric != "bleu" && args->metric != "chrf")
      throw Error("--metric: bleu or chrf, got \"" + args->metric + "\"");
    check_writable_file(args->output);
    std::vector<CurveRun> runs;
    std::string names;
    for (const auto& dir : args->run_dirs) {
      runs.push_back(read_curve_run(dir, args->metric));
      names += (names.empty() ? "" : ", ") + runs.back().name;
    }
    const std::string title = args->title.empty() ? "Training curves: " + names : args->title;
    write_file_atomic(args->output, curves_svg(runs, title));
    spdlog::info("wrote {} ({} run{})", args->output, runs.size(), runs.size() == 1 ? "" : "s");
  });
}

}  // namespace nmt
