#include "util/signals.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "util/util.h"

namespace nmt {

namespace {

// Shared by the watcher thread and the StopSignals of the main thread; atomics only.
struct Routing {
  sigset_t original_mask;
  struct sigaction original_int, original_term;  // dispositions before routing
  std::atomic<bool> started{false};
  std::atomic<int> listeners{0};
  std::atomic<bool> second_sigint_exits{true};
  std::atomic<int> first{0};    // first signal while a listener was alive
  std::atomic<int> pending{0};  // newest signal not taken yet
};

Routing& routing() {
  static Routing r;
  return r;
}

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// Without a listener: what the signal would have done had nmt not routed it.
[[noreturn]] void act_as_before(int sig) {
  Routing& r = routing();
  const struct sigaction& before = sig == SIGINT ? r.original_int : r.original_term;
  // Restores the disposition (the default, or a handler a host process had installed) and
  // delivers the signal to this thread alone, the only one that can take it.
  ::sigaction(sig, &before, nullptr);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  ::raise(sig);
  // Still here: the disposition did not end the process (a handler returned). Nothing to do.
  ::pthread_sigmask(SIG_BLOCK, &one, nullptr);
  ::_exit(128 + sig);
}

void watch() {
  Routing& r = routing();
  const sigset_t set = stop_set();
  for (;;) {
    int sig = 0;
    if (::sigwait(&set, &sig) != 0) continue;
    if (r.listeners.load() == 0) {
      const struct sigaction& before = sig == SIGINT ? r.original_int : r.original_term;
      if (before.sa_handler == SIG_IGN) continue;  // ignored, as it was (a background job's SIGINT)
      act_as_before(sig);
    }
    int expected = 0;
    const bool first = r.first.compare_exchange_strong(expected, sig);
    if (!first && sig == SIGINT && r.second_sigint_exits.load()) ::_exit(128 + SIGINT);
    r.pending.store(sig);
  }
}

}  // namespace

void route_stop_signals() {
  Routing& r = routing();
  if (r.started.exchange(true)) return;
  const sigset_t set = stop_set();
  ::pthread_sigmask(SIG_BLOCK, &set, &r.original_mask);
  ::sigaction(SIGINT, nullptr, &r.original_int);
  ::sigaction(SIGTERM, nullptr, &r.original_term);
  std::thread(watch).detach();
}

const sigset_t& original_signal_mask() { return routing().original_mask; }

StopSignals::StopSignals(SecondSigint second) {
  Routing& r = routing();
  if (!r.started.load())
    throw Error("internal: route_stop_signals() must run first in main(), before any thread");
  r.second_sigint_exits.store(second == SecondSigint::kExits);
  r.first.store(0);
  r.pending.store(0);
  r.listeners.fetch_add(1);
}

StopSignals::~StopSignals() { routing().listeners.fetch_sub(1); }

int StopSignals::requested() const { return routing().first.load(); }

int StopSignals::take() { return routing().pending.exchange(0); }

}  // namespace nmt
