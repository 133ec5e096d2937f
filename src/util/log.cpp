#include "util/log.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <mutex>

#include "util/io.h"

namespace nmt {

namespace {
bool g_progress_shown = false;

// The log file through nmt's checked writer, a line a write.
class CheckedFileSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit CheckedFileSink(const std::string& path) : out_(path, OutFile::Mode::kAppend) {}
  void check() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_) std::rethrow_exception(failure_);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (failure_) return;
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    try {
      out_.write({line.data(), line.size()});
      out_.flush();
    } catch (...) {
      failure_ = std::current_exception();
    }
  }
  void flush_() override {}

 private:
  OutFile out_;
  std::exception_ptr failure_;
};

std::shared_ptr<CheckedFileSink> g_log_file;
}  // namespace

void check_log_file() {
  if (g_log_file) g_log_file->check();
}

void setup_logging(const std::string& log_file, bool verbose) {
  std::vector<spdlog::sink_ptr> sinks;
  sinks.push_back(std::make_shared<spdlog::sinks::stderr_sink_mt>());
  g_log_file.reset();
  if (!log_file.empty()) {
    g_log_file = std::make_shared<CheckedFileSink>(log_file);
    sinks.push_back(g_log_file);
  }
  auto logger = std::make_shared<spdlog::logger>("nmt", sinks.begin(), sinks.end());
  logger->set_pattern("[%Y-%m-%d %H:%M:%S] [%^%l%$] %v");
  logger->set_level(verbose ? spdlog::level::debug : spdlog::level::info);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

void setup_worker_logging(int rank) {
  auto logger =
      std::make_shared<spdlog::logger>("nmt", std::make_shared<spdlog::sinks::stderr_sink_mt>());
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
