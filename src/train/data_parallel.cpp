#include "train/data_parallel.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <string_view>

#include "util/io.h"
#include "util/util.h"

namespace nmt {

DataParallelSync::DataParallelSync(ProcessGroup& group, std::vector<torch::Tensor> params,
                                   int64_t bucket_bytes)
    : group_(group), params_(std::move(params)) {
  bucket_of_.assign(params_.size(), 0);
  seen_.assign(params_.size(), false);
  for (size_t k = params_.size(); k-- > 0;) {
    const auto& p = params_[k];
    const int64_t bytes = p.numel() * static_cast<int64_t>(p.element_size());
    if (buckets_.empty() ||
        (buckets_.back().numel * static_cast<int64_t>(p.element_size()) + bytes > bucket_bytes &&
         !buckets_.back().params.empty()) ||
        p.scalar_type() != params_[buckets_.back().params.front()].scalar_type())
      buckets_.emplace_back();
    buckets_.back().params.push_back(k);
    buckets_.back().numel += p.numel();
    bucket_of_[k] = buckets_.size() - 1;
  }
  // A hook after each parameter's gradient accumulator: it runs once per backward pass, when
  // the parameter's .grad holds the whole gradient (tied weights included).
  for (size_t k = 0; k < params_.size(); ++k) {
    auto acc = torch::autograd::impl::grad_accumulator(params_[k]);
    acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, k](const torch::autograd::variable_list& outputs,
                  const torch::autograd::variable_list&) {
          mark_ready(k);
          return outputs;
        }));
    accumulators_.push_back(std::move(acc));
  }
}

DataParallelSync::~DataParallelSync() = default;

int64_t DataParallelSync::global_tokens(int64_t local_tokens) {
  return static_cast<int64_t>(group_.sum({static_cast<double>(local_tokens)})[0]);
}

void DataParallelSync::before_last_backward() {
  armed_ = true;
  next_launch_ = 0;
  for (auto& b : buckets_) b.ready = 0;
  seen_.assign(params_.size(), false);
}

void DataParallelSync::mark_ready(size_t param) {
  if (!armed_ || seen_[param]) return;
  seen_[param] = true;
  ++buckets_[bucket_of_[param]].ready;
  // Buckets start in index order on every rank, whatever order backward finishes them in: the
  // ranks' collectives must match one to one.
  while (next_launch_ < buckets_.size() &&
         buckets_[next_launch_].ready == buckets_[next_launch_].params.size())
    launch(buckets_[next_launch_++]);
}

void DataParallelSync::launch(Bucket& b) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> parts;
  parts.reserve(b.params.size());
  for (const size_t k : b.params) {
    const auto& p = params_[k];
    // A parameter without a gradient this step (a rank with no batch) contributes zeros.
    parts.push_back(p.grad().defined() ? p.grad().reshape(-1)
                                       : torch::zeros({p.numel()}, p.options()));
  }
  b.flat = torch::cat(parts);
  b.pending = group_.all_reduce_sum(b.flat);
}

void DataParallelSync::gradients_ready(const std::vector<torch::Tensor>&) {
  // Whatever backward did not complete (no batch on this rank, or none at all after an
  // out-of-memory step) starts now, in the same order.
  armed_ = false;
  while (next_launch_ < buckets_.size()) launch(buckets_[next_launch_++]);
  torch::NoGradGuard no_grad;
  for (auto& b : buckets_) {
    b.pending->wait();
    b.pending.reset();
    int64_t offset = 0;
    for (const size_t k : b.params) {
      auto& p = params_[k];
      const auto sum = b.flat.narrow(0, offset, p.numel()).view(p.sizes());
      offset += p.numel();
      if (p.grad().defined())
        p.mutable_grad().copy_(sum);
      else
        p.mutable_grad() = sum.clone();
    }
    b.flat = torch::Tensor();
  }
}

void DataParallelSync::sum(std::vector<double>& values) { values = group_.sum(values); }

std::unique_ptr<GradientSync> make_gradient_sync(Group& group, std::vector<torch::Tensor> params) {
  if (auto* process_group = dynamic_cast<ProcessGroup*>(&group))
    return std::make_unique<DataParallelSync>(*process_group, std::move(params));
  return std::make_unique<GradientSync>();  // one process: its gradients are the sums
}

namespace {
// A hash of the parameters' bytes: equal hashes on every rank mean bitwise-equal weights (up to
// a 64-bit collision).
uint64_t weights_hash(const std::vector<torch::Tensor>& params) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& p : params) {
    const auto c = p.detach().to(torch::kCPU).contiguous();
    const std::string_view bytes(static_cast<const char*>(c.data_ptr()),
                                 static_cast<size_t>(c.numel() * c.element_size()));
    h = (h ^ std::hash<std::string_view>{}(bytes)) * 0x100000001b3ULL;
  }
  return h;
}

std::vector<int64_t> gather_hashes(Group& group, uint64_t h) {
  int64_t v;
  std::memcpy(&v, &h, sizeof v);
  std::vector<int64_t> out;
  for (const auto& t : group.all_gather(torch::tensor({v}, torch::kLong)))
    out.push_back(t.item<int64_t>());
  return out;
}
}  // namespace

void broadcast_parameters(Group& group, const std::vector<torch::Tensor>& params) {
  if (group.size() == 1) return;  // the one process's weights are rank 0's
  group.broadcast(params, 0);
  check_replicas(group, params, "after the initial broadcast");
}

void check_replicas(Group& group, const std::vector<torch::Tensor>& params,
                    const std::string& when) {
  const auto all = gather_hashes(group, weights_hash(params));
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw Error("rank " + std::to_string(r) + "'s weights differ from rank 0's " + when);
}

void check_same_on_all_ranks(Group& group, const std::string& text,
                             const std::string& what) {
  const auto all = gather_hashes(group, std::hash<std::string>{}(text));
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw Error("rank " + std::to_string(r) + "'s " + what + " differs from rank 0's: every " +
                  "rank must be started with the same " + what);
}

void check_shared_run_dir(Group& group, const std::string& run_dir) {
  if (group.size() == 1) return;
  const std::string path = run_dir + "/.rank0_token";
  std::string token;
  if (group.rank() == 0) {
    std::random_device entropy;
    token = std::to_string(entropy()) + "-" + std::to_string(entropy()) + "-" +
            std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
    write_file_atomic(path, token);
  }
  token = group.from_rank0("run_dir_token", token);
  if (group.rank() == 0) return;
  const bool found = file_exists(path);
  if (found && read_file(path) == token) return;
  throw Error("rank " + std::to_string(group.rank()) + ": the run directory " + run_dir +
              " is not the one rank 0 writes (" + path +
              (found ? " holds another run's token" : " is missing") +
              "): rank 0 writes the vocabulary and the checkpoints and the other ranks read them, "
              "so --run-dir must name one directory on a file system that all machines share");
}

}  // namespace nmt
