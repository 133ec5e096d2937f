// The hooks tests use to make faults happen, in one place: read once from the environment at
// first use, then asked at named points by the code that would meet the fault. Production runs
// set none of the variables, and every hook then says "nothing to do".
//   NMT_DEBUG_FAIL_IO="N" or "N:EIO"  the Nth checked I/O operation fails (ENOSPC by default)
//   NMT_DEBUG_IO_TRACE=F              each checked I/O operation appends "N op path" to F
//   NMT_DEBUG_NAN_STEPS="3,4"         those update attempts (1-based) get a NaN loss
//   NMT_DEBUG_OOM_STEPS="3,4"         those update attempts run out of memory
//   NMT_DEBUG_EXIT="RANK:STEP"        that rank dies (no clean-up) after STEP steps, on
//                                     torchrun's first attempt only
//   NMT_DEBUG_CHECK_REPLICAS=1        compare the ranks' weights bit for bit after every step
//   NMT_DEBUG_NO_BF16                 act as a CPU without bfloat16 products
//   NMT_DEBUG_MEMORY_AVAILABLE=BYTES  act as a machine with this much memory available
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nmt {

struct TestHooks {
  int64_t fail_io_at = 0;  // 1-based I/O operation to fail; 0: none
  int fail_io_errno = 0;
  std::string io_trace;  // file that receives the I/O trace; "": none
  std::vector<int64_t> nan_steps, oom_steps;
  int exit_rank = -1;
  int64_t exit_step = -1;
  bool check_replicas = false;
  bool no_bf16 = false;
  int64_t memory_available = 0;  // bytes; 0: what the machine says

  bool nan_at(int64_t attempt) const;
  bool oom_at(int64_t attempt) const;
  // Dies at once, as from SIGKILL (no clean-up), when NMT_DEBUG_EXIT names this rank and step
  // and this is torchrun's first attempt (restart 0): so that a restart can be tested.
  void exit_if_asked(int rank, int64_t step, int restart) const;
};

// The hooks of this process. Throws Error for a malformed variable.
const TestHooks& test_hooks();

}  // namespace nmt
