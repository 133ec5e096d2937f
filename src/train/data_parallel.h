// Gradient synchronisation for data-parallel training, plugged into the step (train/step.h):
// gradients are summed over the ranks in buckets, each all-reduce started from autograd hooks as
// soon as its gradients are complete, so communication overlaps the rest of the backward pass
// (what c10d's Reducer does for PyTorch's DistributedDataParallel).
#pragma once

#include <memory>
#include <vector>

#include "group/group.h"
#include "group/process_group.h"
#include "train/step.h"

namespace nmt {

class DataParallelSync : public GradientSync {
 public:
  // Buckets of about bucket_bytes, in reverse parameter order (roughly the order backward
  // completes them). Keeps a reference to the group.
  DataParallelSync(ProcessGroup& group, std::vector<torch::Tensor> params,
                   int64_t bucket_bytes = int64_t{8} << 20);
  ~DataParallelSync() override;

  int64_t global_tokens(int64_t local_tokens) override;
  void before_last_backward() override;
  void gradients_ready(const std::vector<torch::Tensor>& params) override;
  void sum(std::vector<double>& values) override;

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    int64_t numel = 0;
    size_t ready = 0;    // params whose gradient is complete this step
    torch::Tensor flat;  // the bucket's gradients, summed in place
    std::unique_ptr<ProcessGroup::Pending> pending;
  };
  void mark_ready(size_t param);
  void launch(Bucket& b);

  ProcessGroup& group_;
  std::vector<torch::Tensor> params_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;
  std::vector<bool> seen_;
  size_t next_launch_ = 0;
  bool armed_ = false;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // keeps the hooks alive
};

// How a step's gradients become the same on every rank: bucketed all-reduces for a
// ProcessGroup, nothing for one process.
std::unique_ptr<GradientSync> make_gradient_sync(Group& group, std::vector<torch::Tensor> params);

// Rank 0's weights on every rank, then a check that they are equal everywhere.
void broadcast_parameters(Group& group, const std::vector<torch::Tensor>& params);

// Throws Error unless every rank's weights are bitwise rank 0's; `when` ends the message.
void check_replicas(Group& group, const std::vector<torch::Tensor>& params,
                    const std::string& when);

// Throws Error when `text` (a config, a world size) differs between ranks, naming `what`.
void check_same_on_all_ranks(Group& group, const std::string& text, const std::string& what);

// Rank 0 writes the run directory and the other ranks read it (the vocabulary, the checkpoint
// to resume from), so every rank's --run-dir must be that one directory, on a file system all
// machines share. Rank 0 leaves a new token there (.rank0_token) and posts it to the store; every
// other rank must read the same token in its own run_dir, or throws Error saying why. Called by
// every rank, by rank 0 after it has written the directory.
void check_shared_run_dir(Group& group, const std::string& run_dir);

}  // namespace nmt
