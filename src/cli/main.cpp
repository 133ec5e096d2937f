// nmt: train, evaluate and run translation models (Transformer or RNN with attention).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "util/blas.h"
#include "util/log.h"
#include "util/signals.h"
#include "util/util.h"

int main(int argc, char** argv) {
  nmt::route_stop_signals();   // before any thread exists (util/signals.h says why)
  nmt::select_blas_kernels();  // before anything multiplies
  CLI::App app{"nmt: train, evaluate and run translation models (Transformer or RNN)"};
  app.require_subcommand(1);
  nmt::add_prepare_command(app);
  nmt::add_train_command(app);
  nmt::add_translate_command(app);
  nmt::add_eval_command(app);
  nmt::add_score_command(app);
  nmt::add_serve_command(app);
  nmt::add_average_command(app);
  nmt::add_plot_command(app);
  nmt::add_export_command(app);
  try {
    app.parse(argc, argv);
    nmt::check_log_file();  // a log line that could not be written fails the command too
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const nmt::ExitStatus& e) {  // a clean stop on a signal, or --nproc's workers' status
    std::fflush(stdout);
    nmt::clear_progress();
    return e.status();
  } catch (const std::exception& e) {
    std::fflush(stdout);
    nmt::clear_progress();
    std::fprintf(stderr, "nmt: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
