#include "group/process_group.h"

#include <spdlog/spdlog.h>

#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

#include <thread>

#include "group/rendezvous.h"
#include "util/util.h"

// Each backend where its headers were found at configure time (CMakeLists.txt); Gloo's comes
// with rendezvous.h.
#ifdef NMT_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace nmt {

namespace {

// LibTorch 2 split the collectives of a process group into backends (Gloo, NCCL); 1.13 had them
// on the process group itself. Either way the same calls.
#if TORCH_VERSION_MAJOR >= 2
using Collectives = c10d::Backend;
#else
using Collectives = c10d::ProcessGroup;
#endif

}  // namespace

struct ProcessGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<Collectives> pg;
};

namespace {

class PendingWork : public ProcessGroup::Pending {
 public:
  PendingWork(c10::intrusive_ptr<c10d::Work> work, ProcessGroup* group)
      : work_(std::move(work)), group_(group) {}
  void wait() override {
    try {
      work_->wait();
    } catch (const std::exception& e) {
      group_->fail("a gradient all-reduce", e);
    }
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  ProcessGroup* group_;
};

std::string failure_key(int rank) { return "nmt/failed/" + std::to_string(rank); }

}  // namespace

ProcessGroup::ProcessGroup(const LaunchEnv& env, const torch::Device& device,
                           std::chrono::seconds timeout)
    : impl_(std::make_unique<Impl>()), rank_(env.rank), size_(env.world_size), device_(device) {
  env_ = env;
  agent_store_ = env.agent_store;
  impl_->store = meet(env, timeout);
  const std::string endpoint = env.master_addr + ":" + std::to_string(env.master_port);
  try {
    if (device.is_cuda()) {
#ifdef NMT_WITH_NCCL
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      impl_->pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, env.rank,
                                                              env.world_size, options);
      backend_ = "nccl";
#else
      throw Error("data-parallel training on CUDA needs NCCL: this build found no nccl.h");
#endif
    } else {
#ifdef NMT_WITH_GLOO
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      std::string how;
      options->devices.push_back(gloo_device(env, how));
      address_ = options->devices.back()->str() + " (" + how + ")";
      impl_->store->set(kAddressKey + std::to_string(env.rank), bytes_of(address_));
      check_gloo_reachable(*impl_->store, env, address_, timeout);
      impl_->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, env.rank,
                                                              env.world_size, options);
      backend_ = "gloo";
#else
      throw Error(
          "data-parallel training on the CPU needs Gloo: this build found no Gloo "
          "headers (Debian: libgloo-dev)");
#endif
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error("rank " + std::to_string(env.rank) + ": cannot form the data-parallel group (" +
                std::to_string(env.world_size) + " ranks, store at " + endpoint +
                (address_.empty() ? "" : ", this rank at " + address_) + "): " + error_text(e));
  }
}

ProcessGroup::~ProcessGroup() = default;

std::vector<std::string> ProcessGroup::addresses() {
  std::vector<std::string> all;
  if (backend_ != "gloo") return all;
  try {
    for (int r = 0; r < size_; ++r)
      all.push_back(text_at(*impl_->store, kAddressKey + std::to_string(r)));
  } catch (const std::exception& e) {
    fail("reading the ranks' Gloo addresses", e);
  }
  return all;
}

std::unique_ptr<ProcessGroup::Pending> ProcessGroup::all_reduce_sum(torch::Tensor t) {
  try {
    std::vector<at::Tensor> tensors{std::move(t)};
    return std::make_unique<PendingWork>(impl_->pg->allreduce(tensors), this);
  } catch (const std::exception& e) {
    fail("a gradient all-reduce", e);
  }
}

std::vector<double> ProcessGroup::sum(const std::vector<double>& values) {
  auto t = torch::tensor(values, torch::kDouble).to(device_);
  try {
    std::vector<at::Tensor> tensors{t};
    impl_->pg->allreduce(tensors)->wait();
  } catch (const std::exception& e) {
    fail("a step's sums", e);
  }
  t = t.cpu();
  return {t.data_ptr<double>(), t.data_ptr<double>() + t.numel()};
}

