#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/launch.h"
#include "config/config.h"
#include "config/parse.h"
#include "config/print.h"
#include "config/validate.h"
#include "train/trainer.h"
#include "util/io.h"
#include "util/log.h"
#include "util/util.h"

namespace nmt {

void add_train_command(CLI::App& app) {
  struct Args {
    std::string config;
    std::string run_dir;
    std::vector<std::string> overrides;
    bool resume = false;
    bool reset_optimizer = false;
    bool reset_data = false;
    bool dump_config = false;
    bool print_reference = false;
    std::string device;
    int nproc = 0;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "train", "Train a model (model.arch: transformer or rnn) from a JSON config");
  cmd->add_option("--config", args->config, "JSON config file (optional with --resume)");
  cmd->add_option("--run-dir", args->run_dir,
                  "Directory for config, vocabularies, logs, metrics and checkpoints");
  cmd->add_option("--set", args->overrides, "Override a config key: --set train.max_steps=500")
      ->take_all();
  cmd->add_flag("--resume", args->resume, "Continue from the newest complete checkpoint");
  cmd->add_flag("--reset-optimizer", args->reset_optimizer,
                "With --resume: fresh Adam state (allows changed adam_*, warmup_steps, lr_factor)");
  cmd->add_flag(
      "--reset-data", args->reset_data,
      "With --resume: start a fresh pass over the data (allows changed data or batching)");
  cmd->add_option("--device", args->device,
                  "auto, cpu, cuda or cuda:N: overrides train.device (default: auto)");
  cmd->add_option("--nproc", args->nproc,
                  "Data-parallel training in N local processes (as torchrun --nproc-per-node N)");
  cmd->add_flag("--dump-config", args->dump_config, "Print the merged config and exit");
  cmd->add_flag("--print-config-reference", args->print_reference,
                "Print every config key with its type, default and meaning (Markdown) and exit");
  cmd->callback([args] {
    setup_logging();
    if (args->print_reference) {
      write_standard_output(config_reference_markdown());
      return;
    }
    std::string config_path = args->config;
    if (config_path.empty()) {
      if (!args->resume || args->run_dir.empty())
        throw Error("train: --config is required (or --resume with --run-dir)");
      config_path = args->run_dir + "/config.json";
    }
    auto overrides = args->overrides;
    if (!args->device.empty()) overrides.push_back("train.device=" + args->device);
    const Config config = load_config_file(config_path, overrides);
    if (args->dump_config) {
      write_standard_output(config_to_json(config) + "\n");
      return;
    }
    if (args->run_dir.empty()) throw Error("train: --run-dir is required");
    validate_data_files(config);
    if ((args->reset_optimizer || args->reset_data) && !args->resume)
      throw Error("--reset-optimizer and --reset-data go with --resume");
    if (args->nproc > 0) throw ExitStatus(launch_local_workers(args->nproc));
    train(config,
          TrainOptions{args->run_dir, args->resume, args->reset_optimizer, args->reset_data});
  });
}

}  // namespace nmt
