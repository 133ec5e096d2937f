// Logging set-up (spdlog) and a live progress line for terminals.
#pragma once

#include <string>

namespace nmt {

// Logs go to stderr; with a file path they are also appended there (checked writes: a file that
// cannot be opened throws at once).
void setup_logging(const std::string& log_file = "", bool verbose = false);

// spdlog keeps a sink's exceptions to itself, so the log file's first failed write is held and
// raised here (an Error naming the file); the file gets no more lines after it.
void check_log_file();

// A data-parallel worker other than rank 0: warnings and errors only, to stderr, each line
// prefixed with "[rank N]".
void setup_worker_logging(int rank);

// True when stderr is a terminal: progress is then redrawn in place.
bool stderr_is_tty();

// Redraws one status line on a terminal (no-op otherwise). Call clear_progress() before logging.
void show_progress(const std::string& text);
void clear_progress();

}  // namespace nmt