void ProcessGroup::broadcast(std::vector<torch::Tensor> tensors, int root) {
  torch::NoGradGuard no_grad;  // the tensors are parameters: written in place
  try {
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    // One tensor per call: Gloo broadcasts a list only when it is one tensor per device.
    for (auto& t : tensors) {
      std::vector<at::Tensor> one{t};
      impl_->pg->broadcast(one, opts)->wait();
    }
  } catch (const std::exception& e) {
    fail("the broadcast of rank " + std::to_string(root) + "'s weights", e);
  }
}

std::vector<torch::Tensor> ProcessGroup::all_gather(const torch::Tensor& t) {
  std::vector<at::Tensor> input{t.to(device_).contiguous()};
  std::vector<std::vector<at::Tensor>> output(1);
  for (int r = 0; r < size_; ++r) output[0].push_back(torch::empty_like(input[0]));
  try {
    impl_->pg->allgather(output, input)->wait();
  } catch (const std::exception& e) {
    fail("an all-gather", e);
  }
  for (auto& o : output[0]) o = o.cpu();
  return output[0];
}

void ProcessGroup::barrier() { sum({0.0}); }

std::string ProcessGroup::from_rank0(const std::string& key, const std::string& value) {
  const std::string k = "nmt/from_rank0/" + key;
  try {
    if (rank_ == 0) {
      impl_->store->set(k, bytes_of(value));
      return value;
    }
    return text_at(*impl_->store, k);
  } catch (const std::exception& e) {
    fail("reading rank 0's " + key, e);
  }
}

void ProcessGroup::wait_for_rank0(const std::string& key) {
  const std::string k = "nmt/rank0_done/" + key;
  try {
    if (rank_ == 0) {
      impl_->store->set(k, std::vector<uint8_t>{1});
      return;
    }
    while (!impl_->store->check({k})) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } catch (const std::exception& e) {
    fail("waiting for rank 0 (" + key + ")", e);
  }
}

void ProcessGroup::log_members() {
  spdlog::info("data-parallel: {} process{} ({}), this is rank {}, store {}:{}{}", size_,
               size_ == 1 ? "" : "es", backend_, rank_, env_.master_addr, env_.master_port,
               env_.under_torchrun ? ", launched by torchrun" : "");
  if (rank_ != 0) return;
  const auto all = addresses();
  for (size_t r = 0; r < all.size(); ++r) spdlog::info("gloo: rank {} at {}", r, all[r]);
}

std::string ProcessGroup::lost_ranks() {
  std::vector<int> lost;
  try {
    impl_->store->setTimeout(std::chrono::seconds(5));
    impl_->store->set(failure_key(rank_), std::vector<uint8_t>{1});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    for (;;) {
      lost.clear();
      for (int r = 0; r < size_; ++r)
        if (r != rank_ && !impl_->store->check({failure_key(r)})) lost.push_back(r);
      if (lost.empty() || std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  } catch (const std::exception&) {
    // The store is gone with its host: rank 0, unless torchrun's agent holds it.
    return agent_store_ ? "" : "rank 0 (it hosts the rendezvous store)";
  }
  if (lost.empty()) return "";
  std::string s = lost.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < lost.size(); ++i) s += (i > 0 ? ", " : "") + std::to_string(lost[i]);
  return s;
}

void ProcessGroup::fail(const std::string& what, const std::exception& e) {
  const std::string text = error_text(e);
  const std::string lost = lost_ranks();
  std::string cause = "the data-parallel group failed";
  if (!lost.empty())
    cause = "lost " + lost + " (exited, or stopped answering within train.dist_timeout)";
  throw Error("rank " + std::to_string(rank_) + ": " + cause + " during " + what + " at step " +
              std::to_string(step_ + 1) + ": " + text);
}

}  // namespace nmt
