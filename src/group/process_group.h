// One process's membership of a data-parallel group, over torch.distributed's c10d as PyTorch's
// own DistributedDataParallel uses it: a TCPStore rendezvous (rendezvous.h), and Gloo on the CPU
// or NCCL on CUDA for the collectives.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "group/group.h"

namespace nmt {

// One process's membership of a data-parallel group. A rank that dies or stops answering makes
// the others' calls throw Error within the timeout.
class ProcessGroup : public Group {
 public:
  // Rendezvous at MASTER_ADDR:MASTER_PORT (rank 0 hosts the store unless torchrun's agent
  // does), then a Gloo (CPU device) or NCCL (CUDA device) group.
  ProcessGroup(const LaunchEnv& env, const torch::Device& device, std::chrono::seconds timeout);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& backend() const { return backend_; }
  // Where this rank's Gloo device listens, and why there ("" for NCCL).
  const std::string& address() const { return address_; }
  // Every rank's address(), in rank order (empty for NCCL), read from the store, where each
  // rank posts its own as its Gloo device is made: for rank 0's log.
  std::vector<std::string> addresses();

  // An all-reduce (sum) in flight; wait() finishes it, leaving the sums in the tensor.
  class Pending {
   public:
    virtual ~Pending() = default;
    virtual void wait() = 0;
  };
  // Starts summing `t` (contiguous, on the group's device) in place over the ranks.
  std::unique_ptr<Pending> all_reduce_sum(torch::Tensor t);

  std::vector<double> sum(const std::vector<double>& values) override;
  void broadcast(std::vector<torch::Tensor> tensors, int root) override;
  std::vector<torch::Tensor> all_gather(const torch::Tensor& t) override;
  void barrier();
  // Through the store: rank 0 posts it under `key`, the others wait for it. One call per key.
  std::string from_rank0(const std::string& key, const std::string& value) override;
  void wait_for_rank0(const std::string& key) override;
  void set_step(int64_t step) override { step_ = step; }
  void log_members() override;

  // Throws Error for a failed collective: "rank R: lost rank(s) L during WHAT at step S: ...".
  [[noreturn]] void fail(const std::string& what, const std::exception& e);

 private:
  // After a failed collective every live rank signs in at the store; the ranks that do not
  // within a few seconds are the lost ones.
  std::string lost_ranks();
  LaunchEnv env_;
  int64_t step_ = 0;
  bool agent_store_ = false;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int size_ = 1;
  std::string backend_;
  std::string address_;
  torch::Device device_;
};

}  // namespace nmt
