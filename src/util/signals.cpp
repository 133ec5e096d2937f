#include "util/signals.h"

#include <unistd.h>

#include <csignal>

namespace nmt {

namespace {
volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int sig) {
  if (g_stop_signal != 0 && sig == SIGINT) _exit(128 + SIGINT);
  g_stop_signal = sig;
}
}  // namespace

struct StopSignals::Saved {
  struct sigaction old_int {
  }, old_term{};
};

StopSignals::StopSignals() : saved_(std::make_unique<Saved>()) {
  g_stop_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &saved_->old_int);
  ::sigaction(SIGTERM, &sa, &saved_->old_term);
}

StopSignals::~StopSignals() {
  ::sigaction(SIGINT, &saved_->old_int, nullptr);
  ::sigaction(SIGTERM, &saved_->old_term, nullptr);
}

int StopSignals::requested() const { return g_stop_signal; }

}  // namespace nmt
