// SIGINT/SIGTERM as requests to stop cleanly: the first finishes the current unit of work (a
// training step), the caller saves and exits with 128 + signal; a second SIGINT exits at once.
#pragma once

#include <memory>

namespace nmt {

// Installs the handlers for its lifetime and restores the previous ones after.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // The signal received (SIGINT or SIGTERM), or 0.
  int requested() const;

 private:
  struct Saved;
  std::unique_ptr<Saved> saved_;
};

}  // namespace nmt
