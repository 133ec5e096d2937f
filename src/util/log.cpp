#include "util/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>

namespace nmt {

namespace {
bool g_progress_shown = false;
}

void setup_logging(const std::string& log_file, bool verbose) {
  std::vector<spdlog::sink_ptr> sinks;
  sinks.push_back(std::make_shared<spdlog::sinks::stderr_sink_mt>());
  if (!log_file.empty())
    sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(log_file, false));
  auto logger = std::make_shared<spdlog::logger>("nmt", sinks.begin(), sinks.end());
  logger->set_pattern("[%Y-%m-%d %H:%M:%S] [%^%l%$] %v");
  logger->set_level(verbose ? spdlog::level::debug : spdlog::level::info);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

void setup_worker_logging(int rank) {
  auto logger = std::make_shared<spdlog::logger>(
      "nmt", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("[%Y-%m-%d %H:%M:%S] [rank " + std::to_string(rank) + "] [%^%l%$] %v");
  logger->set_level(spdlog::level::warn);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
}

bool stderr_is_tty() {
  static const bool tty = ::isatty(STDERR_FILENO) == 1;
  return tty;
}

void show_progress(const std::string& text) {
  if (!stderr_is_tty()) return;
  std::fprintf(stderr, "\r\033[K%s", text.c_str());
  std::fflush(stderr);
  g_progress_shown = true;
}

void clear_progress() {
  if (!g_progress_shown) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  g_progress_shown = false;
}

}  // namespace nmt
