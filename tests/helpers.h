// Shared test helpers: temporary directories, files and running the nmt binary.
#pragma once

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "config/config.h"
#include "config/parse.h"
#include "util/util.h"

namespace nmt_test {

// A config choice from its JSON spelling, as a config file gives it.
template <class E>
E choice(const std::string& name) {
  return nmt::parse_choice<E>(name, "test");
}

inline std::string source_dir() { return NMT_SOURCE_DIR; }
inline std::string nmt_binary() { return NMT_BINARY; }
// The binary, quoted for a shell command line.
inline std::string nmt_bin() { return "'" + nmt_binary() + "'"; }

// A fresh directory under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "nmt-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The message of the nmt::Error that f throws ("" when it throws none).
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const nmt::Error& e) {
    return e.what();
  }
  return "";
}

// A one-step training config over the corpus (src, tgt) with no validation set, plus overrides.
inline nmt::Config config_for(const std::string& src, const std::string& tgt,
                              std::vector<std::string> overrides = {}) {
  overrides.push_back("data.train_src=" + src);
  overrides.push_back("data.train_tgt=" + tgt);
  overrides.push_back("data.valid_src=");
  overrides.push_back("data.valid_tgt=");
  return nmt::parse_config(R"({"train": {"max_steps": 1}})", overrides);
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline std::vector<std::string> read_lines_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

struct RunResult {
  int status = -1;
  std::string output;  // stdout and stderr together
};

// Runs a shell command from the source dir, capturing its combined output.
inline RunResult run_command(const std::string& command) {
  RunResult r;
  const std::string full = "cd '" + source_dir() + "' && { " + command + " ; } 2>&1";
  FILE* pipe = ::popen(full.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Starts a shell command in the background; its pid is that of the command (exec).
inline pid_t spawn(const std::string& command) {
  const std::string full = "cd '" + source_dir() + "' && exec " + command;
  const char* argv[] = {"/bin/sh", "-c", full.c_str(), nullptr};
  pid_t pid = -1;
  if (::posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0)
    return -1;
  return pid;
}

// Polls `ready` every 0.1 s for up to `seconds`.
inline bool wait_for(const std::function<bool()>& ready, int seconds) {
  for (int i = 0; i < seconds * 10; ++i) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace nmt_test
