// `nmt train --nproc N`: data-parallel training on this machine without torchrun. Starts N
// copies of this same command line (less --nproc) with torchrun's environment (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR=127.0.0.1, a free MASTER_PORT), forwards SIGINT and SIGTERM to them,
// and, as torchrun does, stops the others when one fails.
#pragma once

namespace nmt {

// Runs the workers and returns the worst exit status among them (128 + signal for a worker
// killed by a signal).
int launch_local_workers(int nproc);

}  // namespace nmt
