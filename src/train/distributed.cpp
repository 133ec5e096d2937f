#include "train/distributed.h"

#include <spdlog/spdlog.h>

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "train/data_parallel.h"
#include "util/net.h"
#include "util/util.h"

// Each backend where its headers were found at configure time (CMakeLists.txt).
#ifdef NMT_WITH_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
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

const char* env_or_null(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

int env_int(const char* name, int lo, int hi) {
  const char* v = env_or_null(name);
  if (v == nullptr) throw Error(std::string(name) + " is not set (torchrun sets it)");
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi)
    throw Error(std::string(name) + "=" + v + ": expected an integer in [" + std::to_string(lo) +
                ", " + std::to_string(hi) + "]");
  return static_cast<int>(x);
}

std::string first_line(const std::string& s) {
  const auto end = s.find('\n');
  return end == std::string::npos ? s : s.substr(0, end);
}

std::string error_text(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e))
    return first_line(c->what_without_backtrace());
  return first_line(e.what());
}

}  // namespace

LaunchEnv read_launch_env() {
  LaunchEnv env;
  const bool any = env_or_null("WORLD_SIZE") != nullptr || env_or_null("RANK") != nullptr;
  if (!any) return env;
  env.world_size = env_int("WORLD_SIZE", 1, 1 << 20);
  env.rank = env_int("RANK", 0, env.world_size - 1);
  env.local_rank = env_or_null("LOCAL_RANK") ? env_int("LOCAL_RANK", 0, env.world_size - 1) : 0;
  env.under_torchrun = env_or_null("TORCHELASTIC_RUN_ID") != nullptr;
  const char* addr = env_or_null("MASTER_ADDR");
  if (env.world_size == 1 && addr == nullptr) return env;  // one process, no launcher
  if (addr == nullptr) throw Error("MASTER_ADDR is not set (torchrun sets it)");
  env.master_addr = addr;
  env.master_port = env_int("MASTER_PORT", 1, 65535);
  if (const char* v = env_or_null("TORCHELASTIC_USE_AGENT_STORE"))
    env.agent_store = std::string(v) == "True";
  if (env_or_null("TORCHELASTIC_RESTART_COUNT"))
    env.restart_count = env_int("TORCHELASTIC_RESTART_COUNT", 0, 1 << 20);
  return env;
}

bool cpu_groups_available() {
#ifdef NMT_WITH_GLOO
  return true;
#else
  return false;
#endif
}

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

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

// The text under `key`, waiting for it up to the store's timeout.
std::string text_at(c10d::Store& store, const std::string& key) {
  const auto v = store.get(key);
  return {v.begin(), v.end()};
}

// Where each rank posts its Gloo address (ProcessGroup::addresses).
const std::string kAddressKey = "nmt/gloo_address/";

