#include "group/rendezvous.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>
#include <thread>

#include "util/net.h"
#include "util/util.h"

namespace nmt {

const std::string kAddressKey = "nmt/gloo_address/";

const char* env_or_null(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

namespace {

std::string first_line(const std::string& s) {
  const auto end = s.find('\n');
  return end == std::string::npos ? s : s.substr(0, end);
}

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

#ifdef NMT_WITH_GLOO
// The IP address in a Gloo TCP device's description ("tcp, ..., addr=[10.0.0.1]"); "" if none.
std::string device_ip(const std::string& description) {
  const auto begin = description.find("addr=[");
  const auto end = description.find(']', begin);
  if (begin == std::string::npos || end == std::string::npos) return "";
  return description.substr(begin + 6, end - begin - 6);
}
#endif

}  // namespace

std::string error_text(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e))
    return first_line(c->what_without_backtrace());
  return first_line(e.what());
}

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

// The text under `key`, waiting for it up to the store's timeout.
std::string text_at(c10d::Store& store, const std::string& key) {
  const auto v = store.get(key);
  return {v.begin(), v.end()};
}

c10::intrusive_ptr<c10d::Store> meet(const LaunchEnv& env, std::chrono::seconds timeout) {
  const std::string endpoint = env.master_addr + ":" + std::to_string(env.master_port);
  const auto started = std::chrono::steady_clock::now();
  c10::intrusive_ptr<c10d::Store> store;
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
    store = env.agent_store
                ? c10::intrusive_ptr<c10d::Store>(c10::make_intrusive<c10d::PrefixStore>(
                      "/worker/attempt_" + std::to_string(env.restart_count), tcp))
                : c10::intrusive_ptr<c10d::Store>(tcp);
    check_world_size(*store, env, timeout, endpoint);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // The store's own timeouts end a little early or late; half the timeout tells them apart
    // from a refusal at once.
    const bool waited_out = std::chrono::steady_clock::now() - started > timeout / 2.0;
    throw cannot_meet(env, endpoint, timeout, waited_out, error_text(e));
  }
  return store;
}

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

}  // namespace nmt
