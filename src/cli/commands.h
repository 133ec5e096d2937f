// Subcommands: each file registers one on the CLI11 app; main only dispatches.
#pragma once

namespace CLI {
class App;
}

namespace nmt {
void add_prepare_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_translate_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_average_command(CLI::App& app);
void add_plot_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_score_command(CLI::App& app);
void add_serve_command(CLI::App& app);
}  // namespace nmt