#ifdef NMT_WITH_GLOO
// Gloo's network device. torch.distributed's default is the address the host name resolves to,
// which on many machines (Debian's /etc/hosts among them: 127.0.1.1) is a loopback address:
// the ranks on other machines are then told to connect to 127.x and cannot. nmt takes the
// address this machine reaches the master from, which the other machines can reach too; on the
// master's own machine, whose name may resolve to a loopback address there, its first network
// interface. GLOO_SOCKET_IFNAME overrides both, as in torch.distributed.
std::shared_ptr<gloo::transport::Device> gloo_device(const LaunchEnv& env, std::string& how) {
  if (const char* ifname = env_or_null("GLOO_SOCKET_IFNAME")) {
    how = std::string("GLOO_SOCKET_IFNAME=") + ifname;
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  if (is_loopback_address(env.master_addr)) {
    how = "MASTER_ADDR is a loopback address";
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  const std::string local = address_towards(env.master_addr, env.master_port);
  if (!local.empty() && !is_loopback_address(local)) {
    how = "the address that reaches MASTER_ADDR " + env.master_addr;
    return c10d::ProcessGroupGloo::createDeviceForHostname(local);
  }
  const std::string name = first_network_interface();
  if (!name.empty()) {
    how = "MASTER_ADDR " + env.master_addr + " is this machine" +
          (local.empty() ? "" : " (" + local + ")") + "; its first network interface, " + name;
    return c10d::ProcessGroupGloo::createDeviceForInterface(name);
  }
  how = "MASTER_ADDR " + env.master_addr + " is this machine, which has no other interface";
  return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
}

// The IP address in a Gloo TCP device's description ("tcp, ..., addr=[10.0.0.1]"); "" if none.
std::string device_ip(const std::string& description) {
  const auto begin = description.find("addr=[");
  const auto end = description.find(']', begin);
  if (begin == std::string::npos || end == std::string::npos) return "";
  return description.substr(begin + 6, end - begin - 6);
}

// Gloo waits 5 x its timeout for its first connections, so a rank whose Gloo address the others
// cannot reach (a wrong GLOO_SOCKET_IFNAME, a firewall) would fail only then, and the others
// with errors that do not name it. So every rank first listens at its Gloo address and connects
// to the next rank's (a ring: every address is tried once), within the timeout, and the ranks
// tell each other the outcome through the store: a refused connection fails every rank at once,
// naming both ranks and the address.
void check_gloo_reachable(c10d::Store& store, const LaunchEnv& env, const std::string& address,
                          std::chrono::seconds timeout) {
  // Each rank's `address` is already posted under kAddressKey.
  const std::string ip = device_ip(address);
  if (env.world_size < 2 || ip.empty()) return;
  const Listener listener(ip);
  if (listener.port() == 0) return;  // Gloo itself will say why it cannot listen there
  const auto key = [](const char* what, int rank) {
    return std::string("nmt/reach/") + what + "/" + std::to_string(rank);
  };
  store.set(key("at", env.rank), bytes_of(ip + " " + std::to_string(listener.port())));
  const int next = (env.rank + 1) % env.world_size;
  // Longer than the store's own timeout: a rank may spend the whole timeout in try_connect.
  const auto text = [&](const std::string& k) {
    store.wait({k}, 2 * timeout);
    return text_at(store, k);
  };
  const std::string there = text(key("at", next));
  const auto space = there.find(' ');
  const std::string why =
      try_connect(there.substr(0, space), std::stoi(there.substr(space + 1)), timeout);
  const std::string failure =
      why.empty() ? "ok"
                  : "cannot reach rank " + std::to_string(next) + "'s Gloo address " +
                        text_at(store, kAddressKey + std::to_string(next)) + ": " + why +
                        " (every rank's Gloo address must be reachable from the others, on any "
                        "port: check firewalls, or set GLOO_SOCKET_IFNAME to the interface of "
                        "the network they share)";
  store.set(key("outcome", env.rank), bytes_of(failure));
  // Every outcome, so that all ranks stop on the first failure, and this rank's listener stays
  // open until the rank before it has tried it.
  for (int r = 0; r < env.world_size; ++r) {
    const std::string outcome = r == env.rank ? failure : text(key("outcome", r));
    if (outcome != "ok")
      throw Error("rank " + std::to_string(env.rank) + ": " +
                  (r == env.rank ? "" : "rank " + std::to_string(r) + " ") + outcome);
  }
}
#endif

// The rendezvous did not complete: why, after the address, and the time it was given when it
// was waited out (a port in use fails at once, and is no timeout).
Error cannot_meet(const LaunchEnv& env, const std::string& endpoint, std::chrono::seconds timeout,
                  bool waited_out, const std::string& why) {
  return Error("rank " + std::to_string(env.rank) + ": cannot meet the other ranks at " + endpoint +
               " (MASTER_ADDR:MASTER_PORT)" +
               (waited_out ? " within " + std::to_string(timeout.count()) + " s" : "") + ": " +
               why);
}

// Every rank posts its WORLD_SIZE and compares it with rank 0's before the backend's own
// rendezvous, which waits out the whole timeout for ranks that a wrong size expects.
void check_world_size(c10d::Store& store, const LaunchEnv& env, std::chrono::seconds timeout,
                      const std::string& endpoint) {
  const std::string key = "nmt/world_size/";
  const std::string mine = std::to_string(env.world_size);
  const auto mismatch = [&](int rank, const std::string& theirs) {
    return Error("rank " + std::to_string(env.rank) + ": WORLD_SIZE is " + mine + " here but " +
                 theirs + " on rank " + std::to_string(rank) +
                 ": every rank must be started with the same WORLD_SIZE");
  };
  store.set(key + std::to_string(env.rank), bytes_of(mine));
  const auto size_of = [&](int rank) { return text_at(store, key + std::to_string(rank)); };
  if (env.rank != 0) {
    const std::string theirs = size_of(0);
    if (theirs != mine) throw mismatch(0, theirs);
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<int> missing;
  for (int r = 1; r < env.world_size; ++r) missing.push_back(r);
  while (!missing.empty()) {
    std::vector<int> still;
    for (const int r : missing) {
      if (!store.check({key + std::to_string(r)})) {
        still.push_back(r);
        continue;
      }
      const std::string theirs = size_of(r);
      if (theirs != mine) throw mismatch(r, theirs);
    }
    missing = std::move(still);
    if (missing.empty()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      std::string ranks;
      for (const int r : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      throw cannot_meet(
          env, endpoint, timeout, true,
          "rank" + std::string(missing.size() > 1 ? "s " : " ") + ranks + " did not join");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

ProcessGroup::ProcessGroup(const LaunchEnv& env, const torch::Device& device,
                           std::chrono::seconds timeout)
    : impl_(std::make_unique<Impl>()), rank_(env.rank), size_(env.world_size), device_(device) {
  env_ = env;
  agent_store_ = env.agent_store;
  const std::string endpoint = env.master_addr + ":" + std::to_string(env.master_port);
  const auto started = std::chrono::steady_clock::now();
  try {
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<uint16_t>(env.master_port);
    // Under torchrun's agent, the agent hosts the store and every worker is a client, in a
    // namespace of its own per restart (as torch.distributed does it).
    opts.isServer = env.rank == 0 && !env.agent_store;
    if (!env.agent_store) opts.numWorkers = static_cast<size_t>(env.world_size);
    // check_world_size waits for the workers instead, and also sees a wrong WORLD_SIZE.
    opts.waitWorkers = false;
    opts.timeout = timeout;
    auto tcp = c10::make_intrusive<c10d::TCPStore>(env.master_addr, opts);
    impl_->store = env.agent_store
                       ? c10::intrusive_ptr<c10d::Store>(c10::make_intrusive<c10d::PrefixStore>(
                             "/worker/attempt_" + std::to_string(env.restart_count), tcp))
                       : c10::intrusive_ptr<c10d::Store>(tcp);
    check_world_size(*impl_->store, env, timeout, endpoint);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // The store's own timeouts end a little early or late; half the timeout tells them apart
    // from a refusal at once.
    const bool waited_out = std::chrono::steady_clock::now() - started > timeout / 2.0;
    throw cannot_meet(env, endpoint, timeout, waited_out, error_text(e));
  }
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

std::unique_ptr<GradientSync> ProcessGroup::gradient_sync(std::vector<torch::Tensor> params) {
  return std::make_unique<DataParallelSync>(*this, std::move(params));
}

void ProcessGroup::log_members() {
  spdlog::info("data-parallel: {} process{} ({}), this is rank {}, store {}:{}{}", size_,
               size_ == 1 ? "" : "es", backend_, rank_, env_.master_addr, env_.master_port,
               env_.under_torchrun ? ", launched by torchrun" : "");
  if (rank_ != 0) return;
  const auto all = addresses();
  for (size_t r = 0; r < all.size(); ++r) spdlog::info("gloo: rank {} at {}", r, all[r]);
}

std::unique_ptr<GradientSync> LocalGroup::gradient_sync(std::vector<torch::Tensor>) {
  return std::make_unique<GradientSync>();
}

std::unique_ptr<Group> make_group(const LaunchEnv& env, const torch::Device& device,
                                  std::chrono::seconds timeout) {
  if (!env.distributed()) return std::make_unique<LocalGroup>();
  return std::make_unique<ProcessGroup>(env, device, timeout);
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
