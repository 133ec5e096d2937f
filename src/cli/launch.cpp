#include "cli/launch.h"

#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "util/signals.h"
#include "util/net.h"
#include "util/util.h"

namespace nmt {

namespace {

// This process's own command line, as the kernel has it.
std::vector<std::string> own_arguments() {
  const std::string raw = read_file("/proc/self/cmdline");
  std::vector<std::string> args;
  size_t start = 0;
  while (start < raw.size()) {
    const size_t end = raw.find('\0', start);
    args.push_back(raw.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return args;
}

// The arguments less --nproc and its value (--nproc N or --nproc=N).
std::vector<std::string> without_nproc(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--nproc") {
      ++i;
      continue;
    }
    if (args[i].rfind("--nproc=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

int exit_status(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return 1;
}

}  // namespace

int launch_local_workers(int nproc) {
  if (nproc < 1) throw Error("--nproc must be >= 1, got " + std::to_string(nproc));
  if (std::getenv("RANK") != nullptr || std::getenv("WORLD_SIZE") != nullptr)
    throw Error(
        "--nproc starts its own workers: do not combine it with torchrun (RANK or "
        "WORLD_SIZE is set)");
  const auto args = without_nproc(own_arguments());
  const std::string port = std::to_string(free_loopback_port());
  spdlog::info("--nproc {}: starting {} worker{}, store 127.0.0.1:{}", nproc, nproc,
               nproc == 1 ? "" : "s", port);

  // Workers run in their own process group: a terminal's Ctrl-C reaches this launcher only,
  // which forwards it once (a second SIGINT means "exit at once" to a worker).
  StopSignals signals(StopSignals::SecondSigint::kCounted);

  std::vector<pid_t> pids;
  for (int rank = 0; rank < nproc; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) throw Error(std::string("--nproc: fork: ") + std::strerror(errno));
    if (pid == 0) {
      ::setpgid(0, 0);
      // The worker starts with the mask the launcher had; its own main() routes the signals.
      ::pthread_sigmask(SIG_SETMASK, &original_signal_mask(), nullptr);
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", port.c_str(), 1);
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv("/proc/self/exe", argv.data());
      std::fprintf(stderr, "nmt: error: --nproc: cannot start a worker: %s\n",
                   std::strerror(errno));
      ::_exit(127);
    }
    pids.push_back(pid);
  }

  int worst = 0;
  size_t running = pids.size();
  bool stopping = false;  // a worker failed: the others are being stopped
  std::chrono::steady_clock::time_point kill_at{};
  while (running > 0) {
    if (const int sig = signals.take(); sig != 0) {
      for (const pid_t pid : pids)
        if (pid > 0) ::kill(pid, sig);
    }
    if (stopping && std::chrono::steady_clock::now() > kill_at) {
      for (const pid_t pid : pids)
        if (pid > 0) ::kill(pid, SIGKILL);
    }
    int wstatus = 0;
    const pid_t done = ::waitpid(-1, &wstatus, WNOHANG);
    if (done <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    for (auto& pid : pids) {
      if (pid != done) continue;
      pid = -1;
      --running;
      const int status = exit_status(wstatus);
      worst = std::max(worst, status);
      // As torchrun: one failed worker fails the group. The others get SIGTERM (they save if
      // they can), then SIGKILL after a grace period.
      if (status != 0 && !stopping && running > 0) {
        stopping = true;
        kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        for (const pid_t other : pids)
          if (other > 0) ::kill(other, SIGTERM);
      }
    }
  }
  return worst;
}

}  // namespace nmt
