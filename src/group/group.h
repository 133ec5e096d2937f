// The processes that work together (data-parallel training): the environment torchrun gives each
// worker, and the group's collectives behind one interface, so that one process is a group of
// one. The c10d group itself is ProcessGroup (process_group.h); c10d's headers stay in group's
// .cpp files and rendezvous.h.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace nmt {

// What torchrun (or `nmt train --nproc`) tells a worker: RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT, and under torchrun's agent TORCHELASTIC_USE_AGENT_STORE and
// TORCHELASTIC_RESTART_COUNT.
struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr;
  int master_port = 0;
  bool agent_store = false;     // torchrun's agent hosts the store: every rank is a client
  int restart_count = 0;        // torchrun restarts so far (0 on the first attempt)
  bool under_torchrun = false;  // TORCHELASTIC_RUN_ID is set
  // A process group is made for two or more processes, and for one where a launcher gave its
  // address (torchrun or --nproc with one process, as torch.distributed's env:// does), so
  // `torchrun --nproc-per-node 1` runs the collectives (NCCL on one GPU).
  bool distributed() const { return world_size > 1 || !master_addr.empty(); }
};

// Whether this build forms groups on the CPU: Gloo is built where its headers were found, and
// never against a CUDA LibTorch (pip's ships none), where groups are NCCL's, on GPUs.
bool cpu_groups_available();

// Reads the launch variables; none set means one process. Throws Error naming a variable that is
// missing or malformed (a RANK without WORLD_SIZE, a rank outside [0, WORLD_SIZE), ...).
LaunchEnv read_launch_env();

// The processes that train together, one of them this one. A single process is a group of one
// (LocalGroup), so training code has one path. Every call is a collective: all ranks make the
// same calls in the same order.
class Group {
 public:
  virtual ~Group() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The element-wise sums over ranks of host values (one small all-reduce).
  virtual std::vector<double> sum(const std::vector<double>& values) = 0;
  // Copies root's tensors into every rank's (in place; same shapes everywhere).
  virtual void broadcast(std::vector<torch::Tensor> tensors, int root) = 0;
  // Every rank's `t` (same shape everywhere), in rank order, on the CPU.
  virtual std::vector<torch::Tensor> all_gather(const torch::Tensor& t) = 0;
  // Rank 0 returns at once; the others wait, with no time limit, until rank 0 has called it
  // with the same key: for work only rank 0 does and whose length nobody can bound (preparing a
  // corpus). A rank 0 that dies ends the wait with an Error: its store goes with it, or the
  // launcher stops the group.
  virtual void wait_for_rank0(const std::string& key) = 0;
  // Rank 0's `value` on every rank (the others' `value` is not read).
  virtual std::string from_rank0(const std::string& key, const std::string& value) = 0;
  // The step this rank is at, for error messages.
  virtual void set_step(int64_t step) = 0;
  // Logs the group's make-up (rank 0; nothing for one process).
  virtual void log_members() = 0;
};

// One process.
class LocalGroup : public Group {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<double> sum(const std::vector<double>& values) override { return values; }
  void broadcast(std::vector<torch::Tensor>, int) override {}
  std::vector<torch::Tensor> all_gather(const torch::Tensor& t) override { return {t.cpu()}; }
  void wait_for_rank0(const std::string&) override {}
  std::string from_rank0(const std::string&, const std::string& value) override { return value; }
  void set_step(int64_t) override {}
  void log_members() override {}
};

// The group of this launch: a ProcessGroup when a launcher started several processes (or gave
// one an address), else a LocalGroup.
std::unique_ptr<Group> make_group(const LaunchEnv& env, const torch::Device& device,
                                  std::chrono::seconds timeout);

}  // namespace nmt
