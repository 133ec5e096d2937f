// SIGINT and SIGTERM, taken by one watcher thread and never by a thread that computes.
//
// Why: a signal handler runs on whichever thread the kernel picks, and the kernel writes the
// handler's frame below that thread's stack pointer. oneDNN's JIT GEMM kernels (libdnnl 2.x, the
// dnnl_sgemm and bfloat16 GEMM nmt calls) point the stack pointer at a heap workspace while they
// run (oneDNN issue #4845, fixed in 3.11), so a handler that interrupts one of them writes its
// frame into the heap: a SIGTERM once ended training in "corrupted size vs. prev_size" instead
// of a checkpoint. So main() blocks both signals before any other thread exists (every thread
// created later inherits the mask) and a watcher thread takes them with sigwait: no thread that
// runs a kernel is ever interrupted, and no system call of theirs returns EINTR.
#pragma once

#include <csignal>
#include <memory>

namespace nmt {

// Call first in main(), before any thread is created: blocks SIGINT and SIGTERM in this thread
// and starts the watcher. With no StopSignals alive a signal has the effect it had before the
// call (the default action, which ends the process, or none where it was ignored). Idempotent.
void route_stop_signals();

// The signal mask the process had before route_stop_signals(), for a child process to restore
// between fork and exec.
const sigset_t& original_signal_mask();

// While alive, SIGINT and SIGTERM are requests to stop cleanly: the first finishes the current
// unit of work (a training step), the caller saves and exits with 128 + signal. Requires
// route_stop_signals() (throws otherwise).
class StopSignals {
 public:
  enum class SecondSigint {
    kExits,    // a second SIGINT ends the process at once with status 130 (nmt train)
    kCounted,  // every signal is a request (a launcher forwards each to its workers)
  };
  explicit StopSignals(SecondSigint second = SecondSigint::kExits);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // The first signal received (SIGINT or SIGTERM), or 0.
  int requested() const;
  // The newest signal not taken yet, or 0; takes it.
  int take();
};

}  // namespace nmt
